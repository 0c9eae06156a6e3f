"""The firejail backend's pure parts: which names it can express, the profile, the env restoration."""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile

import pytest

from ai_sandbox import verify
from ai_sandbox.backends.firejail import Firejail
from ai_sandbox.backends.host import OwnFiles, own_files
from ai_sandbox.errors import UnavailableError
from ai_sandbox.policy import Mask, Policy

fj = Firejail()


@pytest.mark.parametrize("ch", list(',"\\{};&%<>!^#') + ["\t", "\n", "\x7f", "[", "]"])
def test_rejected_characters(ch):
    assert fj.unexpressible(f"/p/a{ch}b") is not None


@pytest.mark.parametrize("path", ["/p/a..b", "/p/trail ", "/p/" + "x" * 4100, "/p/secret  file.txt", "/p/a  b/c"])
def test_rejected_shapes(path):
    assert fj.unexpressible(path) is not None


@pytest.mark.parametrize("path", ["/p/a b", "/p/a'b", "/p/a*b", "/p/a?b", "/p/é", "/p/a.b", "/p/ lead", "/p/a=b:c@d"])
def test_expressible(path):
    assert fj.unexpressible(path) is None


def test_profile_drops_capabilities_and_lists_masks():
    pol = Policy(
        root="/p", in_git=True, masks=[Mask("/p/.env", False, "ignored", "r"), Mask("/p/d", True, "ignored", "r")]
    )
    text = fj.profile(pol).decode()
    assert "caps.drop all\n" in text and "nonewprivs\n" in text
    assert text.endswith("blacklist /p/.env\nblacklist /p/d\n")


def test_profile_anchors_and_protects_ais_own_files_before_the_masks():
    pol = Policy(root="/p", in_git=True, masks=[Mask("/p/.env", False, "ignored", "r")])
    own = OwnFiles(
        create=["/h/.config/ai-sandbox"],
        protect=["/h/.config/ai-sandbox"],
        hide=["/h/.local/state/ai-sandbox/parsed"],
        anchors=["/h/.config"],
    )
    as_root = fj.profile(pol, OwnFiles(anchors=["/h/.config"], as_root=True)).decode().splitlines()
    assert "bind /h/.config,/h/.config" in as_root and "read-write /h/.config" not in as_root
    lines = fj.profile(pol, own).decode().splitlines()
    anchor = ["read-only /h/.config", "read-write /h/.config"]
    assert lines[-3 - len(anchor) :] == [
        *anchor,
        "read-only /h/.config/ai-sandbox",
        "blacklist /p/.env",
        "blacklist /h/.local/state/ai-sandbox/parsed",
    ]


def test_every_renamable_directory_above_ais_own_files_is_anchored(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / ".cfg").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    env = {"HOME": str(home), "XDG_CONFIG_HOME": str(home / ".cfg"), "XDG_CACHE_HOME": str(home / ".c")}
    own = own_files(env, fj.unexpressible, root=str(tmp_path / "repo"))
    for d in own.create:
        assert d in own.protect or any(d.startswith(p + "/") for p in own.protect)
    # home's own entries can be renamed by their owner; so can home, in a temp dir the test user owns
    assert str(home / ".cfg") in own.anchors and str(home / ".local") in own.anchors
    assert str(home) in own.anchors and "/" not in own.anchors
    assert not set(own.anchors) & set(own.protect)
    assert own.anchors == sorted(own.anchors, key=lambda p: (len(p), p))  # a parent before what it holds
    state = home / ".local" / "state" / "ai-sandbox"
    assert own.hide == [str(state / "parsed"), str(state / "locks")]  # the parse cache, the lock files


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"TMPDIR": "/t", "LD_PRELOAD": "x.so", "A-B": "1", "-x": "y", "E": ""},
        {"MULTI": "a\nb\\n\\\\c\n", "EQ": "a=b=c", "ODD": "\udcff\x01é", "BS": "\\"},
        {"BIG": "z" * 250_000, "AFTER": "1"},  # more than one chunk
    ],
)
def test_the_environment_travels_exactly(env):
    packed = verify.pack_env(env)
    assert all(len(os.fsencode(v)) <= verify.ENV_CHUNK for v in packed.values())
    got = verify.unpack_env({os.fsencode(k): os.fsencode(v) for k, v in {"container": "firejail", **packed}.items()})
    assert got == {os.fsencode(k): os.fsencode(v) for k, v in env.items()}


