"""The record of what was hidden (state.py) against a session that prepares the next launch, with the real
firejail, as root and as an unprivileged user.

Each attack runs INSIDE a first sandboxed session; the second launch then tries to read. It must refuse
(exit 65, one line, nothing run) or reveal nothing. Secrets are fresh random strings no script names.
Old code: the record was a list of path names under the project root's name, so a renamed directory, a new
git root or a rule text imitating a profile's slipped past it; and a project config could be a link to a
secret or a FIFO.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import PY, Result, Workspace, token

pytestmark = pytest.mark.sandbox


def _show(res: Result) -> Result:
    print(f"--- rc={res.rc}\n--- stdout\n{res.out}\n--- stderr\n{res.err}")  # shown when a test fails
    return res


def _session(ws: Workspace, script: str, cwd: Path | None = None) -> Result:
    """A first session that runs the attack; it must start (the attack happens inside)."""
    res = _show(ws.run("--", "sh", "-c", f"{script}; echo @@attacked; true", cwd=cwd))
    assert res.rc == 0 and "@@attacked" in res.out, res.err
    return res


def _refused_or_blind(res: Result, *secrets: str) -> None:
    """The next launch refused in one line and ran nothing, or ran and read none of the secrets."""
    assert not [s for s in secrets if s in res.out + res.err], "the next launch revealed what was hidden"
    if res.rc != 0:
        assert res.rc == 65, res.err
        assert res.err.startswith("ai-sandbox: error:") and len(res.err.strip().splitlines()) == 1
        assert "@@read" not in res.out


def _one_line(res: Result) -> str:
    """The refusal, one line (hint included)."""
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ai-sandbox: error:"), res.err
    return lines[0]


MOVES = {
    # the anchored rule no longer names the moved file; the same masks as last time when the path is recreated
    "rename": "mv config config.bak && mkdir config",
    "rename-recreate": "mv config config.bak && mkdir config && touch config/master.key",
}


@pytest.mark.parametrize("move", list(MOVES))
def test_renaming_a_visible_parent_cannot_reveal_the_secret_next_time(ws, firejail, move):
    secret = token("KEYSECRET")
    # recreated, master.key is another file at the hidden path: the watcher would end the session (143) when it
    # looks before the session's sh exits (seen under load); what this tests is the next launch
    ws.config_file.write_text('on_hidden_change = "warn"\n')
    ws.write(".gitignore", "/config/master.key\n")
    ws.write("config/app.yml", "visible\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "config")
    ws.write("config/master.key", secret + "\n")
    _session(ws, MOVES[move])
    assert (ws.repo / "config.bak" / "master.key").read_text() == secret + "\n"  # the move really happened
    res = _show(ws.run("--", "sh", "-c", "echo @@read; cat config.bak/master.key config/master.key; true"))
    _refused_or_blind(res, secret)
    assert res.rc == 65 and "config.bak/master.key" in res.err  # the record found where it went
    assert ws.run("accept").rc == 0  # the user's word clears it: the file is readable now, as the rules say
    res = _show(ws.run("--", "sh", "-c", "cat config.bak/master.key; true"))
    assert res.rc == 0 and secret in res.out


def test_moving_a_directory_into_a_dependency_directory_is_refused(ws, firejail):
    """node_modules/ is kept readable by the built-in allowlist: the secret's directory moved in there."""
    secret = token("SVCSECRET")
    ws.write(".gitignore", "/services/.env\nnode_modules/\n")
    ws.write("services/app.js", "visible\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "services")
    ws.write("services/.env", f"TOKEN={secret}\n")
    ws.write("node_modules/left-pad/index.js", "x\n")
    _session(ws, "mkdir -p node_modules/.c && mv services node_modules/.c/")
    res = _show(ws.run("--", "sh", "-c", "echo @@read; cat node_modules/.c/services/.env; true"))
    _refused_or_blind(res, secret)
    assert res.rc == 65 and "node_modules/.c/services/.env" in res.err


def test_git_init_in_the_launch_directory_is_refused(ws, firejail):
    """The next launch from sub/ has a new root with no record of its own: the enclosing one applies."""
    inner, outer = token("SUBSECRET"), token("TOPSECRET")
    ws.write(".gitignore", ".env\n")
    ws.write("sub/keep.txt", "visible\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "sub")
    ws.write("sub/.env", inner + "\n")
    ws.write(".env", outer + "\n")
    sub = ws.repo / "sub"
    _session(ws, "git init -q .", cwd=sub)
    assert (sub / ".git").is_dir()
    res = _show(ws.run("--", "sh", "-c", "echo @@read; cat .env ../.env; true", cwd=sub))
    _refused_or_blind(res, inner, outer)
    assert res.rc == 65 and "the project root changed" in res.err
    assert ws.run("accept", cwd=sub).rc == 0  # sub/ is a project of its own now, by the user's word
    assert _show(ws.run("--", "true", cwd=sub)).rc == 0


def test_moving_the_work_tree_up_is_refused(ws, firejail):
    """`core.worktree` pointing above the repository, and a repository there: a new, enclosing root."""
    secret, key = token("ENVSECRET"), token("KEYSECRET")
    ws.write(".gitignore", ".env\n/config/master.key\n")
    ws.write("config/app.yml", "visible\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "tree")
    ws.write(".env", secret + "\n")
    ws.write("config/master.key", key + "\n")
    _session(ws, "git init -q ..")
    # as a session leaves it whose end never ran (its watcher killed): the end removes it (gitsettings.py), the
    # launch must hold alone
    ws.git("config", "core.worktree", "../..")
    res = _show(ws.run("--", "sh", "-c", "echo @@read; cat .env config/master.key; true"))
    _refused_or_blind(res, secret, key)
    # the old root is a repository inside the new one now: its record applies, and the line says whose it was
    assert res.rc == 65 and ("the project root changed" in res.err or "inside this project" in res.err)


def test_a_project_rule_imitating_a_profile_is_not_exempt(ws, firejail):
    """The rule text `[.(profile ]env (.ai-sandbox.toml:1)` holds "(profile ": old code took it for the
    agent's profile, which the record lets through."""
    secret = token("ENVSECRET")
    ws.write(".gitignore", ".env\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "ignore")
    ws.write(".env", secret + "\n")
    _session(ws, "printf 'allow = [\"[.(profile ]env\"]\\n' > .ai-sandbox.toml")
    res = _show(ws.run("--", "sh", "-c", "echo @@read; cat .env; true"))
    _refused_or_blind(res, secret)
    assert res.rc == 65 and "was hidden at the last launch" in res.err


# --- the project config: a link to a secret, a link outside, a FIFO -----------------------------------------


def test_a_project_config_linked_to_a_secret_is_refused_and_never_cached(ws, firejail):
    """A `.env` of KEY="v" lines is valid TOML: old code parsed it and kept its bytes in the parse cache."""
    secret = token("ENVSECRET")
    ws.write(".gitignore", ".env\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "ignore")
    ws.write(".env", f'allow = []\nTOKEN = "{secret}"\n')
    _session(ws, "ln -sf .env .ai-sandbox.toml")
    res = _show(ws.run("--", "sh", "-c", "echo @@read; true"))
    assert res.rc != 0 and "@@read" not in res.out and secret not in res.out + res.err
    assert ".ai-sandbox.toml" in _one_line(res)
    state = ws.home / ".local" / "state"
    host = subprocess.run(["grep", "-rl", secret, str(ws.home)], capture_output=True, text=True)
    assert host.stdout == "", f"the secret was stored in {host.stdout}"
    assert state.exists()


def test_a_project_config_linked_outside_the_project_is_refused(ws, firejail, tmp_world):
    outside = tmp_world / "elsewhere.toml"
    outside.write_text('allow = [".env"]\n')
    outside.chmod(0o644)
    (ws.repo / ".ai-sandbox.toml").symlink_to(outside)
    res = _show(ws.run("--", "sh", "-c", "echo @@read; true"))
    assert res.rc != 0 and "@@read" not in res.out
    assert "outside the project" in _one_line(res) and ".ai-sandbox.toml" in res.err


def test_a_project_config_that_is_a_fifo_neither_hangs_nor_is_skipped(ws, firejail):
    os.mkfifo(ws.repo / ".ai-sandbox.toml")
    res = _show(ws.run("--", "sh", "-c", "echo @@read; true", timeout=20))
    assert res.rc != 0 and "@@read" not in res.out
    assert "not a regular file" in _one_line(res) and ".ai-sandbox.toml" in res.err


def _svc(ws: Workspace) -> str:
    """A tracked svc/app.py beside an ignored svc/.env holding a fresh secret, which is returned."""
    secret = token("SVCSECRET")
    ws.write(".gitignore", ".env\n")
    ws.write("svc/app.py", "visible\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "svc")
    ws.write("svc/.env", secret + "\n")
    return secret


def test_moving_a_directory_out_of_the_project_is_refused(ws, firejail):
    """Found by the second red-team round: `mv svc ../stash` from inside moved the masked `svc/.env` out
    of the project, where the next launch did not look (the search walks the project): the next session
    read it. A mask is a mount point, so a hidden path that vanishes during a session was moved, never
    deleted: the watcher notes it, and the next launch refuses for what it cannot find."""
    secret = _svc(ws)
    outside = ws.base / "outside"
    outside.mkdir()
    _session(ws, f"mv svc '{outside}/stash'")
    assert (outside / "stash" / ".env").read_text() == secret + "\n"  # the move really happened
    res = _show(ws.run("--", "sh", "-c", f"echo @@read; cat '{outside}/stash/.env'; true"))
    _refused_or_blind(res, secret)
    assert res.rc == 65 and "moved away during a session" in res.err
    assert ws.run("accept").rc == 0
    assert _show(ws.run("--", "true")).rc == 0


def test_a_directory_deleted_outside_a_session_is_no_reason_to_refuse(ws, firejail):
    """The user's own `rm -rf svc` between sessions: nothing vanished during a session, so nothing is
    refused (deleted or moved out cannot be told apart afterwards; only the watcher sees a move)."""
    _svc(ws)
    assert ws.run("--", "true").rc == 0
    subprocess.run(["rm", "-rf", str(ws.repo / "svc")], check=True)
    assert _show(ws.run("--", "true")).rc == 0


SWAP_PY = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
os.makedirs("decoy", exist_ok=True)
open("decoy/.env", "w").write("DECOY\n")
if libc.renameat2(-100, b"svc", -100, b"decoy", 2) != 0:  # RENAME_EXCHANGE
    sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
os.rename("decoy", sys.argv[1])
print("@@swapped")
"""


def test_swapping_a_directory_then_moving_it_out_is_refused(ws, firejail):
    """Found by the third red-team round: exchanging `svc` with a decoy (`renameat2(RENAME_EXCHANGE)`) left
    `svc/.env` changed, not vanished, and the watcher's log only noted what vanished; the real directory
    was then moved out of the project and read next time. A session's log now starts as "anything may
    have moved" and is narrowed to every hidden path that changed or vanished."""
    secret = _svc(ws)
    ws.write("swap.py", SWAP_PY)
    outside = ws.base / "outside"
    outside.mkdir()
    res = _show(ws.run("--", PY, "swap.py", str(outside / "stash")))
    assert "@@swapped" in res.out  # the session did it (the watcher then ended the session)
    assert (outside / "stash" / ".env").read_text() == secret + "\n"
    res = _show(ws.run("--", "sh", "-c", f"echo @@read; cat '{outside}/stash/.env'; true"))
    _refused_or_blind(res, secret)
    assert res.rc == 65


def test_a_session_whose_watcher_cannot_narrow_its_log_leaves_every_path_suspect(ws, firejail):
    """Found by the third red-team round: with the disk full, the watcher's note was lost and the next
    launch read what was moved out. The log is written before the sandbox starts, as "any path may have
    moved"; a watcher that cannot rewrite it leaves it so. Simulated by a log that stays "*"."""
    secret = _svc(ws)
    assert ws.run("--", "true").rc == 0
    outside = ws.base / "outside"
    outside.mkdir()
    subprocess.run(["mv", str(ws.repo / "svc"), str(outside / "stash")], check=True)  # as a session would
    hidden = ws.home / ".local" / "state" / "ai-sandbox" / "hidden"
    (record,) = [p for p in hidden.iterdir() if len(p.name) == 24]
    (hidden / f"{record.name}.moved.999999999").write_bytes(b"*\0")  # a session that could not narrow it
    res = _show(ws.run("--", "sh", "-c", f"echo @@read; cat '{outside}/stash/.env'; true"))
    _refused_or_blind(res, secret)
    assert res.rc == 65


def test_a_directory_hidden_whole_for_the_mask_limit_moved_out_is_refused(ws, firejail):
    """Found by the fourth red-team round: past `max_masks` a directory is hidden whole, so the watcher
    logs the directory while the record names the paths inside it; the exact-path match missed them, and
    a session that pushed the count over the limit could then move the directory out unnoticed."""
    secret = token("CAPSECRET")
    ws.config_file.write_text("max_masks = 2\n")
    ws.write(".gitignore", ".env\n*.log\n")
    ws.write("app/svc/main.py", "visible\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "svc")
    ws.write("app/svc/.env", secret + "\n")
    for name in ("a", "b", "c"):
        ws.write(f"app/svc/{name}.log", "log\n")
    assert _show(ws.run("--", "true")).rc == 0  # app/svc/ is hidden whole ("capped"); the record names what is in it
    outside = ws.base / "outside"
    outside.mkdir()
    _session(ws, f"mv app '{outside}/stash'")
    res = _show(ws.run("--", "sh", "-c", f"echo @@read; cat '{outside}/stash/svc/.env'; true"))
    _refused_or_blind(res, secret)
    assert res.rc == 65 and "moved away during a session" in res.err


@pytest.mark.parametrize("kept", ["out", "target"], ids=["build-output", "dependency"])
def test_a_directory_git_rm_turns_into_a_kept_one_does_not_reveal_what_was_hidden_in_it(ws, firejail, kept):
    """`out/` held one tracked file and an ignored secret; removing the tracked file makes git list `out/`
    whole, and its name keeps it readable: what the last launch hid inside must not come back."""
    secret = token("KEPTSECRET")
    ws.write(".gitignore", "token.txt\n")
    ws.write(f"{kept}/README", "r\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", kept)
    ws.write(f"{kept}/token.txt", secret + "\n")
    _session(ws, f"git rm -q {kept}/README")
    res = _show(ws.run("--", "sh", "-c", f"echo @@read; cat {kept}/token.txt; true"))
    _refused_or_blind(res, secret)
    assert res.rc == 65 and f"{kept}/token.txt" in res.err
