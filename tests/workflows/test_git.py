"""git inside the sandbox behaves as outside for the agent's own changes, and never records a hidden file.

A repository with a tracked file a `block` rule hides (prod.tfvars) and, in the git-crypt variant, an
encrypted file and its key, both hidden. The agent's usual sequence runs once through ai-sandbox and once
directly (the control) on identical copies; afterwards both repositories must hold the same commits, index,
stash and work tree, and the hidden files their original content — as root and as the test user, with
firejail and with the docker backend (podman).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from ai_sandbox import supervise
from tests.conftest import (
    AIS,
    BACKENDS,  # noqa: F401  (the module runs once per backend: conftest)
    Workspace,
    default_signals,
    require,
    token,
)

pytestmark = pytest.mark.sandbox

# What agents run all day: status, diff, add -A, commit -a, stash -u / pop, a branch, a rebase, reset --hard.
AGENT = r"""
set -e
echo "change 1" >> app.py
git status --porcelain
git diff --stat
git add -A
git commit -qm "agent: add"
echo "change 2" >> app.py
git commit -qam "agent: commit -a"
echo wip >> app.py
echo new > new.txt
git stash -q -u
git status --porcelain
git stash pop -q
git add -A
git commit -qm "agent: after stash"
git checkout -qb feature
echo feature > feature.txt
git add feature.txt
git commit -qm "agent: feature"
git checkout -q main
echo main > main.txt
git add main.txt
git commit -qm "agent: main"
git rebase -q feature
echo junk >> app.py
git reset -q --hard
git log --format=%s
echo AGENT-DONE
"""


def _repo(ws: Workspace, crypt: bool) -> dict[str, str]:
    """The fixture repository; returns the hidden tracked files' content by path."""
    ws.git("config", "user.name", "agent")
    ws.git("config", "user.email", "agent@example.invalid")
    secret = token("TFSECRET")
    ws.write("app.py", "print('app')\n")
    ws.write("prod.tfvars", f'db_password = "{secret}"\n')
    ws.write(".ai-sandbox.toml", 'block = ["*.tfvars"]\n')
    hidden = {"prod.tfvars": f'db_password = "{secret}"\n'}
    if crypt:
        require("git-crypt")
        subprocess.run(["git-crypt", "init"], cwd=ws.repo, check=True, capture_output=True)
        ws.write(".gitattributes", "vault.txt filter=git-crypt diff=git-crypt\n")
        hidden["vault.txt"] = token("VAULT") + "\n"
        ws.write("vault.txt", hidden["vault.txt"])
    ws.git("add", "-A")
    ws.git("commit", "-qm", "project")
    assert ws.git("status", "--porcelain") == ""
    return hidden


def _state(repo: Path, run_git) -> dict[str, object]:
    """What the session leaves: commits (messages and trees), index, stash, status; dates and ids aside."""

    def g(*args: str) -> str:
        return run_git(repo, *args)

    return {
        "log": sorted(g("log", "--format=%s %T", "--all").splitlines()),  # commits in one second tie: no order
        "index": g("ls-files", "-s", "-t"),
        "stash": g("stash", "list", "--format=%s"),
        "status": g("status", "--porcelain", "--untracked-files=all"),
        "head": g("rev-parse", "--abbrev-ref", "HEAD"),
    }


def _run_git(ws: Workspace):
    def run(repo: Path, *args: str) -> str:
        return ws.git(*args, cwd=repo)

    return run


def _direct(ws: Workspace, cwd: Path, script: str) -> subprocess.CompletedProcess[str]:
    """The control: the same script, run without ai-sandbox, as the workspace's identity."""
    cmd = ["sh", "-c", script]
    if ws.user:
        cmd = ["setpriv", f"--reuid={ws.user.uid}", f"--regid={ws.user.gid}", "--clear-groups", "--", *cmd]
    return subprocess.run(cmd, cwd=cwd, env=ws.env(), capture_output=True, text=True, timeout=60)


def _wait_marks(ws: Workspace, repo: Path, *theirs: str) -> str:
    """The session's end clears ai-sandbox's marks in the background (the watcher): wait, briefly, until
    only the user's own (theirs) are left; the listing then."""
    listing = ""
    for _ in range(200):  # 10 s: a loaded CI machine (the watcher waits for firejail's exit, then runs git)
        listing = ws.git("ls-files", "-t", cwd=repo)
        if [line for line in listing.splitlines() if line.startswith("S ")] == [f"S {p}" for p in theirs]:
            break
        time.sleep(0.05)
    return listing


def _session_in_background(ws: Workspace) -> subprocess.Popen[bytes]:
    """`ai-sandbox -- sleep 30` in a process group of its own, returned once prod.tfvars is marked."""
    proc = subprocess.Popen(
        [AIS, *ws.backend_args, "--", "sleep", "30"],
        cwd=ws.repo,
        env=ws.env(),
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        preexec_fn=default_signals,
    )
    for _ in range(200):
        if "S prod.tfvars" in ws.git("ls-files", "-t"):
            break
        time.sleep(0.05)
    return proc


