"""What one session changes cannot un-hide a secret for a later launch, nor leave the repository other than
the same commands leave it without the sandbox: the third red team's five findings (F1-F5), each as it was
reproduced, on firejail and bwrap, as root and as an unprivileged user.

Each attack runs INSIDE a first sandboxed session; the next launch then tries to read. It must refuse (exit
65, one line, nothing run) or reveal nothing. Repository damage is judged against a control repository where
the same commands ran without any sandbox. Secrets are fresh random strings no script names.
(tests/security/test_model.py plays random sequences of such sessions.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import (
    BACKENDS,  # noqa: F401  (the module runs once per backend: conftest)
    PY,
    Result,
    Workspace,
    chown_tree,
    plant_env,
    sessions_ended,
    token,
)
from tests.security.test_record import _refused_or_blind, _session, _show

pytestmark = pytest.mark.sandbox


def _refused(res: Result, *secrets: str) -> str:
    """The launch refused in one line (exit 65), ran nothing and showed none of the secrets; its line."""
    assert not [s for s in secrets if s in res.out + res.err], "the next launch revealed what was hidden"
    assert res.rc == 65, res.err
    lines = res.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ai-sandbox: error:"), res.err
    assert "@@read" not in res.out
    return lines[0]


# The attacks that move what lies outside the project (the home, /tmp): with write containment (the default) the
# move itself fails (test_writes_contained.py); the record must hold for a user who turned containment off too.
UNCONFINED = "confine_writes = false\n"


def _repo(ws: Workspace, path: Path) -> None:
    ws.git("init", "-q", "-b", "main", str(path))
    ws.git("commit", "-q", "--allow-empty", "-m", "init", cwd=path)


# --- F1: a global block in the home, its directory moved aside ----------------------------------------------

MOVES_IN_HOME = {
    "beside": "mv ~/.aws ~/.aws_old",  # found where it went: the home's own listing
    "deeper": "mkdir -p ~/x/y && mv ~/.aws ~/x/y/aws",  # nowhere to be found: the session's log names it
}


@pytest.mark.parametrize("move", list(MOVES_IN_HOME))
def test_a_global_block_whose_directory_a_session_moved_refuses_every_later_launch(ws, firejail, move):
    """F1: `block = ["~/.aws/credentials"]`; session 1 renames ~/.aws (visible, its parent writable). Old code:
    every later launch showed the file under its new name: the record kept paths inside the project only,
    and the search for moved directories walked the project only."""
    secret = token("AWSSECRET")
    (ws.home / ".aws").mkdir()
    (ws.home / ".aws" / "credentials").write_text(secret + "\n")
    ws.config_file.write_text('block = ["~/.aws/credentials"]\n')
    other = ws.base / "other"
    _repo(ws, other)
    _session(ws, f"cat ~/.aws/credentials; {MOVES_IN_HOME[move]}")
    assert (ws.home / ".aws" / "credentials").exists()  # confined (the default): the home is read-only inside
    ws.config_file.write_text(UNCONFINED + 'block = ["~/.aws/credentials"]\n')
    _session(ws, f"cat ~/.aws/credentials; {MOVES_IN_HOME[move]}")
    moved = {"beside": ".aws_old", "deeper": "x/y/aws"}[move]
    assert (ws.home / moved / "credentials").read_text() == secret + "\n"  # the move really happened
    read = f"echo @@read; cat ~/{moved}/credentials; true"
    line = _refused(_show(ws.run("--", "sh", "-c", read)), secret)
    assert ".aws/credentials" in line
    if move == "beside":
        assert ".aws_old/credentials" in line  # found, and named
    # a project never launched before gets the same answer: the record of global blocks is the user's
    _refused(_show(ws.run("--", "sh", "-c", read, cwd=other)), secret)
    assert ws.run("accept").rc == 0  # the user's word: readable now, as the rules say
    assert secret in _show(ws.run("--", "sh", "-c", read)).out
    assert secret in _show(ws.run("--", "sh", "-c", read, cwd=other)).out


@pytest.mark.parametrize("move", list(MOVES_IN_HOME))
def test_a_session_launched_from_the_home_itself_cannot_unrecord_a_global_block(ws, firejail, move):
    """Fifteenth red team: a launch from the home (no repository there: the home is its root) holds
    ~/.aws/credentials inside its root; old code recorded it as that root's own and wrote the user's record of
    global blocks empty. Its session moved ~/.aws and put a decoy in its place, and the project's next launch, with
    nothing recorded, showed the secret where it went."""
    secret = token("AWSSECRET")
    (ws.home / ".aws").mkdir()
    (ws.home / ".aws" / "credentials").write_text(secret + "\n")
    # warn: the watcher would end the session for the hidden file it replaces, racing the shell (stock Debian 13)
    ws.config_file.write_text(UNCONFINED + 'block = ["~/.aws/credentials"]\non_hidden_change = "warn"\n')
    _show(ws.run("--", "true"))
    decoy = "mkdir ~/.aws && echo decoy > ~/.aws/credentials"
    res = ws.run("--", "sh", "-c", f"cat ~/.aws/credentials; {MOVES_IN_HOME[move]} && {decoy}", cwd=ws.home)
    assert res.rc == 0 and secret not in res.out + res.err, res.err
    moved = {"beside": ".aws_old", "deeper": "x/y/aws"}[move]
    assert (ws.home / moved / "credentials").read_text() == secret + "\n"  # the move really happened
    _refused(_show(ws.run("--", "sh", "-c", f"echo @@read; cat ~/{moved}/credentials; true")), secret)


def test_a_global_block_a_session_moved_into_its_project_and_ignored_there_refuses(ws, firejail):
    """Sixteenth red team: a session moved ~/.aws into its project and ignored it there (`.aws/` in .gitignore). The
    project's next launch found the directory hidden by the project's own rules, passed, and wrote the user's record
    of global blocks anew: another project's launch then showed the secret. That record holds for every project."""
    secret = token("AWSSECRET")
    (ws.home / ".aws").mkdir()
    (ws.home / ".aws" / "credentials").write_text(secret + "\n")
    # warn: the watcher would end the session for the hidden file it replaces, racing the shell (CI as a user)
    ws.config_file.write_text(UNCONFINED + 'block = ["~/.aws/credentials"]\non_hidden_change = "warn"\n')
    other = ws.base / "other"
    _repo(ws, other)
    proj = ws.home / "projq"  # in the home: a rename there moves ~/.aws (from the repository it would be a copy)
    _repo(ws, proj)
    _show(ws.run("--", "true", cwd=proj))
    move = "mv ~/.aws .aws && mkdir ~/.aws && echo decoy > ~/.aws/credentials && echo .aws/ >> .gitignore"
    assert _show(ws.run("--", "sh", "-c", move, cwd=proj)).rc == 0
    assert (proj / ".aws" / "credentials").read_text() == secret + "\n"  # the move really happened
    read = f"echo @@read; cat {proj}/.aws/credentials; true"
    _refused(_show(ws.run("--", "sh", "-c", read, cwd=proj)), secret)
    _refused(_show(ws.run("--", "sh", "-c", read, cwd=other)), secret)


# --- F4: a file hidden inside a tool directory, the directory then ignored whole ------------------------------