def test_no_carrier_means_no_environment():
    assert verify.unpack_env({b"HOME": b"/h"}) is None


def test_the_launch_check_reads_mount_points_as_mountinfo_escapes_them(tmp_path):
    info = tmp_path / "mountinfo"
    info.write_bytes(
        b"22 1 0:21 / / rw - ext4 /dev/vda rw\n"
        b"90 22 254:0 /home/u /home/u rw,relatime - ext4 /dev/vda rw\n"
        b"91 22 254:0 /x /home/u/my\\040dir\\134x\\011y rw - ext4 /dev/vda rw\n"
    )
    points = verify.mount_points(str(info))
    assert verify._escaped("/home/u") in points and verify._escaped("/home/u/my dir\\x\ty") in points
    assert verify._escaped("/home") not in points


def test_code_in_the_project_stays_writable_only_in_ai_sandboxs_own_checkout(tmp_path):
    """Found by the second red-team round: a HOME that is a git repository (dotfiles) made a pipx or
    `pip --user` install count as "inside the project", and its code writable inside."""
    import ai_sandbox

    package = os.path.realpath(os.path.dirname(ai_sandbox.__file__))
    env = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "c"), "XDG_CACHE_HOME": str(tmp_path / "k")}
    enclosing = os.path.dirname(package)
    covered = lambda own: any(package == p or package.startswith(p + "/") for p in own.protect)  # noqa: E731
    # a project whose root is the directory holding the package (an entry of sys.path, no checkout of ours): its
    # code would be the agent's to write, so the launch refuses (it was made read-only whole before)
    with pytest.raises(UnavailableError, match="import path"):
        own_files(env, fj.unexpressible, root=enclosing)
    assert covered(own_files(env, fj.unexpressible, root=str(tmp_path / "elsewhere")))
    checkout = os.path.dirname(os.path.dirname(package))  # src/ai_sandbox -> the checkout, when it is one
    if os.path.isfile(os.path.join(checkout, "pyproject.toml")):
        assert not covered(own_files(env, fj.unexpressible, root=checkout))


@pytest.fixture
def own_dir(tmp_path):
    """Where we get scratch directories: anywhere as root, only under our passwd home as a user."""
    if os.geteuid() == 0:
        yield str(tmp_path)
        return
    root = tempfile.mkdtemp(prefix="ais-unit-", dir=pwd.getpwuid(os.geteuid()).pw_dir)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_scratch_directories_are_tmpfs_after_the_read_only_lines_and_checked_as_such(own_dir):
    """A read-only line after a tmpfs would make it read-only; a directory given a tmpfs is not also masked."""
    root = own_dir
    os.mkdir(f"{root}/secrets")
    pol = Policy(
        root=root,
        in_git=True,
        masks=[Mask(f"{root}/.env", False, "ignored", "r"), Mask(f"{root}/secrets", True, "i", "r")],
    )
    me = Firejail.__new__(Firejail)
    me.user = (os.geteuid(), os.getegid())
    scratch = me.scratch(pol)
    assert scratch == [f"{root}/secrets"]
    lines = fj.profile(pol, OwnFiles(protect=["/h/.config/ai-sandbox"]), scratch).decode().splitlines()
    assert lines[-3:] == ["read-only /h/.config/ai-sandbox", f"tmpfs {root}/secrets", f"blacklist {root}/.env"]
    from ai_sandbox.backends.check import launch_check

    recs = verify.parse_spec(launch_check(pol, OwnFiles(), root, scratch))
    # .env is not there: a mask that may be missing (m); one that exists now must still exist inside (M)
    assert ("T", f"{root}/secrets") in recs and ("m", f"{root}/.env") in recs and ("M", f"{root}/secrets") not in recs
    open(f"{root}/.env", "w").close()
    assert ("M", f"{root}/.env") in verify.parse_spec(launch_check(pol, OwnFiles(), root, scratch))
    me.user = (12345, 12345)  # not the owner: firejail's tmpfs would take the owner's mode, so no scratch
    assert me.scratch(pol) == []