def _copy(ws: Workspace) -> Path:
    control = ws.base / "control"
    shutil.copytree(ws.repo, control, symlinks=True)
    if ws.user:
        subprocess.run(["chown", "-R", f"{ws.user.uid}:{ws.user.gid}", str(control)], check=True)
    return control


def _check(ws: Workspace, hidden: dict[str, str], res, control: Path) -> None:
    out = res.out + res.err
    assert "AGENT-DONE" in res.out, out
    for content in hidden.values():
        assert content.strip() not in out
    ctl = _direct(ws, control, AGENT)
    assert "AGENT-DONE" in ctl.stdout, ctl.stdout + ctl.stderr
    # inside, git saw no hidden file as modified: the same output as the control's
    assert res.out == ctl.stdout
    listing = _wait_marks(ws, ws.repo)
    assert not any(line.startswith("S ") for line in listing.splitlines()), listing
    assert _state(ws.repo, _run_git(ws)) == _state(control, _run_git(ws))
    for rel, content in hidden.items():
        assert (ws.repo / rel).read_text() == content  # untouched on disk
        if rel != "vault.txt":  # a git-crypt blob is the encrypted text: compared through the trees above
            assert ws.git("show", f"HEAD:{rel}") == content  # and in the last commit, not emptied


@pytest.mark.parametrize("crypt", [False, True], ids=["blocked", "git-crypt"])
def test_the_agents_git_sequence_leaves_what_it_would_without_the_sandbox(ws, firejail, crypt):
    hidden = _repo(ws, crypt)
    control = _copy(ws)
    res = ws.run("--", "sh", "-c", AGENT)
    _check(ws, hidden, res, control)