def test_what_was_hidden_inside_a_tool_directory_stays_hidden_when_it_is_ignored_whole(ws, firejail):
    """F4: `.gemini/` (kept readable by the built-in tool allowlist) is tracked, `.gemini/.env` ignored by a
    `.env` rule. One line in .gitignore and `git rm --cached` made git list `.gemini/` whole: old code exempted
    everything under a directory an allowlist keeps, so the next launch showed the file."""
    secret = token("GEMINISECRET")
    ws.write(".gitignore", ".env\n")
    ws.write(".gemini/settings.json", "{}\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "gemini")
    ws.write(".gemini/.env", secret + "\n")
    _session(ws, 'echo ".gemini/" >> .gitignore && git rm -q -r --cached .gemini')
    line = _refused(_show(ws.run("--", "sh", "-c", "echo @@read; cat .gemini/.env; true")), secret)
    assert ".gemini/.env" in line


# --- F3: the index marks of hidden tracked files follow renames ---------------------------------------------

RENAMES = {
    "git-mv-dir": "git mv conf conf2 && git -c user.name=t -c user.email=t@e commit -qm mv",
    "git-mv-file": "git mv conf/prod.tfvars conf/staging.tfvars && git -c user.name=t -c user.email=t@e commit -qm mv",
    "rm-cached-reset": "git rm -q --cached conf/prod.tfvars && git reset -q -- conf/prod.tfvars",
}


def _conf_repo(ws: Workspace, path: Path, secret: str) -> None:
    (path / "conf").mkdir()
    (path / "conf" / "prod.tfvars").write_text(secret + "\n")
    (path / "conf" / "a.txt").write_text("a\n")
    (path / ".ai-sandbox.toml").write_text('block = ["*.tfvars"]\n')
    ws.git("add", "-A", cwd=path)
    ws.git("commit", "-qm", "conf", cwd=path)


def _copy(ws: Workspace) -> Path:
    """The control repository: the workspace's, copied before any session."""
    control = ws.base / "control"
    shutil.copytree(ws.repo, control, symlinks=True)
    return control


def _control(ws: Workspace, path: Path, script: str) -> None:
    """The same commands as the session's, without any sandbox (as whoever runs the test: safe.directory)."""
    env = {**ws.env(), "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t"}
    env.update(GIT_COMMITTER_EMAIL="t@e", GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="safe.directory")
    env["GIT_CONFIG_VALUE_0"] = "*"
    subprocess.run(["sh", "-c", script], cwd=path, env=env, check=True)


def _index_and_status(ws: Workspace, path: Path) -> tuple[str, str]:
    return ws.git("ls-files", "-t", cwd=path), ws.git("status", "--porcelain", cwd=path)


@pytest.mark.parametrize("how", list(RENAMES))
def test_index_marks_follow_renames_and_are_all_cleared(ws, firejail, how):
    """F3: a blocked tracked file carries git's skip-worktree bit for the session. Old code: after `git mv` of
    its directory git carried the bit to the new path, the watcher cleared only the old one, and the next
    launch took the bit for the user's own: the user's later edits never showed in `git status` nor reached
    `git commit -a`. Compared with the same commands run without the sandbox; renaming the hidden file itself
    fails inside (a mask is a mount point: EBUSY), and then nothing changed."""
    secret = token("TFSECRET")
    _conf_repo(ws, ws.repo, secret)
    before = _state(ws, ws.repo)
    control = _copy(ws)
    res = _session(ws, f"{RENAMES[how]} 2>&1; echo @@rc=$?")
    sessions_ended(ws)  # firejail: the watcher clears the marks once the sandbox is gone
    if how == "git-mv-file":
        assert "@@rc=0" not in res.out and "busy" in res.err
        assert _state(ws, ws.repo) == before
        return
    # `git reset` exits 1 inside: without its bit, the entry it made anew sees the mask as a change
    _control(ws, control, RENAMES[how])
    assert _index_and_status(ws, ws.repo) == _index_and_status(ws, control)
    assert ws.git("rev-parse", "HEAD^{tree}") == ws.git("rev-parse", "HEAD^{tree}", cwd=control)
    assert not [ln for ln in ws.git("ls-files", "-t").splitlines() if ln.startswith("S ")]
    # the user's own edit then reaches `git commit -a`, as in the control; and the next launch marks anew
    renamed = "conf2/prod.tfvars" if how == "git-mv-dir" else "conf/prod.tfvars"
    for repo in (ws.repo, control):
        with open(repo / renamed, "a") as f:
            f.write("EDITED\n")
        ws.git("commit", "-qam", "edit", cwd=repo)
        assert "EDITED" in ws.git("show", f"HEAD:{renamed}", cwd=repo)
    res = _show(ws.run("--", "sh", "-c", f"git status --porcelain; echo @@; cat {renamed}; true"))
    assert res.rc == 0 and res.out.startswith("@@"), res.err  # hidden, marked, and git inside sees no change
    assert secret not in res.out
    sessions_ended(ws)
    assert not [ln for ln in ws.git("ls-files", "-t").splitlines() if ln.startswith("S ")]


# --- F5: what git checks out into a hidden directory ----------------------------------------------------------


def _branch_repo(ws: Workspace, path: Path, secret: str) -> None:
    """main ignores secrets/ and holds secrets/key.txt there; branch feat tracks secrets/README.md."""
    (path / ".gitignore").write_text("secrets/\n")
    (path / "app.txt").write_text("app\n")
    ws.git("add", "-A", cwd=path)
    ws.git("commit", "-qm", "app", cwd=path)
    ws.git("checkout", "-qb", "feat", cwd=path)
    (path / "secrets").mkdir()
    (path / "secrets" / "README.md").write_text("tracked readme\n")
    ws.git("add", "-f", "secrets/README.md", cwd=path)
    ws.git("commit", "-qm", "readme", cwd=path)
    ws.git("checkout", "-q", "main", cwd=path)
    (path / "secrets").mkdir()
    (path / "secrets" / "key.txt").write_text(secret + "\n")


def _tree(path: Path) -> dict[str, str]:
    return {
        str(p.relative_to(path)): p.read_text()
        for p in sorted(path.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(path).parts
    }


@pytest.mark.parametrize("cmd", ["git checkout -q feat", "git merge -q --ff-only feat", "git reset -q --hard feat"])
def test_files_git_checks_out_into_a_hidden_directory_are_named_and_written_on_the_users_word(ws, firejail, cmd):
    """F5: on main `secrets/` is ignored and hidden whole; `feat` tracks a file in it. Old code: checking out feat
    wrote the file into the session's scratch tmpfs, gone at exit, and the repository ended on feat with the file
    deleted, silently (the next `commit -a` records the deletion). Now the line after the session names it and
    the command that writes it; run, the repository is the control's. (Writing it automatically was a write
    channel into hidden directories: H1.) A read-only mask makes git refuse before it changes anything."""
    secret = token("F5SECRET")
    _branch_repo(ws, ws.repo, secret)
    before = _state(ws, ws.repo)
    control = _copy(ws)
    res = _session(ws, f"{cmd} 2>&1; echo @@rc=$?; cat secrets/key.txt")
    assert secret not in res.out + res.err
    _control(ws, control, cmd)
    _users_word(ws, res, ["secrets/README.md"])
    if "@@rc=0" in res.out:
        assert _state(ws, ws.repo) == _state(ws, control)
    else:
        assert _state(ws, ws.repo) == before  # refused cleanly: nothing half-done
    assert (ws.repo / "secrets" / "key.txt").read_text() == secret + "\n"


def _users_word(ws: Workspace, res: Result, paths: list[str]) -> None:
    """What the user does after the line that names files git checked out into hidden directories: run the
    command it gives (only when the session's git got that far: a read-only mask refuses before)."""
    time.sleep(0.5)  # firejail: the watcher says it once the sandbox is gone (the line is in the captured stderr)
    missing = [p for p in paths if not (ws.repo / p).exists() and p in ws.git("ls-files")]
    if not missing:
        return
    lines = [ln for ln in res.err.splitlines() if "git checked out" in ln and "kept from your disk" in ln]
    assert len(lines) == 1, res.err  # once: under bwrap the launch and the watcher both end the session
    assert all(p in lines[0] for p in missing) and "checkout -- PATH" in lines[0]
    ws.git("checkout", "--", *missing)


def test_untracked_files_a_stash_pop_restores_into_a_hidden_directory_are_named_with_the_stash(ws, firejail):
    """Sixteenth red team: `secrets/` blocked (untracked, so `stash -u` takes what is in it); the user had stashed
    secrets/notes.txt. The agent's `git stash pop` wrote it into the session's scratch and dropped the stash: at
    exit the file was gone, the stash too, and nothing said so. Now the line after the session names the files and
    the stash's commit with the command that restores them; run, the repository is the control's. (A read-only
    mask makes git refuse and keep the stash: the user pops it outside.)"""
    secret = token("STASHSECRET")
    _committed(ws, {".ai-sandbox.toml": 'block = ["secrets/"]\n', "app.txt": "app\n"}, "app")
    ws.write("secrets/key.txt", secret + "\n")
    ws.write("secrets/notes.txt", "my notes\n")
    ws.git("stash", "push", "-q", "-u", "--", "secrets/notes.txt")
    assert not (ws.repo / "secrets" / "notes.txt").exists()
    control = _copy(ws)
    res = _session(ws, "git stash pop -q 2>&1; echo @@rc=$?; cat secrets/key.txt")
    assert secret not in res.out + res.err
    _control(ws, control, "git stash pop -q")
    time.sleep(0.5)  # firejail: the watcher says it once the sandbox is gone (the line is in the captured stderr)
    lines = [ln for ln in res.err.splitlines() if "stash" in ln and ln.startswith("ai-sandbox:")]
    if "@@rc=0" in res.out:
        assert len(lines) == 1 and "secrets/notes.txt" in lines[0], res.err
        command = lines[0].rsplit("`", 2)[-2]  # the line ends with the command, quoted
        _control(ws, ws.repo, command)
    else:
        assert not lines, res.err
        _control(ws, ws.repo, "git stash pop -q")  # refused inside, kept: the user pops it outside
    assert _state(ws, ws.repo) == _state(ws, control)
    assert ws.git("stash", "list") == ws.git("stash", "list", cwd=control)


def _committed(ws: Workspace, files: dict[str, str], message: str) -> None:
    """Write files into the workspace's repository and commit them all."""
    for name, content in files.items():
        ws.write(name, content)
    ws.git("add", "-A")
    ws.git("commit", "-qm", message)


def _cache_repo(ws: Workspace, path: Path) -> None:
    """cache/ ignored whole (a scratch inside, where the identity may have one), app.txt tracked."""
    (path / ".gitignore").write_text("cache/\n")
    (path / "app.txt").write_text("app\n")
    ws.git("add", "-A", cwd=path)
    ws.git("commit", "-qm", "app", cwd=path)


def _said(res: Result, *names: str) -> list[str]:
    """ai-sandbox's lines after the session that name all of names."""
    time.sleep(0.5)  # firejail: the watcher says it once the sandbox is gone (the line is in the captured stderr)
    return [ln for ln in res.err.splitlines() if ln.startswith("ai-sandbox:") and all(n in ln for n in names)]


def test_a_branch_checked_out_over_an_ignored_file_of_yours_is_named(ws, firejail):
    """Seventeenth red team: `other` tracks cache/x, your ignored cache/x holds something else. Outside, git
    replaces yours; inside it wrote the branch's into the scratch, and yours stayed: `git status` showed it modified
    and `commit -a` would commit it, with nothing said (the line named only files missing from the disk)."""
    _cache_repo(ws, ws.repo)
    ws.git("checkout", "-qb", "other")
    ws.write("cache/x", "BRANCH\n")
    ws.git("add", "-f", "cache/x")
    ws.git("commit", "-qm", "x")
    ws.git("checkout", "-q", "main")
    ws.write("cache/x", "YOURS\n")
    control = _copy(ws)
    res = _session(ws, "git checkout -q other 2>&1; echo @@rc=$?")
    _control(ws, control, "git checkout -q other")
    if "@@rc=0" not in res.out:
        return  # a read-only mask: git refused before it changed anything
    (line,) = _said(res, "cache/x", "over hidden files of yours")
    _control(ws, ws.repo, f"git checkout -- cache/x  # {line[:20]}")
    assert _state(ws, ws.repo) == _state(ws, control)


def test_a_stash_popped_over_a_file_of_yours_in_a_hidden_directory_is_named(ws, firejail):
    """Seventeenth red team: a `-a` stash holds cache/x, and you have another cache/x. Outside, `git stash pop`
    refuses and keeps the stash; inside the scratch is empty, the pop succeeded and dropped the stash, silently."""
    _cache_repo(ws, ws.repo)
    ws.write("cache/x", "STASHED\n")
    ws.git("stash", "push", "-q", "-a", "--", "cache/x")
    ws.write("cache/x", "YOURS\n")
    res = _session(ws, "git stash pop -q 2>&1; echo @@rc=$?")
    if "@@rc=0" not in res.out:
        assert ws.git("stash", "list").strip(), res.err  # refused inside, and kept
        return
    assert (ws.repo / "cache" / "x").read_text() == "YOURS\n"
    (line,) = _said(res, "cache/x", "stash apply")
    commit = line.split("stash apply ", 1)[1].split("`", 1)[0]
    assert ws.git("cat-file", "-p", f"{commit}^3:cache/x") == "STASHED\n"  # the stashed one, by its commit


def test_a_stash_popped_and_pruned_in_the_session_is_still_said(ws, firejail):
    """Eighteenth red team: `git stash pop` into the scratch, then `git reflog expire` and `gc --prune=now`: the
    stash's commit was gone, its files could not be listed, and nothing was said (the files lost for good)."""
    _cache_repo(ws, ws.repo)
    ws.write("cache/keep", "ignored, so that cache/ is hidden\n")
    ws.write("cache/x", "STASHED\n")
    ws.git("stash", "push", "-q", "-a", "--", "cache/x")
    prune = "git reflog expire --expire-unreachable=now --all && git gc -q --prune=now"
    res = _session(ws, f"git stash pop -q 2>&1; echo @@rc=$?; {prune}")
    if "@@rc=0" not in res.out:
        return  # a read-only mask: git refused and kept the stash
    assert not (ws.repo / "cache" / "x").exists()
    assert len(_said(res, "no longer in the repository")) == 1, res.err


def test_a_stash_popped_in_a_linked_worktree_is_named(ws, firejail):
    """Seventeenth red team: launched from a linked worktree, whose `.git` is a file: the launch looked for the
    stash list in `<root>/.git/` only, and a pop into the scratch went unnamed (the file and the stash gone)."""
    _cache_repo(ws, ws.repo)
    wt = ws.base / "wt"
    ws.git("worktree", "add", "-q", "-b", "feat", str(wt))
    (wt / "cache").mkdir()
    (wt / "cache" / "keep").write_text("ignored, so that cache/ is hidden\n")
    (wt / "cache" / "x").write_text("STASHED\n")
    ws.git("stash", "push", "-q", "-a", "--", "cache/x", cwd=wt)
    res = ws.run("--", "sh", "-c", "git stash pop -q 2>&1; echo @@rc=$?", cwd=wt)
    if "@@rc=0" not in res.out:
        return
    (line,) = _said(res, "cache/x", "stash apply")
    _control(ws, wt, line.rsplit("`", 2)[-2])
    assert (wt / "cache" / "x").read_text() == "STASHED\n"


def test_a_conflict_git_leaves_in_a_hidden_directory_is_named(ws, firejail):
    """Seventeenth red team: main deleted cache/x, `other` changed it; `git merge other` leaves a modify/delete
    conflict and writes other's version into the work tree: inside, into the scratch. Only stage-0 entries were
    looked at: nothing was said, and the file was gone."""
    (ws.repo / ".gitignore").write_text("cache/\n")
    ws.write("cache/x", "v1\n")
    ws.git("add", ".gitignore")
    ws.git("add", "-f", "cache/x")
    ws.git("commit", "-qm", "x")
    ws.git("checkout", "-qb", "other")
    ws.write("cache/x", "THEIRS\n")
    ws.git("commit", "-qam", "theirs")
    ws.git("checkout", "-q", "main")
    ws.git("rm", "-q", "--cached", "cache/x")
    ws.git("commit", "-qm", "del")
    (ws.repo / "cache" / "x").unlink()
    ws.write("cache/y", "ignored, so that cache/ is hidden\n")
    control = _copy(ws)
    merge = "git -c user.name=t -c user.email=t@e merge -q other >/dev/null 2>&1"
    res = _session(ws, f"{merge}; echo @@rc=$?")
    _control(ws, control, f"{merge} || true")
    if not ws.git("ls-files", "-u").strip():
        assert not (ws.repo / "cache" / "x").exists()
        return  # a read-only mask: git refused before it changed anything
    assert len(_said(res, "cache/x", "conflicted", "checkout -m -- PATH")) == 1, res.err
    _control(ws, ws.repo, "git checkout --theirs -- cache/x")
    assert (ws.repo / "cache" / "x").read_text() == (control / "cache" / "x").read_text() == "THEIRS\n"


def test_a_reset_that_writes_into_a_directory_hidden_since_is_as_the_control(ws, firejail, request):
    """Found by the model (test_model.py): `svc/app.py` taken out of the index and `svc/` ignored whole in one
    session; the next session's `git reset --hard` writes the file back into the hidden directory: in a scratch
    directory it is named after the session, and the user's `git checkout -- svc/app.py` makes the repository
    the control's. A read-only mask (firejail as a user outside its passwd home; a directory of another owner)
    makes git stop midway, `.gitignore` already reset but not the index: the documented gap, a strict xfail."""
    if ws.backend == "firejail" and ws.unprivileged:
        request.applymarker(pytest.mark.xfail(strict=True, reason="known gap: git stops midway at a read-only mask"))
    secret = token("SVCSECRET")
    _committed(ws, {".gitignore": ".env\n", "svc/app.py": "print(2)\n"}, "svc")
    ws.write("svc/.env", secret + "\n")
    control = _copy(ws)
    first = "git rm -q --cached svc/app.py && echo svc/ >> .gitignore"
    _session(ws, first)
    _control(ws, control, first)
    res = _session(ws, "git reset -q --hard 2>&1; echo @@rc=$?; cat svc/.env")
    assert secret not in res.out + res.err
    _control(ws, control, "git reset -q --hard")
    _users_word(ws, res, ["svc/app.py"])
    assert _state(ws, ws.repo) == _state(ws, control)


def _state(ws: Workspace, path: Path) -> tuple[object, ...]:
    """HEAD, the index with its flags, what git status says, and every file of the work tree."""
    return (ws.git("rev-parse", "HEAD", cwd=path), *_index_and_status(ws, path), _tree(path))


# --- F2: a decoy swapped in while the next session starts -----------------------------------------------------

ATTACKER = r"""
import ctypes, os, struct, sys, time
state = os.path.join(os.environ["XDG_STATE_HOME"], "ai-sandbox", "hidden")
a, b = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(0)
assert libc.inotify_add_watch(fd, state.encode(), 0x100 | 0x80) >= 0, state  # IN_CREATE | IN_MOVED_TO
before = set(os.listdir(state))
print("@@armed", flush=True)
while True:
    data = os.read(fd, 65536)
    i = 0
    while i + 16 <= len(data):
        wd, mask, cookie, ln = struct.unpack_from("iIII", data, i)
        name = data[i + 16 : i + 16 + ln].rstrip(b"\0").decode()
        i += 16 + ln
        if ".moved." in name and name not in before:
            r = libc.renameat2(-100, a.encode(), -100, b.encode(), 2)  # RENAME_EXCHANGE
            print("@@swapped", r, flush=True)
            sys.exit(0)
"""


def test_a_decoy_swapped_in_while_the_next_session_starts_is_never_read(ws, firejail):
    """F2: session 1 watches the state directory and, the moment session 2 writes its session log, swaps the
    directory holding the hidden `.env` with a decoy directory holding its own `.env`. Old code: session 2
    masked the decoy, its launch check passed (it asked only that each mask exists and is a mask) and its agent
    read the real secret under the decoy's old name (leaked at the first or second try in all four runs).
    Now the check compares each mask with the device and inode the policy decided on."""
    state = ws.home / ".local" / "state"
    # the watcher only warns: the launch check alone must refuse a mask that is not on the file seen
    ws.config_file.write_text('on_hidden_change = "warn"\n')
    swapped = 0
    for attempt in range(3):
        secret = token("RACESECRET")
        base = ws.repo / f"t{attempt}"
        (base / "svc").mkdir(parents=True)
        (base / "node_modules" / "x").mkdir(parents=True)
        (base / ".gitignore").write_text(".env\nnode_modules/\n")
        (base / "svc" / "app.py").write_text("print(1)\n")
        (base / "svc" / ".env").write_text(secret + "\n")
        (base / "node_modules" / "x" / ".env").write_text("DECOY\n")
        ws.git("init", "-q", str(base))
        ws.git("add", "-A", cwd=base)
        ws.git("commit", "-qm", "init", cwd=base)
        (base / "attacker.py").write_text(ATTACKER)
        if ws.user:
            chown_tree(ws.base, ws.user)
        env = ws.env({"XDG_STATE_HOME": str(state)})
        assert ws.run("--", "true", cwd=base, env=env).rc == 0
        cmd = [*_argv(ws), "--", PY, "attacker.py", "svc", "node_modules/x"]
        attacker = subprocess.Popen(cmd, cwd=base, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        assert attacker.stdout is not None
        assert b"@@armed" in attacker.stdout.readline()
        res = _show(ws.run("--", "sh", "-c", "sleep 0.3; cat svc/.env node_modules/x/.env; true", cwd=base, env=env))
        attacker.wait(timeout=60)
        said = attacker.stdout.read().decode()
        print(said)
        assert secret not in res.out + res.err, f"session 2 read the real secret (attempt {attempt})"
        swapped += "@@swapped 0" in said
        if res.rc != 0:  # refused: moved since the last launch (65), or while this one started (69)
            assert res.rc in (65, 69), res.err
    assert swapped, "the attacker never swapped: the race was not played"


def _argv(ws: Workspace) -> list[str]:
    from tests.conftest import AIS
    from tests.stage import setpriv_argv

    cmd = [AIS, *ws.backend_args]
    return setpriv_argv(ws.user.uid, ws.user.gid, cmd) if ws.user else cmd


# --- the fourth red team, on these fixes ----------------------------------------------------------------------


def test_a_filter_a_session_plants_never_runs_outside_when_the_marks_are_set_or_cleared(ws, firejail):
    """C2: the session sets `filter.x.clean` in .git/config and `* filter=x` in .git/info/attributes (both
    writable inside); `git update-index`, which sets and clears the marks of hidden tracked files outside the
    sandbox, writes the index and so re-reads racily clean files through their clean filter: the program ran
    outside, as the user, and copied the hidden .env (9 of 10 runs). ai-sandbox's index writes now empty every
    filter driver git's config defines."""
    secret = token("FILTERSECRET")
    _committed(
        ws,
        {".gitignore": ".env\n", ".ai-sandbox.toml": 'block = ["*.tfvars"]\n', "prod.tfvars": "tf\n"},
        "tracked and blocked",
    )
    ws.write(".env", secret + "\n")
    pwned = ws.base / "pwned"
    payload = ws.base / "payload.sh"
    payload.write_text(f"#!/bin/sh\ncat {ws.repo}/.env >> {pwned} 2>/dev/null; cat\n")
    payload.chmod(0o755)
    # --global: the repository's config loses them at the session's end (gitsettings.py); ai-sandbox's own index
    # writes must run no filter whatever config defines one. Unconfined: confined, ~/.gitconfig is read-only
    ws.config_file.write_text(UNCONFINED)
    plant = f"git config --global filter.x.clean {payload} && git config --global filter.x.process {payload} && "
    plant += "echo '* filter=x' >> .git/info/attributes"
    for _ in range(3):  # the racy-clean check needs a file as new as the index: touched each time
        _session(ws, f"{plant}; touch prod.tfvars README.md")
        sessions_ended(ws)  # firejail: the watcher clears the marks once the sandbox is gone
        assert not pwned.exists() or secret not in pwned.read_text(), "the session's filter ran outside"
    assert not pwned.exists()


FAKE_WORKTREE = """
C=$(git rev-parse --path-format=absolute --git-common-dir)
mkdir -p "$C/worktrees/evil" && echo "$TARGET/.git" > "$C/worktrees/evil/gitdir"
echo ../.. > "$C/worktrees/evil/commondir" && git rev-parse HEAD > "$C/worktrees/evil/HEAD"
mkdir -p "$TARGET" && echo "gitdir: $C/worktrees/evil" > "$TARGET/.git"
printf 'block = ["planted/"]\\n' > "$TARGET/.ai-sandbox.toml"
cd "$TARGET" && git read-tree --empty && b=$(echo dummy | git hash-object -w --stdin)
git update-index --add --cacheinfo "100644,$b,planted/dummy.txt"
"""
PLANT = """
cd "$TARGET" && b=$(echo PLANTED | git hash-object -w --stdin)
git update-index --add --cacheinfo "100644,$b,planted/profile.toml"
"""


def test_a_worktree_a_session_registers_gets_nothing_written_into_it(ws, firejail):
    """R2: a session writes `.git/worktrees/evil/gitdir` naming a directory of its choice (the red team: ~/.config)
    and a `.git` file there; the next launch took it for another checkout of the repository, hid what its planted
    `.ai-sandbox.toml` blocks, and after the session wrote what that checkout's index (writable inside) tracks
    there into it: a profile in ~/.config/ai-sandbox/ that kept `.env` readable everywhere. Files git wrote are
    now written back only inside the project the launch looked at."""
    target = ws.home / "target"
    env = {"TARGET": str(target)}
    res = _show(ws.run("--", "sh", "-c", FAKE_WORKTREE + "echo @@attacked", env=env))
    assert res.rc == 0 and "@@attacked" in res.out, res.err
    res = _show(ws.run("--", "sh", "-c", PLANT + "echo @@attacked", env=env))
    assert "@@attacked" in res.out, res.err
    sessions_ended(ws)
    assert not (target / "planted" / "profile.toml").exists()


SWAP_ROOT = r"""
import ctypes, os, sys
root, target = os.getcwd(), sys.argv[1]
os.symlink(target, root + ".lnk")
libc = ctypes.CDLL(None, use_errno=True)
sys.exit(libc.renameat2(-100, root.encode(), -100, (root + ".lnk").encode(), 2))  # RENAME_EXCHANGE
"""


def test_a_project_root_swapped_for_a_link_gets_nothing_written_through_it(ws, firejail):
    """R1: the session makes a repository whose work tree is another directory and whose index tracks a file in a
    directory hidden in the project, then swaps the project root for a link to it just before it ends: restore
    followed the link, and git ran there. Now restore writes only into the root the launch looked at (its device
    and inode), opened without following a link."""
    _committed(ws, {".gitignore": ".env\nplanted/\n"}, "ignore planted/")
    ws.write("planted/old.txt", "x\n")
    target = ws.home / "target"
    (target / "planted").mkdir(parents=True)
    (ws.base / "swap.py").write_text(SWAP_ROOT)
    script = (
        f"cd {target} && git init -q . && b=$(echo PLANTED | git hash-object -w --stdin) && "
        "git update-index --add --cacheinfo 100644,$b,planted/profile.toml && rmdir planted && "
        f"cd {ws.repo} && {PY} {ws.base / 'swap.py'} {target}"
    )
    _show(ws.run("--", "sh", "-c", script))
    sessions_ended(ws)
    assert not (target / "planted" / "profile.toml").exists()


def test_the_files_git_checked_out_into_a_hidden_directory_are_named_once(ws, firejail):
    """L1: under bwrap the launch ends the session itself, and the watcher did it again: the line came twice."""
    _branch_repo(ws, ws.repo, token("F5SECRET"))
    res = _session(ws, "git checkout -q feat 2>&1")
    _users_word(ws, res, ["secrets/README.md"])


DOTFILES = """
b=$(printf 'Match exec "cat $HOME/.ssh/id_test > $PWNED"\\n' | git hash-object -w --stdin)
git update-index --add --cacheinfo "100644,$b,.ssh/config"
"""


def test_nothing_a_session_stages_in_a_hidden_directory_is_written_there(ws, firejail):
    """H1: the home is a dotfiles repository that ignores `.ssh/`; a session there stages `.ssh/config` (the index
    is writable inside). When ai-sandbox wrote what git checked out into hidden directories, it wrote that file
    into the hidden ~/.ssh, and the user's next ssh ran the command in it outside the sandbox."""
    home = ws.home
    (home / ".ssh").mkdir(mode=0o700)
    secret = token("SSHKEY")
    (home / ".ssh" / "id_test").write_text(secret + "\n")
    ws.git("init", "-q", str(home))
    (home / ".gitignore").write_text(".ssh/\n")
    (home / ".bashrc").write_text("alias ll=ls\n")
    ws.git("add", ".gitignore", ".bashrc", cwd=home)
    ws.git("commit", "-qm", "dotfiles", cwd=home)
    pwned = ws.base / "pwned"
    res = _show(ws.run("--", "sh", "-c", DOTFILES + "echo @@staged", cwd=home, env={"PWNED": str(pwned)}))
    assert "@@staged" in res.out, res.err
    sessions_ended(ws)
    assert not (home / ".ssh" / "config").exists()
    assert ".ssh/config" in res.err  # named, for the user to decide


SUBMODULE_FILTER = """
git init -q sub && echo x > sub/x && git -C sub add x && git -C sub -c user.name=t -c user.email=t@e commit -qm s
git -C sub config filter.y.clean "$PAYLOAD" && echo '* filter=y' > sub/.git/info/attributes
git add sub 2>/dev/null; git -c user.name=t -c user.email=t@e commit -qm sub >/dev/null
touch -d 2001-01-01 sub/x
"""


@pytest.mark.parametrize("command", [["doctor"], ["explain", "--secrets"]])
def test_a_submodules_filter_never_runs_when_the_secret_scan_looks(ws, firejail, command):
    """S1: the secret scan asked git which tracked files changed (diff-files), which reads a stat-dirty file through
    its clean filter, in each submodule with the submodule's own config: a filter a session set there ran outside
    the sandbox at the user's next doctor, explain --secrets or init. The scan now keys files by inode, size and
    mtime and asks git nothing about their content."""
    secret = plant_env(ws)
    pwned = ws.base / "pwned"
    payload = ws.base / "payload.sh"
    payload.write_text(f"#!/bin/sh\ncat {ws.repo}/.env >> {pwned} 2>/dev/null; cat\n")
    payload.chmod(0o755)
    res = _show(ws.run("--", "sh", "-c", SUBMODULE_FILTER + "echo @@planted", env={"PAYLOAD": str(payload)}))
    assert "@@planted" in res.out, res.err
    _show(ws.run(*command, timeout=120))
    assert not pwned.exists() or secret not in pwned.read_text(), "the submodule's filter ran outside"


def test_a_worktree_forged_at_the_home_is_not_read(ws, firejail):
    """A forged worktree at the home (or `/`, or a system directory; root can write /.git) would make every launch
    list the whole home with git, and its files decide what the launch does: not a checkout."""
    env = {"TARGET": str(ws.home)}
    res = _show(
        ws.run("--", "sh", "-c", FAKE_WORKTREE + "echo 'block = [' > $TARGET/.ai-sandbox.toml; echo @@ok", env=env)
    )
    assert "@@ok" in res.out, res.err
    assert _show(ws.run("--", "true", env=env)).rc == 0  # its malformed config is never read


@pytest.mark.backends("firejail")  # ai-sandbox's own git calls, outside any sandbox
def test_a_fifo_the_repository_config_includes_never_hangs_the_next_launch(ws, firejail):
    """T2: a session adds `[include] path = inc` to .git/config and makes .git/inc a FIFO nobody writes: every git
    call of ai-sandbox hung at the next launch (and the watcher's release of the index marks). Each call has a
    time limit now; the first question of a launch, 20 s. Left as a session leaves it whose end never ran: the end
    removes the include (gitsettings.py), the launch must hold alone."""
    _session(ws, "mkfifo .git/inc")
    with open(ws.repo / ".git" / "config", "a") as f:
        f.write("[include]\n\tpath = inc\n")
    started = time.monotonic()
    res = _show(ws.run("--", "sh", "-c", "echo @@read", timeout=90))
    assert time.monotonic() - started < 60
    assert res.rc == 65 and "@@read" not in res.out
    assert "took longer than" in res.err and len(res.err.strip().splitlines()) == 1


# --- the sixth red team: records of other roots, and marks a session hides or moves ------------------------


def test_a_sibling_worktrees_hidden_file_stays_hidden_at_its_first_launch(ws, firejail):
    """E: a launch in the main checkout hides the linked worktree's ignored `.env` (that checkout's own rules); its
    session un-ignores it in the worktree (a file it can write). Old code: the first launch in the worktree
    consulted only records of roots above or below it, never a sibling's: the secret was readable."""
    secret = token("SIBLINGSECRET")
    ws.write(".gitignore", ".env\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore")
    wt = ws.base / "wt"
    ws.git("worktree", "add", "-q", str(wt))
    (wt / ".env").write_text(secret + "\n")
    _session(ws, f"cat {wt}/.env; echo '# nothing ignored' > {wt}/.gitignore")
    read = "echo @@read; cat .env; true"
    line = _refused(_show(ws.run("--", "sh", "-c", read, cwd=wt)), secret)
    assert f"{wt}/.env" in line
    assert ws.run("accept", cwd=wt).rc == 0  # the user's word: readable in the worktree now
    assert secret in _show(ws.run("--", "sh", "-c", read, cwd=wt)).out


def test_what_the_enclosing_projects_launch_hid_in_a_nested_clone_stays_hidden_from_the_clone(ws, firejail):
    """B: the nested clone `lib` was launched on its own once (its record made before lib/.env existed); a launch
    of the enclosing project hid lib/.env (lib's own rules) and its session emptied lib/.gitignore. Old code: the
    next launch from lib consulted only lib's own, older record: the secret was readable."""
    secret = token("NESTEDSECRET")
    lib = ws.repo / "lib"
    _repo(ws, lib)
    (lib / ".gitignore").write_text(".env\n")
    assert _show(ws.run("--", "true", cwd=lib)).rc == 0  # lib's own first launch: nothing to hide yet
    (lib / ".env").write_text(secret + "\n")
    _session(ws, "cat lib/.env; echo '# nothing' > lib/.gitignore")
    line = _refused(_show(ws.run("--", "sh", "-c", "echo @@read; cat .env; true", cwd=lib)), secret)
    assert f"{lib}/.env" in line


def test_a_launch_from_a_nested_clone_after_accepting_a_difference_of_rules_passes_again(ws, firejail):
    """The other side of B: the enclosing project's rules may hide in a nested clone what the clone's own do not
    (an `allow` in lib's config). The launch from lib refuses once; after `accept` there the launches from either
    root pass, however the user alternates, and what they hide is each root's own rules."""
    lib = ws.repo / "lib"
    _repo(ws, lib)
    (lib / ".gitignore").write_text(".env*\n")
    (lib / ".ai-sandbox.toml").write_text('allow = [".env.example"]\n')
    (lib / ".env.example").write_text("EXAMPLE=1\n")
    assert _show(ws.run("--", "true")).rc == 0  # the enclosing project hides lib/.env.example
    assert _show(ws.run("--", "cat", ".env.example", cwd=lib)).rc == 65
    assert ws.run("accept", cwd=lib).rc == 0
    for _ in range(2):
        assert _show(ws.run("--", "true")).rc == 0
        assert "EXAMPLE=1" in _show(ws.run("--", "cat", ".env.example", cwd=lib)).out


DECOY = (
    "O=$(git rev-parse :conf/prod.tfvars) && git update-index --add --cacheinfo 100644,$O,aaa.txt"
    " && git update-index --skip-worktree aaa.txt && git mv conf conf2"
    " && git -c user.name=t -c user.email=t@e commit -qm mv"
)


def test_a_decoy_entry_holding_the_hidden_files_object_never_keeps_the_mark_on_the_real_file(ws, firejail):
    """C: the session flags a decoy index entry that holds the hidden file's object id, then `git mv`s the file's
    directory. Old code followed the mark, by object id, to the first flagged entry holding it (the decoy) and
    cleared it there; the bit git carried to conf2/prod.tfvars stayed for good, and the user's edit never reached
    `git commit -a`. Now every entry the mark could have moved to is cleared, and a line says which."""
    secret = token("TFSECRET")
    _conf_repo(ws, ws.repo, secret)
    control = _copy(ws)
    res = _session(ws, DECOY)
    sessions_ended(ws)  # firejail: the watcher clears the marks once the sandbox is gone
    _control(ws, control, DECOY)
    flags = ws.git("ls-files", "-t")
    assert "H conf2/prod.tfvars" in flags.splitlines(), flags
    assert "ai-sandbox" in res.err and "aaa.txt" in res.err  # the decoy's bit was cleared too, and it says so
    _show(ws.run("--", "true"))  # a next launch and its session change nothing of that
    sessions_ended(ws)
    for repo in (ws.repo, control):
        with open(repo / "conf2" / "prod.tfvars", "a") as f:
            f.write("EDITED\n")
        ws.git("commit", "-qam", "edit", cwd=repo)
        assert "EDITED" in ws.git("show", "HEAD:conf2/prod.tfvars", cwd=repo)


MOVE_TREE = {
    "nested-clone": ("lib", "mv lib lib2", "lib2"),
    "project-root": ("", 'cd / && mv "$OLDPWD" "$OLDPWD-moved"', "-moved"),
}


@pytest.mark.parametrize("how", list(MOVE_TREE))
def test_a_work_tree_a_session_moves_has_its_marks_cleared_where_it_went(ws, firejail, how):
    """A: a session moves a work tree holding a hidden tracked file, marked for the session: an untracked nested
    clone (`mv lib lib2`), or the project root itself. Old code skipped a work tree that was no longer where it had
    been, and the next launch took the bit for the user's own: the user's edits never reached `commit -a`. The end
    of the session now finds the work tree where it went (a descriptor held on it since the launch)."""
    secret = token("TFSECRET")
    ws.config_file.write_text(UNCONFINED)
    rel, move, moved = MOVE_TREE[how]
    tree = ws.repo / rel if rel else ws.repo
    if rel:
        _repo(ws, tree)
    _conf_repo(ws, tree, secret)
    (ws.repo / ".ai-sandbox.toml").write_text('block = ["*.tfvars"]\n')  # the project's rules: lib's is lib's own
    res = _session(ws, f"git -C {tree} ls-files -t; {move}")
    assert "S conf/prod.tfvars" in res.out  # marked for the session
    sessions_ended(ws)
    after = ws.repo / moved if rel else Path(f"{ws.repo}{moved}")
    assert (after / "conf" / "prod.tfvars").read_text() == secret + "\n"  # the move really happened
    flags = ws.git("ls-files", "-t", cwd=after)
    assert "H conf/prod.tfvars" in flags.splitlines(), flags


def test_a_lock_a_session_leaves_on_the_index_is_named_with_the_marks_it_kept(ws, firejail):
    """F: the session leaves .git/index.lock behind: the end of the session cannot clear the marks (git refuses
    while the lock exists, and it may be a live git's). Old code said nothing; now one line names the lock and
    the files whose mark stays until the next launch."""
    secret = token("TFSECRET")
    _conf_repo(ws, ws.repo, secret)
    res = _session(ws, "touch .git/index.lock")
    sessions_ended(ws)
    said = [ln for ln in res.err.splitlines() if "index.lock" in ln and "mark" in ln]
    assert len(said) == 1 and "conf/prod.tfvars" in said[0], res.err
    # the session wrote no index: there is nothing of its in the index's caches to drop, and nothing more is said
    assert not any("cached trees" in ln for ln in res.err.splitlines()), res.err
    (ws.repo / ".git" / "index.lock").unlink()
    sessions_ended(ws)
    # one that staged a file and then left the lock: the caches it may have forged, which the lock keeps the end
    # from dropping (indexcache.py), are named with the lock
    res = _session(ws, "echo x > staged.txt && git add staged.txt && touch .git/index.lock")
    sessions_ended(ws)
    assert any("could not drop the cached trees" in ln and "index.lock" in ln for ln in res.err.splitlines()), res.err
    (ws.repo / ".git" / "index.lock").unlink()


def test_what_a_worktrees_launch_hid_in_the_main_checkouts_nested_clone_stays_hidden_from_the_clone(ws, firejail):
    """Found by the model (test_model.py): a launch from the linked worktree covers the main checkout, and with it
    the nested clone `lib` inside it; its session empties lib/.gitignore. The next launch, from lib, consulted
    only the records of roots above, below or beside it in its own repository: the worktree's is none of them."""
    secret = token("NESTEDSECRET")
    lib = ws.repo / "lib"
    _repo(ws, lib)
    (lib / ".gitignore").write_text(".env\n")
    (lib / ".env").write_text(secret + "\n")
    wt = ws.base / "wt"
    ws.git("worktree", "add", "-q", str(wt))
    _session(ws, f"cat {lib}/.env; echo '# nothing' > {lib}/.gitignore", cwd=wt)
    line = _refused(_show(ws.run("--", "sh", "-c", "echo @@read; cat .env; true", cwd=lib)), secret)
    assert f"{lib}/.env" in line


# --- the seventh red team: a worktree moved, marks the user "owns", work trees replaced at their old path ---------


@pytest.mark.parametrize("move", ["git worktree move {wt} {wt}2", "mv {wt} {wt}2"])
def test_a_worktree_the_session_moves_keeps_what_the_main_checkouts_launch_hid(ws, firejail, move):
    """G1: the session empties the linked worktree's .gitignore and moves the worktree; old code judged the main
    checkout's record by path only, and the first launch at the new path showed the `.env` it had hidden there.
    A recorded path whose directory moved is now looked for by inode in this launch's trees, its root included."""
    secret = token("MOVEDWTSECRET")
    ws.write(".gitignore", ".env\n")
    ws.git("add", ".gitignore")
    ws.git("commit", "-qm", "ignore")
    wt = ws.base / "wt"
    ws.git("worktree", "add", "-q", str(wt))
    (wt / ".env").write_text(secret + "\n")
    _session(ws, f"cat {wt}/.env; echo '# nothing' > {wt}/.gitignore; " + move.format(wt=wt))
    moved = Path(f"{wt}2")
    assert (moved / ".env").read_text() == secret + "\n"
    line = _refused(_show(ws.run("--", "sh", "-c", "echo @@read; cat .env; true", cwd=moved)), secret)
    assert f"{wt}/.env" in line


def _marks(ws: Workspace, path: Path) -> list[str]:
    return sorted(ws.git("ls-files", "-t", cwd=path).splitlines())


OWNED_BY_THE_USER = {
    # a decoy marked and committed in one session is the user's own at the next launch; then its mark goes, and
    # the blocked file's directory is moved: the user's mark must not take the one git carried
    "planted": (
        "",
        "O=$(git rev-parse :conf/prod.tfvars) && git update-index --add --cacheinfo 100644,$O,decoy.txt"
        " && git update-index --skip-worktree decoy.txt && git -c user.name=t -c user.email=t@e commit -qm decoy",
        "git update-index --no-skip-worktree decoy.txt && git mv conf conf2"
        " && git -c user.name=t -c user.email=t@e commit -qm mv",
    ),
    # the user marked zz/u.txt; a session points it at the blocked file's object, then both directories move
    "users": (
        "zz/u.txt",
        "O=$(git rev-parse :conf/prod.tfvars) && git update-index --cacheinfo 100644,$O,zz/u.txt"
        " && git update-index --skip-worktree zz/u.txt",
        "git mv zz zz2 && git mv conf conf2",
    ),
}


@pytest.mark.parametrize("how", list(OWNED_BY_THE_USER))
def test_a_mark_the_user_owns_never_takes_the_one_ai_sandbox_set(ws, firejail, how):
    """H1, H2: the user's own marks were followed first, by object id: a mark a session made the user's (a decoy
    committed, or the user's entry pointed at the hidden file's object) took the one `git mv` had carried, and the
    hidden file kept ai-sandbox's bit for good. A moved mark of ai-sandbox's now takes every entry holding its
    object, the user's included, and a line names them; the hidden file ends unmarked, as in the control."""
    secret = token("TFSECRET")
    users, first, second = OWNED_BY_THE_USER[how]
    _conf_repo(ws, ws.repo, secret)
    if users:
        ws.write(users, "user local\n")
        ws.git("add", users)
        ws.git("commit", "-qm", "user's")
        ws.git("update-index", "--skip-worktree", users)
    control = _copy(ws)
    _session(ws, first)
    _control(ws, control, first)
    res = _session(ws, second)
    _control(ws, control, second)
    sessions_ended(ws)
    assert "H conf2/prod.tfvars" in _marks(ws, ws.repo) and "H conf2/prod.tfvars" in _marks(ws, control)
    if users:  # the user's own mark, pointed at the same object by the session, cannot be told from ours: said
        assert "zz2/u.txt" in res.err and "cleared git's skip-worktree mark" in res.err
    _show(ws.run("--", "true"))  # and a next launch keeps it so
    sessions_ended(ws)
    assert "H conf2/prod.tfvars" in _marks(ws, ws.repo)


REPLACED = {
    "nested-empty-dir": ("lib", "mv lib lib2 && mkdir lib", "lib2"),
    "nested-link-to-another-repo": ("lib", "mv lib lib2 && ln -s $VICTIM lib", "lib2"),
    "root-empty-dir": ("", 'cd / && mv "$OLDPWD" "$OLDPWD-moved" && mkdir "$OLDPWD"', "-moved"),
}


@pytest.mark.parametrize("how", list(REPLACED))
def test_a_work_tree_replaced_at_its_old_path_has_its_marks_cleared_where_it_went(ws, firejail, how):
    """A3, A4, J1: the session moves a work tree holding a marked hidden file and puts an empty directory, or a link
    to another repository whose user marked a file of the same name, at its old path. Old code asked git at the old
    path: in the empty directory it listed nothing (or the enclosing repository) and forgot the mark; through the
    link it cleared the other repository's mark, the user's. The end of the session now goes by the descriptor it
    held on the work tree since the launch, and asks git there only."""
    secret = token("TFSECRET")
    ws.config_file.write_text(UNCONFINED)
    rel, move, moved = REPLACED[how]
    tree = ws.repo / rel if rel else ws.repo
    if rel:
        _repo(ws, tree)
    _conf_repo(ws, tree, secret)
    victim = ws.base / "victim"
    _repo(ws, victim)
    (victim / "conf").mkdir()
    (victim / "conf" / "prod.tfvars").write_text("victim's own\n")
    ws.git("add", "conf", cwd=victim)
    ws.git("commit", "-qm", "v", cwd=victim)
    ws.git("update-index", "--skip-worktree", "conf/prod.tfvars", cwd=victim)
    (ws.repo / ".ai-sandbox.toml").write_text('block = ["*.tfvars"]\n')  # the project's rules: lib's is lib's own
    res = _session(ws, f"git -C {tree} ls-files -t; " + move.replace("$VICTIM", str(victim)))
    assert "S conf/prod.tfvars" in res.out  # marked for the session
    sessions_ended(ws)
    after = ws.repo / moved if rel else Path(f"{ws.repo}{moved}")
    assert (after / "conf" / "prod.tfvars").read_text() == secret + "\n"
    assert "H conf/prod.tfvars" in _marks(ws, after)
    assert "S conf/prod.tfvars" in _marks(ws, victim)  # another repository's mark is never touched


@pytest.mark.parametrize("cmd", ["git checkout -q feat", "git merge -q --ff-only feat"])
def test_what_a_worktrees_session_checks_out_into_the_main_checkouts_hidden_directory_is_never_lost(ws, firejail, cmd):
    """Found by the model: launched from a linked worktree, a session ran git in the main checkout, which wrote a
    file the branch tracks into a directory the main checkout's rules hide: the directory was a scratch tmpfs of
    the session (another checkout's masks were given scratch like this one's), the file vanished at exit, and
    nothing named it. Another checkout's hidden directories are read-only masks now: git refuses, as it would
    there, or the repository is the control's."""
    secret = token("KEYSECRET")
    _branch_repo(ws, ws.repo, secret)
    wt = ws.base / "wt"
    ws.git("worktree", "add", "-q", "-b", "wtb", str(wt))
    control = _copy(ws)
    res = _session(ws, f"cd {ws.repo} && {cmd}; echo @@rc=$?", cwd=wt)
    sessions_ended(ws)
    if "@@rc=0" in res.out:
        _control(ws, control, cmd)
    assert _state(ws, ws.repo) == _state(ws, control)
    assert secret not in res.out + res.err


# --- the eighth red team: a clone carried out of the project, a `.git` rewritten, a mark whose object changed -------


@pytest.mark.parametrize("where", ["far", "beside"])
def test_a_nested_clone_the_session_carries_out_of_the_project_keeps_what_was_hidden_in_it(ws, firejail, where):
    """N1: the project's launch hid the nested clone's `.env` (the clone's own rules); the session emptied its
    .gitignore and moved the clone out of the project. Its first launch at the new place consulted no record: the
    project's overlaps nothing there. A root never launched before now looks, in every record, for directories
    moved into its trees."""
    secret = token("CARRIEDSECRET")
    ws.config_file.write_text(UNCONFINED)
    lib = ws.repo / "lib"
    _repo(ws, lib)
    (lib / ".gitignore").write_text(".env\n")
    (lib / ".env").write_text(secret + "\n")
    dest = ws.base / "elsewhere" / "lib2" if where == "far" else ws.base / "lib2"
    _session(ws, f"cat lib/.env; echo '# nothing' > lib/.gitignore && mkdir -p {dest.parent} && mv lib {dest}")
    assert (dest / ".env").read_text() == secret + "\n"
    line = _refused(_show(ws.run("--", "sh", "-c", "echo @@read; cat .env; true", cwd=dest)), secret)
    assert f"{lib}/.env" in line


@pytest.mark.parametrize("where", ["root", "nested"])
def test_a_git_file_the_session_points_at_another_repository_never_gets_its_marks_cleared(ws, firejail, where):
    """K1: the session moved the work tree's .git aside and wrote a `.git` file naming another repository's git
    directory, whose user had marked a file of the same name. Old code, checking only that the work tree was the
    same directory, cleared that repository's mark and forgot its own. The end of the session now asks git only
    when the work tree's git directory is the one its marks were set in, and says so otherwise."""
    secret = token("TFSECRET")
    ws.config_file.write_text(UNCONFINED)
    tree = ws.repo / "lib" if where == "nested" else ws.repo
    if where == "nested":
        _repo(ws, tree)
    _conf_repo(ws, tree, secret)
    (ws.repo / ".ai-sandbox.toml").write_text('block = ["*.tfvars"]\n')
    victim = ws.base / "victim"
    _repo(ws, victim)
    (victim / "conf").mkdir()
    (victim / "conf" / "prod.tfvars").write_text("victim's own\n")
    ws.git("add", "conf", cwd=victim)
    ws.git("commit", "-qm", "v", cwd=victim)
    ws.git("update-index", "--skip-worktree", "conf/prod.tfvars", cwd=victim)
    res = _session(ws, f"cd {tree} && git ls-files -t && mv .git .git.real && echo 'gitdir: {victim}/.git' > .git")
    assert "S conf/prod.tfvars" in res.out  # marked for the session
    sessions_ended(ws)
    assert "S conf/prod.tfvars" in _marks(ws, victim)  # another repository's mark is never touched
    assert "git directory" in res.err and "conf/prod.tfvars" in res.err  # and the kept mark is named
    (tree / ".git").unlink()
    (tree / ".git.real").rename(tree / ".git")  # the user puts it back: the next launch clears the mark
    _show(ws.run("--", "true"))
    sessions_ended(ws)
    assert "H conf/prod.tfvars" in _marks(ws, tree)


def test_a_mark_whose_object_a_reset_changed_is_cleared_where_git_carried_it(ws, firejail):
    """M1: `git reset feat -- conf/prod.tfvars` gave the marked entry another object (git keeps the bit), then `git
    mv conf conf2` carried it: found neither by path nor by object, the mark was dropped from the journal and stayed
    on conf2/prod.tfvars for good. A mark of ai-sandbox's that went missing now takes every entry newly marked during
    the session (said when they are not all its own)."""
    secret = token("TFSECRET")
    _conf_repo(ws, ws.repo, secret)
    ws.git("checkout", "-qb", "feat")
    (ws.repo / "conf" / "prod.tfvars").write_text(secret + "-FEAT\n")
    ws.git("commit", "-qam", "feat")
    ws.git("checkout", "-q", "main")
    control = _copy(ws)
    script = "git reset -q feat -- conf/prod.tfvars && git mv conf conf2"
    _session(ws, script)
    _control(ws, control, script)
    sessions_ended(ws)
    assert "H conf2/prod.tfvars" in _marks(ws, ws.repo)
    assert _marks(ws, ws.repo) == _marks(ws, control)


# --- the ninth red team: a link the watcher alone resolves back, and a block an allowlist would override ----


XCHG = "import ctypes,os,sys; ctypes.CDLL(None).renameat2(-100, os.fsencode(sys.argv[1]), -100, os.fsencode(sys.argv[2]), 2)"


@pytest.mark.parametrize("link", ["proc-self-fd", "plain"])
def test_a_directory_swapped_for_a_link_back_to_it_counts_as_moved(ws, firejail, link):
    """svc/ (holding the hidden .env) moved out of the project and replaced by a link that leads back to it. The
    watcher's last look followed the link: the same file, so "nothing moved", and the session's log was dropped.
    Through /proc/self/fd/3, the link led back only for the watcher (its fd 3 is the project); a plain link led
    back for everyone until the user removed it. Either way the next launch, finding svc/ nowhere and no log
    naming it, showed the secret. A tracked hidden file makes the watcher hold the project open."""
    secret = token("SVCSECRET")
    ws.config_file.write_text(UNCONFINED)
    ws.write(".gitignore", ".env\n")
    ws.write("svc/app.py", "x = 1\n")
    _conf_repo(ws, ws.repo, token("TF"))  # one hidden tracked file (*.tfvars): the marks' descriptors
    (ws.repo / "svc" / ".env").write_text(secret + "\n")
    far = ws.repo.parent / "far"
    # for the watcher, fd 3 is the repository: /proc/self/fd/3/.. is the directory holding it
    target = "/proc/self/fd/3/../far/svc" if link == "proc-self-fd" else str(far / "svc")
    script = f"mkdir -p {far} && ln -s {target} {far}/svc && {PY} -c '{XCHG}' svc {far}/svc && test -L svc"
    _session(ws, script)
    sessions_ended(ws)
    assert (far / "svc" / ".env").read_text() == secret + "\n"  # the swap really happened
    (ws.repo / "svc").unlink()  # the user tidies `git status`: the link goes
    read = f"echo @@read; cat {far}/svc/.env; true"
    line = _refused(_show(ws.run("--", "sh", "-c", read)), secret)
    assert "svc/.env" in line


def test_a_block_deleted_from_inside_never_leaves_a_build_output_readable(ws, firejail):
    """`block = ["app.log", "dist/"]` over a git-ignored log and build output, which the built-in allowlists would
    keep readable (the threat model's advice: block the build output itself). The session emptied the project's
    .ai-sandbox.toml: old code exempted any recorded path an allowlist of ai-sandbox's keeps now, and the next
    launch showed both."""
    secret = token("DISTSECRET")
    ws.write(".gitignore", "*.log\ndist/\n")
    ws.write("app.log", f"GET /?token={secret}\n")
    ws.write("dist/bundle.js", f'const KEY="{secret}"\n')
    ws.write(".ai-sandbox.toml", 'block = ["app.log", "dist/"]\n')
    _session(ws, ": > .ai-sandbox.toml")
    line = _refused(_show(ws.run("--", "sh", "-c", "echo @@read; cat app.log dist/bundle.js; true")), secret)
    assert "app.log" in line or "dist" in line
    assert ws.run("accept").rc == 0  # the user's word: the build output is readable, as the rules now say
    assert secret in _show(ws.run("--", "sh", "-c", "cat app.log dist/bundle.js")).out


@pytest.mark.parametrize("where", ["worktree", "nested-clone"])
def test_a_session_of_another_root_ending_never_clears_a_mark_this_session_needs(ws, firejail, where):
    """Session A from the main checkout (or the enclosing project) marks the worktree's (the nested clone's) hidden
    tracked file too; session B runs from the worktree (the clone) meanwhile. Old code: each root had its own
    journal; B took the mark A had set for the user's, and A's end cleared it under B: inside B git saw the file
    modified, and root's `git commit -a` under firejail committed it emptied."""
    import threading

    secret = token("TFSECRET")
    if where == "worktree":
        _conf_repo(ws, ws.repo, secret)
        tree = ws.base / "wt"
        ws.git("worktree", "add", "-q", "-b", "wb", str(tree))
    else:
        tree = ws.repo / "lib"
        _repo(ws, tree)
        _conf_repo(ws, tree, secret)
        ws.config_file.write_text('block = ["*.tfvars"]\n')  # the clone's rules are its own: a global block
    flags = ws.base / "flags"
    flags.mkdir()

    def wait_for(name: str) -> str:
        return f"while [ ! -e {flags}/{name} ]; do sleep 0.05; done"

    a = threading.Thread(target=lambda: ws.run("--", "sh", "-c", f"touch {flags}/a-in; {wait_for('a-end')}"))
    a.start()
    try:
        deadline = time.monotonic() + 30
        while not (flags / "a-in").exists():
            assert time.monotonic() < deadline, "session A never started"
            time.sleep(0.05)
        inside_b = (
            f"touch {flags}/b-in; {wait_for('b-go')}; echo @@marks; git ls-files -t conf; echo @@status; "
            "git status --porcelain; echo x >> conf/a.txt; git -c user.name=t -c user.email=t@e commit -qam b"
        )
        results = []
        b = threading.Thread(target=lambda: results.append(ws.run("--", "sh", "-c", inside_b, cwd=tree)))
        b.start()
        while not (flags / "b-in").exists():
            assert time.monotonic() < deadline, "session B never started"
            time.sleep(0.05)
    finally:
        (flags / "a-end").touch()
        a.join(60)
    sessions_ended(ws, root=ws.repo)  # A's end is done: its marks are cleared, or kept for B
    (flags / "b-go").touch()
    b.join(60)
    res = _show(results[0])
    assert res.rc == 0, res.err
    assert "S conf/prod.tfvars" in res.out and "conf/prod.tfvars" not in res.out.split("@@status")[1]
    assert ws.git("show", "HEAD:conf/prod.tfvars", cwd=tree).strip() == secret  # B's commit -a left the file as it was
    sessions_ended(ws)
    assert "H conf/prod.tfvars" in ws.git("ls-files", "-t", "conf", cwd=tree)  # and the last end cleared it


@pytest.mark.parametrize("script", ["git mv e tmp && git mv d e", "git mv d tmp && git mv e d"])
def test_a_mark_moved_onto_the_users_marked_path_is_told_apart_from_theirs(ws, firejail, script):
    """d/conf.tfvars blocked (ai-sandbox's mark), e/conf.tfvars marked by the user; the session swaps their places
    with git mv. Old code judged by path: ai-sandbox's mark stayed for good where the user's had been (hiding the
    user's later edits from commit -a) and the user's own was cleared, silently. Now as the control run. The swap moves
    the hidden file's directory, which the watcher answers by ending the session: where it did so before the
    session's two commands had ended, the session's exit status was 143 (once in a CI run); in "warn" mode it says
    so and the session runs on, so the marks are compared after exactly what the control ran."""
    ws.config_file.parent.mkdir(parents=True, exist_ok=True)
    ws.config_file.write_text('on_hidden_change = "warn"\n')
    files = {f"{d}/conf.tfvars": f'k = "{d}"\n' for d in ("d", "e")}
    _committed(ws, {**files, ".ai-sandbox.toml": 'block = ["d/conf.tfvars"]\n'}, "two")
    ws.git("update-index", "--skip-worktree", "e/conf.tfvars")
    control = _copy(ws)
    res = _session(ws, script)
    _control(ws, control, script)
    sessions_ended(ws)
    assert _marks(ws, ws.repo) == _marks(ws, control)
    assert "skip-worktree" not in res.err  # nothing doubtful to say


def test_a_users_mark_that_cannot_be_told_from_ours_is_cleared_aloud(ws, firejail):
    """s.tfvars blocked; d/u.txt marked by the user. The session untracks s.tfvars, gives d/u.txt another object
    and moves it: neither mark is found by its object, and the one new marked entry may be either. Clearing it is
    the side that shows (`git status`); leaving a mark of ours hides edits for good. Old code cleared it silently."""
    _committed(ws, {"d/u.txt": "v1\n", "s.tfvars": "k = 1\n", ".ai-sandbox.toml": 'block = ["*.tfvars"]\n'}, "one")
    ws.write("d/u.txt", "v2\n")
    ws.git("commit", "-qam", "two")
    ws.git("update-index", "--skip-worktree", "d/u.txt")
    res = _session(ws, "git rm -q --cached --sparse s.tfvars; git reset -q HEAD~1 -- d/u.txt; git mv d d2")
    sessions_ended(ws)
    assert "H d2/u.txt" in _marks(ws, ws.repo)
    assert "skip-worktree mark of d2/u.txt" in res.err and "one may have been yours" in res.err


@pytest.mark.xfail(
    strict=True, reason="known gap: a project's first launch takes its rules as another root's session left them"
)
def test_a_nested_clones_session_cannot_unhide_what_the_enclosing_project_never_launched_would_hide(ws, firejail):
    """Found by make fuzz (the model's counterexample, shrunk): a session launched from the nested clone, before the
    enclosing project's first launch, un-ignores the project's svc/.env; the project's first launch takes the rules
    as they are, and shows it. Nothing ever hid it, so no record can refuse: closed only by containing the
    session's writes to its own project (issue 27). Launch the enclosing project once before working in its clones."""
    secret = token("SVCSECRET")
    ws.write(".gitignore", ".env\n")
    ws.write("svc/.env", secret + "\n")
    lib = ws.repo / "lib"
    _repo(ws, lib)
    _session(ws, f"echo '!svc/.env' >> {ws.repo}/.gitignore", cwd=lib)
    _refused_or_blind(_show(ws.run("--", "sh", "-c", "cat svc/.env; true")), secret)


# --- the eleventh red team's two open findings ---------------------------------------------------------------


def _held(ws: Workspace, name: str, cwd: Path, then: str = "", out: list[Result] | None = None) -> threading.Thread:
    """A session from cwd, started in a thread and waited for until it runs: it touches flags/NAME-in, waits for
    flags/NAME-end, then runs `then`; its result goes into out."""
    flags = ws.base / "flags"
    flags.mkdir(exist_ok=True)
    act = f"; {then}" if then else ""
    script = f"touch {flags}/{name}-in; while [ ! -e {flags}/{name}-end ]; do sleep 0.05; done{act}"
    t = threading.Thread(
        target=lambda: (out if out is not None else []).append(ws.run("--", "sh", "-c", script, cwd=cwd))
    )
    t.start()
    deadline = time.monotonic() + 30
    while not (flags / f"{name}-in").exists():
        assert time.monotonic() < deadline, f"session {name} never started"
        time.sleep(0.05)
    return t


def _two_roots_at_once(ws: Workspace, wt: Path, first: str = "main", then: str = "") -> None:
    """A session from the main checkout and one from its linked worktree at once; first ("main" or "wt") ends first
    (it keeps the marks the other's session still needs), then the other runs `then` and ends."""
    trees = {"main": ws.repo, "wt": wt}
    last = "wt" if first == "main" else "main"
    threads = {name: _held(ws, name, trees[name], then if name == last else "") for name in ("main", "wt")}
    (ws.base / "flags" / f"{first}-end").touch()
    threads[first].join(60)
    sessions_ended(ws, root=trees[first])
    (ws.base / "flags" / f"{last}-end").touch()
    threads[last].join(60)
    sessions_ended(ws)


def test_the_first_of_two_roots_sessions_to_end_never_takes_a_mark_the_user_sets_later(ws, firejail):
    """Eleventh red team: the main checkout's session and the worktree's both marked the main checkout's hidden
    tracked file; the first to end kept the mark in its journal (the other needed it), the last cleared it. Old
    code left the entry in the first's journal: a mark the user set later at that path, on the same object, was
    taken for ai-sandbox's and cleared at the main checkout's next session end (and `commit -a` then committed the
    user's local secret). A mark a session end clears is dropped from every journal."""
    secret = token("TFSECRET")
    _conf_repo(ws, ws.repo, secret)
    wt = ws.base / "wt"
    ws.git("worktree", "add", "-q", "-b", "wb", str(wt))
    _two_roots_at_once(ws, wt)
    assert "H conf/prod.tfvars" in _marks(ws, ws.repo)
    ws.git("update-index", "--skip-worktree", "conf/prod.tfvars")  # the user's own, as before any session
    _show(ws.run("--", "true"))
    sessions_ended(ws)
    assert "S conf/prod.tfvars" in _marks(ws, ws.repo)  # still the user's


def test_a_session_cannot_hold_the_locks_other_launches_wait_for(ws, firejail):
    """Eleventh red team: the journals' and the index's lock files were readable inside, and an agent that took
    them (flock needs only a descriptor) made every other launch with hidden tracked files, and every session end,
    wait for as long as it held them. The lock files are hidden inside: the session can open none of them, and
    another project's launch meanwhile runs at once."""
    import threading

    secret = token("TFSECRET")
    _conf_repo(ws, ws.repo, secret)
    other = ws.base / "other"
    _repo(ws, other)
    _conf_repo(ws, other, token("OTHERSECRET"))
    _show(ws.run("--", "true", cwd=other))  # every lock file there is, made
    sessions_ended(ws)
    state = ws.home / ".local" / "state" / "ai-sandbox"
    locks = sorted(str(p) for p in state.rglob("*.lock"))
    assert locks
    grab = (
        "import fcntl, os, sys, time\n"
        "for p in sys.argv[2:]:\n"
        "    try:\n"
        "        fcntl.flock(os.open(p, os.O_RDONLY), fcntl.LOCK_EX)\n"
        "        print('@@held', p, flush=True)\n"
        "    except OSError as e:\n"
        "        print('@@refused', p, e.strerror, flush=True)\n"
        "open(sys.argv[1] + '/in', 'w').close()\n"
        "end = time.monotonic() + 20\n"
        "while not os.path.exists(sys.argv[1] + '/done') and time.monotonic() < end:\n"
        "    time.sleep(0.05)\n"
    )
    flags = ws.base / "flags"
    flags.mkdir()
    held: list[Result] = []
    t = threading.Thread(target=lambda: held.append(ws.run("--", PY, "-c", grab, str(flags), *locks)))
    t.start()
    deadline = time.monotonic() + 30
    while not (flags / "in").exists():
        assert time.monotonic() < deadline, "the session never started"
        time.sleep(0.05)
    try:
        res = ws.run("--", "true", cwd=other, timeout=10)  # waited as long as the session held the locks
    finally:
        (flags / "done").touch()
        t.join(60)
    assert "@@held" not in held[0].out, held[0].out
    assert held[0].out.count("@@refused") == len(locks)
    assert res.rc == 0, res.err


UNMARKED = {
    "removed": "git update-index --force-remove conf/prod.tfvars",
    "moved": "b=$(git rev-parse :conf/prod.tfvars) && git update-index --force-remove conf/prod.tfvars && "
    "git update-index --add --cacheinfo 100644,$b,env2 && git update-index --skip-worktree env2",
}


@pytest.mark.parametrize("how", list(UNMARKED))
def test_a_mark_the_last_session_took_out_of_the_index_leaves_no_journal_holding_it(ws, firejail, how):
    """Twelfth red team: the worktree's session ended first and kept the main checkout's mark (the main checkout's
    session still needed it); that session's agent then took the marked entry out of the index (or moved it to
    another path and marked that). Its end found the mark gone, or followed it, and the worktree's journal kept the
    old entry: a mark the user set there later was taken for ai-sandbox's and cleared at the worktree's next launch.
    Every entry a session end takes out of its journal is dropped from the others too."""
    secret = token("TFSECRET")
    _conf_repo(ws, ws.repo, secret)
    wt = ws.base / "wt"
    ws.git("worktree", "add", "-q", "-b", "wb", str(wt))
    _two_roots_at_once(ws, wt, first="wt", then=UNMARKED[how])
    ws.git("reset", "-q")  # the user restores the index
    ws.git("update-index", "--skip-worktree", "conf/prod.tfvars")  # and marks the file, their own
    _show(ws.run("--", "true", cwd=wt))
    sessions_ended(ws)
    assert "S conf/prod.tfvars" in _marks(ws, ws.repo)  # still the user's


@pytest.mark.parametrize("where", ["same-root", "nested-clone"])
def test_a_directory_another_launch_recorded_during_the_session_and_the_session_moved_out_refuses(ws, firejail, where):
    """Twelfth red team: while a session runs (the project's own, or its nested clone's), the user adds svc2/.env and
    launches the project, whose record then holds it; the running session moves svc2/ out of the project. Its
    watcher looked only at what the records held when it started: nothing was logged, and the project's next launch
    found svc2/ nowhere and showed the secret where it went. The watcher reads the records again at the session's
    end: a directory they hold that is no longer what they recorded is logged."""

    secret = token("SVC2SECRET")
    ws.write(".gitignore", ".env\n")
    ws.write("svc/.env", "TEMPLATE\n")
    ws.write("svc/a", "x\n")
    ws.git("add", ".gitignore", "svc/a")
    ws.git("commit", "-qm", "svc")
    first = ws.repo
    if where == "nested-clone":
        first = ws.repo / "lib"
        _repo(ws, first)
        _show(ws.run("--", "true", cwd=first))
    _show(ws.run("--", "true"))
    out = ws.base / "out"
    done: list[Result] = []
    t = _held(ws, "s", first, f"mv {ws.repo}/svc2 {out}; echo @@moved=$?", done)
    try:
        ws.write("svc2/.env", secret + "\n")
        _show(ws.run("--", "true"))  # the user's launch meanwhile: the record now holds svc2/.env
    finally:
        (ws.base / "flags" / "s-end").touch()
        t.join(60)
    assert "@@moved=0" in done[0].out, done[0].out + done[0].err
    sessions_ended(ws)
    time.sleep(0.5)  # firejail: the watcher settles its log a moment after the launch returned
    res = ws.run("--", "sh", "-c", f"echo @@read; cat {out}/.env")
    _refused(res, secret)


@pytest.mark.parametrize("where", ["same-root", "worktree"])
def test_hidden_files_you_delete_while_a_session_runs_never_refuse_a_launch(ws, firejail, where):
    """Thirteenth red team: you delete a hidden file and a hidden directory (`rm .env.old`, `rm -rf secrets`) while a
    session of the project (or of its other worktree) runs. The record's check took a path gone from a directory
    still in place for moved, every running session's log saying "any": every launch refused, during the session
    and after it, until `accept`. Nothing is readable: launches run, and the secret that stays is still hidden."""

    secret = token("ENVSECRET")
    _committed(ws, {".gitignore": ".env*\nsecrets/\n", "a": "x\n"}, "c")
    ws.write(".env", secret + "\n")
    ws.write(".env.old", "OLD\n")
    ws.write("secrets/key", "KEY\n")
    wt = ws.base / "wt"
    ws.git("worktree", "add", "-q", "-b", "wb", str(wt))
    _show(ws.run("--", "true"))
    _show(ws.run("--", "true", cwd=wt))
    t = _held(ws, "s", wt if where == "worktree" else ws.repo)
    try:
        (ws.repo / ".env.old").unlink()
        shutil.rmtree(ws.repo / "secrets")
        during = ws.run("--", "sh", "-c", "echo @@ran; cat .env; true")
    finally:
        (ws.base / "flags" / "s-end").touch()
        t.join(60)
    sessions_ended(ws)
    time.sleep(0.5)  # firejail: the watcher settles its log a moment after the launch returned
    after = ws.run("--", "sh", "-c", "echo @@ran; cat .env; true")
    for res in (during, after):
        assert res.rc == 0 and "@@ran" in res.out, res.err
        assert secret not in res.out + res.err


def test_a_hidden_file_you_save_while_a_nested_clones_session_runs_never_refuses_a_launch(ws, firejail):
    """Fourteenth red team: the project launched once, a session of its nested clone runs (it does not hide the
    project's files, and its watcher notes those of the project's record that change), and you save the project's
    `.env` the way editors do (a new file renamed over it: `sed -i`, vim). The clone's watcher noted it, the old
    file was found nowhere, and every later launch of the project refused until `accept`. The watcher holds each
    path it guards: one whose file is gone from every directory (its last name replaced) was not moved anywhere.
    While that session runs its log says "any", and a launch of the project refuses (it cannot tell yet)."""

    secret = token("ENVSECRET")
    _committed(ws, {".gitignore": ".env\nsecrets/\n", "a": "x\n"}, "c")
    ws.write(".env", "OLD\n")
    ws.write("secrets/key", "OLD\n")
    lib = ws.repo / "lib"
    _repo(ws, lib)
    _show(ws.run("--", "true", cwd=lib))
    _show(ws.run("--", "true"))
    t = _held(ws, "s", lib)
    try:
        for rel in (".env", "secrets/key"):
            ws.write(rel + ".new", secret + "\n")
            os.rename(ws.repo / (rel + ".new"), ws.repo / rel)
        during = ws.run("--", "sh", "-c", "echo @@ran; cat .env secrets/key; true")
    finally:
        (ws.base / "flags" / "s-end").touch()
        t.join(60)
    sessions_ended(ws)
    time.sleep(0.5)  # firejail: the watcher settles its log a moment after the launch returned
    after = ws.run("--", "sh", "-c", "echo @@ran; cat .env secrets/key; true")
    assert during.rc == 65 and "moved away during a session" in during.err, during.err
    assert after.rc == 0 and "@@ran" in after.out, after.err
    assert secret not in during.out + during.err + after.out + after.err


# --- nineteenth red team ------------------------------------------------------------------------------------


def test_a_fifo_the_session_leaves_as_the_stash_list_never_hangs_a_launch(ws, firejail):
    """U3/U4: the session replaced .git/logs/refs/stash with a FIFO. Old code opened it to read the stash list,
    blocking for ever: at the session's end (bwrap: the user's terminal hung; the watcher under both) and at every
    later launch of a project with a hidden directory."""
    _cache_repo(ws, ws.repo)
    ws.write("cache/keep", "ignored, so that cache/ is hidden\n")
    ws.write("cache/x", "STASHED\n")
    ws.git("stash", "push", "-q", "-a", "--", "cache/x")  # a stash at the launch: its list is read at the end
    fifo = "rm -f .git/logs/refs/stash && mkfifo .git/logs/refs/stash"
    _session(ws, fifo)  # ends (the watcher too), within the run's time limit
    sessions_ended(ws)
    res = _show(ws.run("--", "sh", "-c", "echo @@ran", timeout=60))
    assert res.rc == 0 and "@@ran" in res.out, res.err


@pytest.mark.parametrize("how", ["graft", "object", "shallow", "forged-line"])
def test_a_popped_stash_the_session_makes_unreadable_is_still_said(ws, firejail, how):
    """U1: `git stash pop` of a `-a` stash into the scratch, then the session grafted the stash commit onto its first
    two parents only (`git replace --graft`), or deleted its third parent's object. `cat-file -e` still found the
    commit, `ls-tree <commit>^3` failed, and nothing was said (the files lost)."""
    _cache_repo(ws, ws.repo)
    ws.write("cache/keep", "ignored, so that cache/ is hidden\n")
    ws.write("cache/x", "STASHED\n")
    ws.git("stash", "push", "-q", "-a", "--", "cache/x")
    c = ws.git("rev-parse", "stash@{0}").strip()
    spoil = {
        "graft": f"git replace --graft {c} {c}^1 {c}^2",
        "object": f"t=$(git rev-parse {c}^3) && rm -f .git/objects/$(echo $t | cut -c1-2)/$(echo $t | cut -c3-)",
        # twentieth red team: the shallow list cuts parents as a graft does; a line git skips that names the stash
        "shallow": f"echo {c} >> .git/shallow",
        "forged-line": f"mkdir -p .git/logs/refs && printf 'junk %s junk\\n' {c} >> .git/logs/refs/stash",
    }[how]
    res = _session(ws, f"git stash pop -q 2>&1; echo @@rc=$?; {spoil}; echo @@spoiled=$?")
    if "@@rc=0" not in res.out:
        return  # a read-only mask: git refused and kept the stash
    assert "@@spoiled=0" in res.out, res.out
    assert not (ws.repo / "cache" / "x").exists()
    said = [line for line in _said(res, c) if "replace refs" not in line]
    assert len(said) == 1 and ("cache/x" in said[0] or "cannot be listed" in said[0]), res.err
    if how == "graft":  # the graft is a replace ref the session made: removed, and said (replacerefs.py)
        assert len(_said(res, f"refs/replace/{c}", "removed the git replace refs")) == 1, res.err


def test_a_stash_list_the_session_made_unreadable_is_still_read(ws, firejail):
    """Twentieth red team: session 1 put 8 MiB of lines git skips before the stash list; the launch refused to read
    it, took it for no stash, and a later session's `git stash pop` into the scratch lost the files silently."""
    _cache_repo(ws, ws.repo)
    ws.write("cache/keep", "ignored, so that cache/ is hidden\n")
    ws.write("cache/x", "STASHED\n")
    ws.git("stash", "push", "-q", "-a", "--", "cache/x")
    log = ws.repo / ".git" / "logs" / "refs" / "stash"
    log.write_bytes(b"0" * 40 + b" " + b"0" * 40 + b"\n" * 1 + (b"x" * 1023 + b"\n") * 9000 + log.read_bytes())
    assert len(ws.git("stash", "list").splitlines()) == 1  # git skips what it cannot read
    res = _session(ws, "git stash pop -q 2>&1; echo @@rc=$?")
    if "@@rc=0" not in res.out:
        return
    assert len(_said(res, "cache/x", "stash apply")) == 1, res.err


@pytest.mark.parametrize("how", ["link", "crlf", "link-to-file", "padded"])
def test_a_git_directory_the_session_turned_into_a_link_keeps_stashes_named(ws, firejail, how):
    """U5: session 1 ran `mv .git .gitreal; ln -s .gitreal .git` (git follows it). Old code took a `.git` link for no
    repository: no later launch read the stash list, and a later session's `git stash pop` into the scratch lost the
    files with nothing said. (Write containment makes `.git` a mount point: this is the `confine_writes = false`
    case, where the record and the lines must hold all the same.)"""
    ws.config_file.write_text("confine_writes = false\n")
    _cache_repo(ws, ws.repo)
    ws.write("cache/keep", "ignored, so that cache/ is hidden\n")
    ws.write("cache/x", "STASHED\n")
    ws.git("stash", "push", "-q", "-a", "--", "cache/x")
    turn = {
        "link": "mv .git .gitreal && ln -s .gitreal .git",
        # twentieth red team: git strips \r\n and blank lines, and follows a link to a `gitdir:` file
        "crlf": "mv .git .gitreal && printf 'gitdir: .gitreal\\r\\n' > .git",
        "link-to-file": "mv .git .gitreal && printf 'gitdir: .gitreal\\n' > .gitfile && ln -s .gitfile .git",
        "padded": "mv .git .gitreal && { printf 'gitdir: .gitreal'; head -c 5000 /dev/zero | tr '\\0' '\\n'; } > .git",
    }[how]
    _session(ws, f"{turn} && git status -s >/dev/null && echo @@turned")
    res = _session(ws, "git stash pop -q 2>&1; echo @@rc=$?")
    if "@@rc=0" not in res.out:
        return
    assert len(_said(res, "cache/x", "stash apply")) == 1, res.err


@pytest.mark.parametrize("decoy", [False, True])
def test_a_nested_clones_session_moving_a_hidden_files_directory_and_renaming_the_file_refuses(ws, firejail, decoy):
    """R1: the project hides a/.env; a session launched from a nested clone (which does not hide the project's files)
    moved a/ to z/ and renamed z/.env. The project's next launch found a/ at z/ by its directory's id, no z/.env there,
    and counted the file as found: it ran and showed z/readme.txt."""
    secret = token("R1SECRET")
    ws.config_file.write_text("confine_writes = false\n")  # the record holds without containment too
    _committed(ws, {".gitignore": ".env\n", "a/x.txt": "x\n"}, "a")
    ws.write("a/.env", secret + "\n")
    clone = ws.repo / "sub"
    _repo(ws, clone)
    _show(ws.run("--", "true"))
    _show(ws.run("accept", cwd=clone))
    # twentieth red team: a decoy `.env` put where the file was, hidden again by the same rule
    then = " && echo decoy > ../z/.env" if decoy else ""
    _session(ws, f"mv ../a ../z && mv ../z/.env ../z/readme.txt{then}", cwd=clone)
    assert (ws.repo / "z" / "readme.txt").read_text() == secret + "\n"
    sessions_ended(ws)
    _refused(_show(ws.run("--", "sh", "-c", "echo @@read; cat z/readme.txt")), secret)


def test_a_branch_checked_out_over_a_hidden_file_of_yours_is_named(ws, firejail):
    """U2: `.env` ignored on main and yours holds a secret; `feat` tracks a sample `.env`. Inside, `git checkout feat`
    could not replace the masked file (`unable to unlink`) but ended on feat: `git status` showed yours modified and
    `git commit -a` would commit your secret, with nothing said (the lines looked into hidden directories only)."""
    secret = token("ENVSECRET")
    _committed(ws, {".gitignore": ".env\n", "app.txt": "app\n"}, "main")
    ws.git("checkout", "-q", "-b", "feat")
    ws.write(".env", "SAMPLE=1\n")
    ws.git("add", "-f", ".env")
    ws.git("commit", "-qm", "sample env")
    ws.git("checkout", "-q", "main")
    ws.write(".env", secret + "\n")
    res = _session(ws, "git checkout -q feat 2>&1; echo @@rc=$?")
    if "@@rc=0" not in res.out:
        return  # git refused before it changed anything
    assert (ws.repo / ".env").read_text() == secret + "\n"  # yours stays on your disk
    (line,) = _said(res, ".env", "commit -a")
    assert secret not in line


def test_a_stash_the_session_signed_never_runs_a_program_outside(ws, firejail):
    """Twenty-second red team: session 1 stored a stash commit with a `gpgsig` header and set `log.showSignature`
    and `gpg.program` to a script of its own; ai-sandbox's `git stash list` (a `git log -g`) outside the sandbox, at
    session 2's end, checked the signature and ran the script, which copied a hidden file out. The stash list is
    asked of plumbing that runs no program."""
    ran = ws.base / "ran"
    ws.config_file.write_text(UNCONFINED)  # confined, ~/.gitconfig is read-only: the plant would fail
    _cache_repo(ws, ws.repo)
    ws.write("cache/keep", "ignored, so that cache/ is hidden\n")
    plant = (
        f"printf '#!/bin/sh\\ntouch {ran}\\nexit 1\\n' > .git/v.sh && chmod +x .git/v.sh && "
        "T=$(git write-tree) && H=$(git rev-parse HEAD) && I=$(git -c user.name=a -c user.email=a@b commit-tree $T -p $H -m index) && "
        # two parents: git 2.47's `stash store` takes only a stash-like commit
        "C=$(printf 'tree %s\\nparent %s\\nparent %s\\nauthor a <a@b> 1 +0000\\ncommitter a <a@b> 1 +0000\\n"
        "gpgsig -----BEGIN PGP SIGNATURE-----\\n \\n AAAA\\n -----END PGP SIGNATURE-----\\n\\nwip\\n' $T $H $I "
        "| git hash-object -t commit -w --stdin) && git stash store -m wip $C && "
        # --global: the repository's config loses them at the session's end (gitsettings.py)
        'git config --global gpg.program "$PWD/.git/v.sh" && git config --global log.showSignature true && echo @@planted'
    )
    res = _session(ws, plant)
    assert "@@planted" in res.out, res.err
    sessions_ended(ws)
    _session(ws, "true")  # a stash at the launch: its list is asked again at the end
    sessions_ended(ws)
    time.sleep(0.5)
    assert not ran.exists(), "a program the session named ran outside the sandbox"


def test_an_index_entry_over_a_large_hidden_file_is_named_without_reading_it_whole(ws, firejail):
    """Twenty-second red team: the session put an index entry over the user's large hidden file; the end read the
    file whole to hash it (a 30 GiB sparse one: MemoryError, a traceback under bwrap, silence under firejail). Past
    HASH_LIMIT the file is taken as different and named."""
    _cache_repo(ws, ws.repo)
    big = ws.repo / "cache" / "big.bin"
    big.parent.mkdir(exist_ok=True)
    with open(big, "wb") as f:
        f.truncate(300 << 20)  # sparse: no disk used
    oid = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"  # the empty blob
    res = _session(ws, f"git update-index --add --cacheinfo 100644,{oid},cache/big.bin && echo @@added")
    assert "@@added" in res.out, res.err
    assert "Traceback" not in res.err and "internal error" not in res.err, res.err
    assert len(_said(res, "cache/big.bin", "over hidden files of yours")) == 1, res.err


@pytest.mark.parametrize("transport", ["ext", "file"])
def test_ai_sandboxs_own_git_fetches_nothing_whatever_the_repository_says(ws, firejail, transport):
    """Twenty-third red team: in a repository made a partial clone, `protocol.ext.allow = always` (a protocol's own
    key wins over the `-c protocol.allow=never` ai-sandbox passed) with the remote `ext::<command>`, and the blob
    of a tracked .gitattributes deleted: the launch's own `git check-attr`, outside the sandbox, lazy-fetched it and
    ran the command, which copied the hidden .env (7 of 7 runs). The same through a local remote's `uploadpack`.
    Left in the repository as a session leaves it whose end never ran (the end removes them: gitsettings.py)."""
    secret = token("FETCHSECRET")
    _committed(ws, {".gitignore": ".env\n", "app.txt": "app\n", "sub/.gitattributes": "*.bin binary\n"}, "tree")
    ws.write(".env", secret + "\n")
    leak = ws.base / "leak"
    blob = ws.git("rev-parse", ":sub/.gitattributes").strip()
    (ws.repo / "sub" / ".gitattributes").unlink()
    (ws.repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()
    for key, value in [
        ("core.repositoryformatversion", "1"), ("extensions.partialClone", "origin"), ("remote.origin.promisor", "true"),
    ] + (
        [("protocol.ext.allow", "always"), ("remote.origin.url", f"ext::sh -c cat% .env% >{leak}")]
        if transport == "ext"
        else [("protocol.file.allow", "always"), ("remote.origin.url", str(ws.repo)),
              ("remote.origin.uploadpack", f"sh -c 'cat .env >{leak}'; false")]
    ):  # fmt: skip
        ws.git("config", key, value)
    res = ws.run("--", "sh", "-c", f"echo @@ran; cat {leak}; true")
    sessions_ended(ws)
    assert secret not in res.out + res.err, "ai-sandbox's own git ran the repository's transport outside the sandbox"
    assert not leak.exists() or secret not in leak.read_text()


# --- forty-third red team: what a session leaves where the next launch reads it ---------------------------------

PLANTED = {
    "fifo": "mkfifo {path}",
    "device": "ln -s /dev/zero {path}",  # read for ever: the launch ran out of memory (internal error)
}


def _left_in_git(ws: Workspace, path: str, planted: str) -> str:
    """A planted secret, and a session that leaves PLANTED[planted] at path (in the git directory) and ends."""
    secret = plant_env(ws)
    _session(ws, f"mkdir -p {os.path.dirname(path)} && " + PLANTED[planted].format(path=path))
    sessions_ended(ws)
    return secret


@pytest.mark.backends("firejail")  # ai-sandbox's own reads, outside any sandbox
@pytest.mark.parametrize("planted", PLANTED)
def test_a_fifo_or_a_device_left_as_a_worktrees_gitdir_never_hangs_a_launch(ws, firejail, planted):
    """The session made `.git/worktrees/w/gitdir` (which names a linked checkout's `.git` file) a FIFO nobody writes,
    or a link to /dev/zero: every later launch, explain and doctor hung reading it. Now it is read only as a regular
    file of a bounded size; what cannot be read names no checkout, as a deleted one (git calls it prunable)."""
    secret = _left_in_git(ws, ".git/worktrees/w/gitdir", planted)
    started = time.monotonic()
    res = _show(ws.run("--", "sh", "-c", "echo @@ran; cat .env; true", timeout=60))
    assert time.monotonic() - started < 30
    assert res.rc == 0 and "@@ran" in res.out, res.err
    assert secret not in res.out + res.err
    assert ws.run("explain", timeout=60).rc == 0


@pytest.mark.backends("firejail")
@pytest.mark.parametrize("planted", PLANTED)
def test_a_fifo_or_a_device_left_as_the_repositorys_attributes_is_refused_at_once(ws, firejail, planted):
    """The session made `.git/info/attributes` a FIFO (or a link to /dev/zero): the launch's look for git-crypt's
    attribute hung on it for ever, and git itself would wait on it too. Refused at once now, naming the file. (The
    session's end now puts a link there back as the launch found it, gitsettings.py: the link is left outside, as
    anything but a session may leave it.)"""
    secret = plant_env(ws)
    (ws.repo / ".git" / "info").mkdir(exist_ok=True)
    # as a session whose end never ran leaves it (launch and watcher killed with SIGKILL): one that ends moves a
    # FIFO there aside (gitsettings._blocks; tests/security/test_git_settings.py)
    if planted == "device":
        (ws.repo / ".git" / "info" / "attributes").symlink_to("/dev/zero")
    else:
        os.mkfifo(ws.repo / ".git" / "info" / "attributes")
    started = time.monotonic()
    res = _show(ws.run("--", "sh", "-c", "echo @@read; cat .env; true", timeout=60))
    assert time.monotonic() - started < 15
    _refused_or_blind(res, secret)
    assert res.rc == 65 and ".git/info/attributes is not a regular file" in res.err, res.err


def test_a_hidden_files_name_reaches_the_terminal_escaped(ws, firejail):
    """The session committed `sub/x<ESC>]0;…<BEL><ESC>[2J….evil`, left it edited and not staged, and blocked `*.evil`:
    the next launch's hidden-edit warning wrote the name's codes to the user's terminal (its title set, the screen
    cleared). Every line the launch prints is escaped now."""
    name = "sub/x\x1b]0;PWNED\x07\x1b[2J\x1b[31mRED.evil"
    ws.git("config", "user.name", "agent")
    ws.git("config", "user.email", "agent@example.invalid")
    ws.write(name, "v1\n")
    ws.git("add", "-A")
    ws.git("commit", "-qm", "odd")
    ws.write(name, "v2, not staged\n")
    ws.write(".ai-sandbox.toml", 'block = ["*.evil"]\n')
    res = _show(ws.run("--", "true"))
    said = [line for line in res.err.splitlines() if "have not staged" in line]
    assert res.rc == 0 and len(said) == 1, res.err
    assert "\x1b" not in res.err and "\x07" not in res.err, repr(res.err)
    assert "x\\x1b]0;PWNED\\x07" in said[0], said
