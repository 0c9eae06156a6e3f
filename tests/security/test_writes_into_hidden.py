"""A write into a hidden path never reaches the host and never reveals what the path holds.

A hidden directory the agent's identity owns (as root anywhere; as a user under the home /etc/passwd names)
is an empty tmpfs of the session: the write succeeds inside and is gone at exit. Any other hidden path is a
read-only mask: the write fails. Either way the host's files are byte-for-byte what they were.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import (
    BACKENDS,  # noqa: F401  (the module runs once per backend: conftest)
    IS_ROOT,
    TEST_USER,
    Workspace,
    ensure_test_user,
    new_workspace,
    token,
)

pytestmark = pytest.mark.sandbox

WRITE = (
    "ls -A secrets; echo new > secrets/new.txt; mkdir -p secrets/d && echo x > secrets/d/y; "
    "cat secrets/new.txt; cat secrets/key.txt; echo more >> .env; rm -rf secrets/key.txt; ls -A secrets; true"
)


def _plant(ws: Workspace) -> str:
    secret = token("SCRATCHSECRET")
    ws.write(".gitignore", ".env\nsecrets/\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore")
    ws.write("secrets/key.txt", secret + "\n")
    ws.write(".env", secret + "\n")
    return secret


def _host_unchanged(ws: Workspace, secret: str) -> None:
    assert sorted(os.listdir(ws.repo / "secrets")) == ["key.txt"]
    assert (ws.repo / "secrets" / "key.txt").read_text() == secret + "\n"
    assert (ws.repo / ".env").read_text() == secret + "\n"


def test_a_write_into_a_hidden_path_never_reaches_the_host(ws, firejail):
    secret = _plant(ws)
    # root owns its project; a user's lives outside its passwd home, where firejail mounts no tmpfs for it
    scratch = ws.identity == "root" or ws.backend == "bwrap"
    doc = json.loads(ws.run("explain", "--json").out)
    writes = {h["path"]: h["writes"] for h in doc["hidden"]}
    assert writes == {
        str(ws.repo / ".env"): "refused",
        str(ws.repo / "secrets"): "scratch" if scratch else "refused",
    }
    res = ws.run("--", "sh", "-c", WRITE)
    assert res.rc == 0, res.err
    assert secret not in res.out + res.err
    if scratch:
        assert res.out.startswith("new\n"), res.out  # empty at first, then what the session wrote
    else:
        assert "new\n" not in res.out
    _host_unchanged(ws, secret)


@pytest.fixture
def passwd_home_base():
    """A world-traversable directory under the passwd home of the user who runs the sandbox (the test user
    when we are root, ourselves otherwise), with that identity; removed afterwards, with the home if made."""
    user = ensure_test_user() if IS_ROOT else None
    home = Path(pwd.getpwnam(TEST_USER).pw_dir if user else pwd.getpwuid(os.getuid()).pw_dir)
    made = not home.exists()
    if made:
        home.mkdir(parents=True)
        os.chown(home, user.uid, user.gid)
    base = home / f"ais-scratch-{os.getpid()}"
    base.mkdir()
    base.chmod(0o755)
    yield base, "user" if user else "self"
    shutil.rmtree(base, ignore_errors=True)
    if made:
        shutil.rmtree(home, ignore_errors=True)


def test_a_user_gets_a_scratch_directory_under_its_own_home(passwd_home_base, firejail):
    """firejail mounts a tmpfs for a user only on its own directory under its passwd home."""
    ws = new_workspace(*passwd_home_base)
    secret = _plant(ws)
    res = ws.run("--", "sh", "-c", WRITE)
    assert res.rc == 0, res.err
    assert res.out.startswith("new\n") and secret not in res.out + res.err, res.out + res.err
    _host_unchanged(ws, secret)


@pytest.mark.backends("firejail")
def test_the_launch_check_refuses_a_scratch_firejail_did_not_mount(ws_self, passwd_home_base, firejail):
    """A tmpfs line firejail skips (as it does, silently, where a user may not mount one) leaves the real
    directory: the check finds it on its parent's device, with what it holds, and the agent never starts.
    As a user, the project lies under our passwd home, the only place we get a scratch directory."""
    ws = ws_self if IS_ROOT else new_workspace(passwd_home_base[0], "self")
    secret = _plant(ws)
    res = ws.run("--dry-run", "--", "true")
    profile = Path(next(w for w in res.out.split() if w.startswith("--profile=")).removeprefix("--profile="))
    launch = ws.run("--", "true")  # writes the profile and the check
    assert launch.rc == 0, launch.err
    text = profile.read_text()
    assert f"tmpfs {ws.repo / 'secrets'}\n" in text
    forged = profile.with_name("forged.profile")
    forged.write_text(text.replace(f"tmpfs {ws.repo / 'secrets'}\n", ""))
    check = next(p for p in res.out.split() if "/check-" in p)
    proc = subprocess.run(
        [shutil.which("firejail"), "--quiet", f"--profile={forged}", "--", *_verifier(res.out), check, "cat",
         "secrets/key.txt"],
        cwd=ws.repo, capture_output=True, text=True, env=ws.env(),
    )  # fmt: skip
    assert proc.returncode == 69, proc.stdout + proc.stderr
    assert "is on its parent's filesystem" in proc.stderr or "not a mount point" in proc.stderr, proc.stderr
    assert secret not in proc.stdout


def _verifier(dry_run_out: str) -> list[str]:
    words = dry_run_out.split()
    i = words.index("-I")
    return [words[i - 1], "-I", "-S", words[i + 2]]