def test_marks_a_user_set_stay_and_a_crashed_session_is_repaired(ws_self, firejail):
    ws = ws_self
    _repo(ws, crypt=False)
    ws.write("notes.txt", "mine\n")
    ws.git("add", "notes.txt")
    ws.git("commit", "-qm", "notes")
    ws.git("update-index", "--skip-worktree", "notes.txt")  # the user's own
    res = ws.run("--", "sh", "-c", "git ls-files -t")
    assert "S prod.tfvars" in res.out and "S notes.txt" in res.out, res.out + res.err
    listing = _wait_marks(ws, ws.repo, "notes.txt")
    assert "H prod.tfvars" in listing and "S notes.txt" in listing
    # a session killed with its watcher (a crash, the OOM killer) leaves the mark: the next launch clears it.
    # The watcher has a session of its own (kill(0) from inside must not reach it): killed by its pid.
    proc = _session_in_background(ws)
    # The launch execs the backend: its children are the watcher, the sandbox and, under firejail, helpers
    # firejail runs as full root while it sets up (fseccomp, fcopy), which a user may not signal and which end
    # by themselves (EPERM, then gone: 1 run in 6 on Debian 13's firejail 0.9.74)
    for pid in supervise.children(proc.pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    time.sleep(0.3)
    assert "S prod.tfvars" in ws.git("ls-files", "-t")  # left behind: nobody cleared it
    assert ws.run("--", "true").rc == 0
    listing = _wait_marks(ws, ws.repo, "notes.txt")
    assert "H prod.tfvars" in listing and "S notes.txt" in listing


@pytest.mark.parametrize("crypt", [False, True], ids=["blocked", "git-crypt"])
def test_the_agents_git_sequence_with_the_docker_backend(ws_self, git_container, crypt):
    ws = ws_self
    hidden = _repo(ws, crypt)
    control = _copy(ws)
    res = git_container("--", "sh", "-c", AGENT)
    _check(ws, hidden, res, control)


def test_no_hook_of_the_repository_runs_outside_the_sandbox(ws, firejail):
    """Setting and clearing the marks writes the index, which runs git's post-index-change hook: from
    .git/hooks or core.hooksPath, both writable inside. A session planted one: it must never run."""
    ws.config_file.write_text("confine_writes = false\n")  # confined, .git/hooks and ~/.gitconfig are read-only
    _repo(ws, crypt=False)
    secret = token("HOOKSECRET")
    ws.write(".env", secret + "\n")
    ws.write(".gitignore", ".env\nleak*\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore")
    plant = (
        'printf "#!/bin/sh\\ncat %s/.env > %s/leak-$1\\n" "$PWD" "$PWD" > .git/hooks/post-index-change; '
        "chmod +x .git/hooks/post-index-change; mkdir -p dist/h; cp .git/hooks/post-index-change dist/h/; "
        # --global: the repository's own config loses it at the session's end (gitsettings.py); this is about
        # ai-sandbox's index writes, which must run no hook whatever config names one
        'git config --global core.hooksPath "$PWD/dist/h"; echo planted'
    )
    res = ws.run("--", "sh", "-c", plant)
    assert "planted" in res.out, res.out + res.err
    assert ws.run("--", "true").rc == 0
    time.sleep(0.5)  # the watcher's clearing of the marks, after the session
    assert not list(ws.repo.glob("leak*")), "a hook of the repository ran outside the sandbox"
    _wait_marks(ws, ws.repo)


def test_sparse_checkout_refuses_until_git_is_told_to_keep_the_marks(ws_self, firejail):
    """With sparse checkout on, git clears the mark of every present file at the first command inside (a
    masked file is present), and root's commit -a recorded the hidden file emptied."""
    ws = ws_self
    hidden = _repo(ws, crypt=False)
    ws.write("app/x.py", "x\n")
    ws.git("add", "app/x.py")
    ws.git("commit", "-qm", "app")
    ws.git("sparse-checkout", "set", "--no-cone", "/*")
    res = ws.run("--", "sh", "-c", "echo ran")
    assert res.rc == 65 and "ran" not in res.out, res.out + res.err
    assert "sparse.expectFilesOutsideOfPatterns" in res.err and res.err.count("\n") <= 2, res.err
    ws.git("config", "sparse.expectFilesOutsideOfPatterns", "true")
    res = ws.run(
        "--",
        "sh",
        "-c",
        'git status --porcelain; echo c >> app.py; git commit -qam w; echo "[$(git show HEAD:prod.tfvars)]"',
    )
    assert res.rc == 0, res.err
    assert res.out.startswith("[") and hidden["prod.tfvars"].strip() in ws.git("show", "HEAD:prod.tfvars")
    assert "prod.tfvars" not in res.out.split("[")[0]


@pytest.mark.parametrize("how", ["SIGHUP", "SIGTERM"])
def test_marks_are_cleared_when_the_session_is_hung_up_or_terminated(ws_self, firejail, how):
    """A closed terminal sends SIGHUP to the whole process group, `timeout` SIGTERM: the watcher outlives
    the sandbox and clears the marks."""
    ws = ws_self
    _repo(ws, crypt=False)
    proc = _session_in_background(ws)
    os.killpg(proc.pid, getattr(signal, how))
    proc.wait(timeout=10)
    listing = _wait_marks(ws, ws.repo)
    assert "H prod.tfvars" in listing, listing


def test_an_edit_not_staged_to_a_hidden_tracked_file_is_named_at_the_launch(ws, firejail):
    """git inside takes the index's copy of a hidden tracked file (its mark), so `commit -a` there leaves out an edit
    you had not staged, where the same command outside records it (found by make fuzz; a documented gap): the
    launch names the file, and the edit stays on your disk. An unedited hidden file, and a git-crypt file (stored
    encrypted, so never the work tree's bytes), are not named."""
    hidden = _repo(ws, crypt=True)
    ws.write("prod.tfvars", 'db_password = "edited"\n')
    res = ws.run("--", "sh", "-c", "echo more >> app.py; git commit -qam agent; echo DONE")
    assert "DONE" in res.out, res.out + res.err
    said = [line for line in res.err.splitlines() if "have not staged" in line]
    assert len(said) == 1 and "prod.tfvars" in said[0] and "vault.txt" not in said[0], res.err
    _wait_marks(ws, ws.repo)
    assert ws.git("show", "HEAD:prod.tfvars") == hidden["prod.tfvars"]  # the gap: outside, the edit is committed
    assert (ws.repo / "prod.tfvars").read_text() == 'db_password = "edited"\n'
    assert ws.git("status", "--porcelain").splitlines() == [" M prod.tfvars"]
    ws.git("checkout", "--", "prod.tfvars")
    res = ws.run("--", "true")
    assert "have not staged" not in res.err, res.err


def test_a_hidden_directory_holding_tracked_files_is_a_mask_not_a_scratch(ws_self, firejail):
    """In an empty scratch a hidden tracked file is missing, which git takes for a sparse entry: `git checkout`
    of a branch where it differs succeeded and left the old file behind, and the user's next `commit -a`
    reverted the branch's change. A read-only mask keeps git refusing, as over any local change."""
    ws = ws_self
    ws.git("config", "user.name", "agent")
    ws.git("config", "user.email", "agent@example.invalid")
    ws.write(".ai-sandbox.toml", 'block = ["config/"]\n')
    ws.write("config/prod.json", "MASTER\n")
    ws.git("add", "-A")
    ws.git("commit", "-qm", "config")
    ws.git("checkout", "-qb", "feature")
    ws.write("config/prod.json", "FEATURE\n")
    ws.git("commit", "-qam", "feature")
    ws.git("checkout", "-q", "main")
    doc = json.loads(ws.run("explain", "--json").out)
    assert [h["writes"] for h in doc["hidden"] if h["path"] == str(ws.repo / "config")] == ["refused"]
    res = ws.run("--", "sh", "-c", "git checkout -q feature; echo rc=$?")
    assert "rc=0" not in res.out, res.out + res.err
    _wait_marks(ws, ws.repo)
    assert ws.git("rev-parse", "--abbrev-ref", "HEAD").strip() == "main"
    assert ws.git("status", "--porcelain") == "" and (ws.repo / "config" / "prod.json").read_text() == "MASTER\n"
