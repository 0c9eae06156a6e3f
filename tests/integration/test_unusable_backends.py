"""Where no backend can sandbox, or one refuses this user: every refusal is one ai-sandbox line with exit 69
and a hint that fits, auto notices the change without `doctor`, and the commands that start no agent
(explain, init, --dry-run, profiles, alias) still work, naming the backend whose rules they show."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import AIS, Workspace, chown_tree, plant_env, require, root_only

pytestmark = pytest.mark.sandbox

USERS = Path("/etc/firejail/firejail.users")


@contextlib.contextmanager
def _firejail_users(content: str | None) -> Iterator[None]:
    """/etc/firejail/firejail.users as content (None: absent) for the block, then as it was."""
    saved = USERS.read_bytes() if USERS.exists() else None
    try:
        USERS.unlink(missing_ok=True)
        if content is not None:
            USERS.write_text(content)
        yield
    finally:
        USERS.unlink(missing_ok=True)
        if saved is not None:
            USERS.write_bytes(saved)


def _one_line(err: str) -> None:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("ai-sandbox: error: "), err


def test_a_firejail_that_refuses_the_user_is_one_line_and_auto_moves_to_bwrap_and_back(ws, firejail):
    """firejail.users naming only root: firejail printed four lines of its own and exited 1, and auto kept
    choosing it from its cache until `doctor` ran. Now auto takes bwrap at the next launch, an explicit
    --backend firejail refuses in one line (69), and auto takes firejail again once the file names the user."""
    root_only("writes /etc/firejail/firejail.users")
    if ws.identity == "root":
        pytest.skip("firejail lets root in whatever firejail.users says: the user run covers it")
    require("bwrap")
    secret = plant_env(ws)
    read = ["--", "sh", "-c", "cat .env; echo DONE"]
    first = ws.run(*read)  # auto's verdict cached: firejail works
    assert first.rc == 0 and "DONE" in first.out and secret not in first.out, first.err
    with _firejail_users("root\n"):
        moved = ws.run(*read)
        assert moved.rc == 0 and "DONE" in moved.out and secret not in moved.out, moved.err
        assert "backend  bwrap" in ws.run("--dry-run", "--", "true").out
        refused = ws.run("--backend", "firejail", "--", "sh", "-c", "echo RAN")
        assert refused.rc == 69 and "RAN" not in refused.out
        _one_line(refused.err)
        assert "firejail refuses user" in refused.err and "firecfg --add-users" in refused.err
    assert "backend  firejail" in ws.run("--dry-run", "--", "true").out


@pytest.fixture
def chroot_dir(tmp_world) -> Iterator[Path]:
    """A directory that holds the whole system by bind mounts of /'s directories, but is no mount itself:
    chrooted there, no mount is at /, as in a plain chroot of a debootstrapped tree."""
    root_only("chroot and mounts")
    require("unshare")
    top = tmp_world / "chroot"
    top.mkdir()
    names = [
        n for n in os.listdir("/") if os.path.isdir(os.path.join("/", n)) and not os.path.islink(os.path.join("/", n))
    ]
    for name in names:
        (top / name).mkdir()
    for name in os.listdir("/"):
        if os.path.islink(os.path.join("/", name)):
            (top / name).symlink_to(os.readlink(os.path.join("/", name)))
    yield top


def _in_chroot(top: Path, ws: Workspace, argv: list[str], user: bool) -> subprocess.CompletedProcess[str]:
    binds = " ".join(
        f'mount --rbind "/{n}" "$t/{n}";' for n in os.listdir(top) if (top / n).is_dir() and not (top / n).is_symlink()
    )
    inner = [AIS, *argv]
    if user:
        assert ws.user is not None
        inner = ["setpriv", f"--reuid={ws.user.uid}", f"--regid={ws.user.gid}", "--clear-groups", "--", *inner]
    script = f't="$1"; shift; {binds} exec chroot "$t" /bin/sh -c \'cd "$PWD_IN" && exec "$@"\' sh "$@"'
    return subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", str(top), *inner],
        env={**ws.env(), "PWD_IN": str(ws.repo)},
        cwd=ws.repo,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_in_a_chroot_every_command_says_so_and_the_rules_can_still_be_read(ws, chroot_dir, firejail):
    """A chroot: bwrap cannot make / a slave mount, firejail leaves /usr writable. The launch refuses in one
    line whose hint is the chroot (not "move the directory", not "run doctor" twice); doctor says user
    namespaces cannot be created here; explain, init, --dry-run, profiles and alias work, saying which
    backend's rules they show."""
    require("bwrap")
    secret = plant_env(ws)
    user = ws.user is not None
    if ws.user is not None:
        chown_tree(ws.base, ws.user)
    launch = _in_chroot(chroot_dir, ws, ["--", "sh", "-c", "cat .env; echo RAN"], user)
    assert launch.returncode == 69 and "RAN" not in launch.stdout and secret not in launch.stdout
    _one_line(launch.stderr)
    assert "cannot sandbox in a chroot" in launch.stderr and "not in a chroot" in launch.stderr
    assert "runs of blanks" not in launch.stderr and "doctor" not in launch.stderr

    doctor = _in_chroot(chroot_dir, ws, ["doctor"], user)
    assert doctor.returncode == 69
    text = doctor.stdout + doctor.stderr
    assert text.count("cannot sandbox in a chroot") == 2 and "run `ai-sandbox doctor`" not in text, text
    assert "user namespaces: the kernel allows" in text and "cannot create one" in text, text
    assert "✓ project policy" in text, text

    explain = _in_chroot(chroot_dir, ws, ["explain"], user)
    assert explain.returncode == 0, explain.stderr
    assert "backend  firejail (assumed: no backend works here" in explain.stdout
    assert ".env" in explain.stdout and "a launch would refuse: no sandbox backend works here" in explain.stdout
    dry = _in_chroot(chroot_dir, ws, ["--dry-run", "--", "true"], user)
    assert dry.returncode == 0 and "backend  firejail (assumed" in dry.stdout, dry.stdout + dry.stderr
    for argv in (["profiles"], ["alias"]):
        other = _in_chroot(chroot_dir, ws, argv, user)
        assert other.returncode == 0, other.stderr
    init = _in_chroot(chroot_dir, ws, ["init"], user)
    assert init.returncode == 0 and (ws.repo / ".ai-sandbox.toml").is_file(), init.stderr
    assert secret not in launch.stdout + doctor.stdout + explain.stdout + dry.stdout + init.stdout


def test_outside_a_chroot_no_backend_is_told_it_is_in_one(ws_self, firejail):
    """The chroot test must not pass because every place looks like a chroot to ai-sandbox."""
    res = ws_self.run("doctor")
    assert "chroot" not in res.out + res.err
    assert "✓ backend firejail" in res.out + res.err, res.out + res.err
