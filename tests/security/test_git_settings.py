"""A session cannot leave git settings that run a program in the user's own git later, outside the sandbox
(issue 27, item 2): `core.fsmonitor` runs on the user's next `git status`, `alias.x = !cmd` when they type it,
an `include.path` pulls any of them from a file the session wrote. What git writes in ordinary work (a remote, an
upstream, `user.email`) stays; everything else the session changed in the repository's config files is put back
as it was at the launch, and one line after the session says what. On the real sandbox, as root and as a user, on
firejail and bwrap, with the default settings: the git directory is writable inside, so this is the defence.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import (
    AIS,
    BACKENDS,  # noqa: F401  (the module runs once per backend: conftest)
    Workspace,
    chown_tree,
    plant_env,
    sessions_ended,
    token,
)
from tests.stage import setpriv_argv

pytestmark = pytest.mark.sandbox


def _outside_git(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    """The user's own git after the session: their HOME, no -c of the suite's, the repository's config."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=str(ws.home), GIT_CONFIG_NOSYSTEM="1", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid")
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    return subprocess.run(
        ["git", "-c", "safe.directory=*", *args], cwd=ws.repo, env=env, capture_output=True, text=True
    )


def _config(ws: Workspace, *args: str, where: str = ".git/config") -> str:
    return subprocess.run(
        ["git", "config", "--file", str(ws.repo / where), *args], capture_output=True, text=True, check=False
    ).stdout


def _repo(ws: Workspace) -> Path:
    ws.git("init", "-q")
    ws.write("a.txt", "a\n")
    ws.git("add", "a.txt")
    ws.git("commit", "-qm", "init")
    marker = ws.base / "ran"
    ws.write("evil.sh", f"#!/bin/sh\necho ran >> {marker}\n")
    os.chmod(ws.repo / "evil.sh", 0o755)
    return marker


def test_settings_that_run_programs_do_not_outlive_the_session(ws):
    marker = _repo(ws)
    evil = ws.repo / "evil.sh"
    included = ws.base / "included.cfg"
    script = (
        f"git config core.fsmonitor {evil} && git config alias.st '!{evil}' && git config core.pager {evil} && "
        f"git config credential.helper '!{evil}' && git config core.hooksPath /tmp && "
        f"printf '[core]\\n\\tfsmonitor = {evil}\\n' > {included} && git config include.path {included} && "
        f"git config 'includeIf.onbranch:*.path' {included} && "
        # ordinary work: kept
        "git remote add origin https://example.invalid/r.git && git config user.email agent@example.invalid && "
        "git config branch.master.remote origin && echo @@set"
    )
    res = ws.run("--", "sh", "-c", script)
    sessions_ended(ws)
    assert res.rc == 0 and "@@set" in res.out, res.err
    for key in ("core.fsmonitor", "alias.st", "core.pager", "credential.helper", "core.hooksPath", "include.path"):
        assert _config(ws, "--get-all", key) == "", f"{key} outlived the session"
    assert _config(ws, "--get-regexp", "^includeif") == ""
    assert _config(ws, "remote.origin.url").strip() == "https://example.invalid/r.git"
    assert _config(ws, "user.email").strip() == "agent@example.invalid"
    assert _config(ws, "branch.master.remote").strip() == "origin"
    # the user's own git afterwards, outside: nothing of the session's runs
    ws.write("a.txt", "b\n")
    assert _outside_git(ws, "status", "--short").returncode == 0
    assert not marker.exists(), "the user's git ran a program a session configured"
    lines = [ln for ln in res.err.splitlines() if "git settings" in ln]
    assert len(lines) == 1, res.err  # one line, once (under bwrap the launch and the watcher both end a session)
    assert "core.fsmonitor" in lines[0] and "alias.st" in lines[0] and "include.path" in lines[0], lines[0]


def test_a_setting_of_yours_the_session_changed_goes_and_the_line_says_what_it_was(ws):
    """The session's value goes; the user's is named, never written back (a launch's look may hold what another
    session running meanwhile planted). One the session removed stays removed, as a deleted file does."""
    _repo(ws)
    ws.git("config", "core.pager", "less -R")
    ws.git("config", "alias.lg", "log --oneline")
    evil = ws.repo / "evil.sh"
    script = (
        f"git config core.pager {evil} && git config core.fsmonitor {evil} && git config alias.st '!{evil}' && "
        "git config --unset alias.lg && echo @@done"
    )
    res = ws.run("--", "sh", "-c", script)
    sessions_ended(ws)
    assert res.rc == 0 and "@@done" in res.out, res.err
    assert _config(ws, "--get-all", "core.pager") == ""
    assert _config(ws, "--get-all", "alias.lg") == ""
    lines = [ln for ln in res.err.splitlines() if "git settings" in ln]
    assert len(lines) == 1 and "core.pager (it was 'less -R')" in lines[0], res.err
    doc = (Path(__file__).parents[2] / "docs" / "writes.md").read_text()
    assert lines[0] in doc, "docs/writes.md shows another line than the real one"


def test_a_config_file_the_session_replaced_or_added_is_put_back(ws):
    """A link in place of .git/config (git follows it) and a config.worktree the session turned on: back as they
    were, the file the link named untouched."""
    marker = _repo(ws)
    evil = ws.repo / "evil.sh"
    before = (ws.repo / ".git" / "config").read_bytes()
    planted = ws.base / "planted.cfg"
    script = (
        f"git config core.repositoryformatversion 1 && git config extensions.worktreeConfig true && "
        f"git config --worktree core.fsmonitor {evil} && "
        f"cp .git/config {planted} && printf '[alias]\\n\\tx = !{evil}\\n' >> {planted} && "
        f"mv .git/config .git/config.old && ln -s {planted} .git/config && echo @@done"
    )
    res = ws.run("--", "sh", "-c", script)
    sessions_ended(ws)
    assert res.rc == 0 and "@@done" in res.out, res.err
    cfg = ws.repo / ".git" / "config"
    assert not cfg.is_symlink() and cfg.read_bytes() == before
    assert _config(ws, "--get-all", "core.fsmonitor", where=".git/config.worktree") == ""
    assert b"alias" in planted.read_bytes()  # the file the link named is not the repository's: left alone
    ws.write("a.txt", "b\n")
    _outside_git(ws, "status", "--short")
    assert not marker.exists(), "the user's git ran a program a session configured"
    assert any("git settings" in ln for ln in res.err.splitlines()), res.err


def test_a_file_your_config_includes_is_checked_too(ws):
    """An include of the user's into the work tree (writable inside): the session's key there goes too."""
    marker = _repo(ws)
    evil = ws.repo / "evil.sh"
    ws.write("shared.gitconfig", "[user]\n\tname = t\n")
    ws.git("config", "include.path", "../shared.gitconfig")
    mark = token("INC")
    res = ws.run("--", "sh", "-c", f"printf '[core]\\n\\tfsmonitor = {evil}\\n' >> shared.gitconfig && echo {mark}")
    sessions_ended(ws)
    assert res.rc == 0 and mark in res.out, res.err
    assert _config(ws, "--get-all", "core.fsmonitor", where="shared.gitconfig") == ""
    assert _config(ws, "user.name", where="shared.gitconfig").strip() == "t"
    ws.write("a.txt", "b\n")
    _outside_git(ws, "status", "--short")
    assert not marker.exists(), "the user's git ran a program a session configured"


# --- the twenty-fourth red team -------------------------------------------------------------------------------


def _ran_outside(ws: Workspace, marker: Path, *git: list[str]) -> bool:
    ws.write("a.txt", "changed\n")
    for args in git or (["status", "--short"],):
        _outside_git(ws, *args)
    return marker.exists()


def test_a_commondir_the_session_wrote_in_the_git_directory_is_removed(ws):
    """git reads `commondir` in any git directory: .git/commondir naming a copy of the config with
    core.fsmonitor (and hooks of its own) made the user's `git status` run it; only a linked worktree's was
    looked at."""
    marker = _repo(ws)
    evil = ws.repo / "evil.sh"
    script = (
        "mkdir .git/c && for x in objects refs logs info hooks; do ln -s ../$x .git/c/$x; done && "
        f"cp .git/config .git/c/config && printf '[core]\\n\\tfsmonitor = {evil}\\n' >> .git/c/config && "
        "echo c > .git/commondir && echo @@done"
    )
    res = ws.run("--", "sh", "-c", script)
    sessions_ended(ws)
    assert res.rc == 0 and "@@done" in res.out, res.err
    assert not (ws.repo / ".git" / "commondir").exists()
    assert not _ran_outside(ws, marker), "the user's git ran a program a session configured"
    assert any("commondir" in ln for ln in res.err.splitlines() if "git settings" in ln), res.err


def test_a_push_url_or_remote_file_naming_a_local_repository_is_removed(ws):
    """A push to a repository on this machine runs its hooks, as the user: `remote.origin.pushurl` naming a bare
    repository the session made in .git, with a pre-receive hook, ran it on the user's `git push`; and git's old
    `.git/remotes/<name>` files name a URL without the config."""
    marker = _repo(ws)
    bare = ws.repo / ".git" / "x.git"
    script = (
        f"git init -q --bare {bare} && printf '#!/bin/sh\\necho ran >> {marker}\\n' > {bare}/hooks/pre-receive && "
        f"chmod +x {bare}/hooks/pre-receive && git remote add origin https://example.invalid/r.git && "
        f"git config remote.origin.pushurl {bare} && git remote add mirror file://{bare} && "
        f"mkdir -p .git/remotes && printf 'URL: {bare}\\nPush: HEAD:refs/heads/x\\n' > .git/remotes/old && echo @@done"
    )
    res = ws.run("--", "sh", "-c", script)
    sessions_ended(ws)
    assert res.rc == 0 and "@@done" in res.out, res.err
    assert _config(ws, "--get-all", "remote.origin.pushurl") == ""
    assert _config(ws, "--get-all", "remote.mirror.url") == ""
    assert _config(ws, "remote.origin.url").strip() == "https://example.invalid/r.git"  # a network one stays
    assert not (ws.repo / ".git" / "remotes" / "old").exists()
    pushes = (["push", "origin", "HEAD:refs/heads/y"], ["push", "mirror", "HEAD"], ["push", "old"])
    assert not _ran_outside(ws, marker, *pushes), "the user's push ran a hook a session wrote"


def test_thousands_of_settings_cannot_delay_the_removal(ws):
    """One git call per key: 8,000 junk keys took a minute (a full 1 MiB file: hours) before the file was
    written, and under firejail the user's `git status` meanwhile ran the fsmonitor; the line named the first
    8 keys, junk, not core.fsmonitor. Past a few keys the file is put back whole, and the line names the keys
    that run a program first, with the count."""
    marker = _repo(ws)
    evil = ws.repo / "evil.sh"
    junk = "echo '[junk]' >> .git/config; i=0; while [ $i -lt 3000 ]; do echo \"  k$i = v\"; i=$((i+1)); done >> .git/config"
    res = ws.run("--", "sh", "-c", f"{junk} && git config core.fsmonitor {evil}")
    sessions_ended(ws)
    assert res.rc == 0, res.err
    assert _config(ws, "--get-all", "core.fsmonitor") == "" and _config(ws, "--get-regexp", "^junk") == ""
    assert not _ran_outside(ws, marker)
    line = next(ln for ln in res.err.splitlines() if "git settings" in ln)
    assert "core.fsmonitor" in line and "3001" in line, line


def _gitlink_with_fsmonitor(gitdir: str, evil: Path) -> str:
    """A session's script: a gitlink `vendor` whose `.git` file names gitdir, a repository whose core.fsmonitor is
    evil (twenty-fourth red team)."""
    return (
        f"git init -q --bare {gitdir} && mkdir vendor && echo 'gitdir: ../{gitdir}' > vendor/.git && "
        "git -C vendor config core.bare false && git -C vendor config core.worktree .. && "
        "git -C vendor -c user.name=x -c user.email=x@x commit -q --allow-empty -m x && "
        f"git -C vendor config core.fsmonitor {evil} && "
        f"git update-index --add --cacheinfo 160000,$(git --git-dir={gitdir} rev-parse HEAD),vendor && echo @@done"
    )


def test_a_submodule_the_session_made_anywhere_is_looked_at(ws):
    """A gitlink whose `.git` file names a git directory inside .git but outside modules/: the user's
    `git status` at the project's root recursed into it and ran its core.fsmonitor."""
    marker = _repo(ws)
    evil = ws.repo / "evil.sh"
    script = _gitlink_with_fsmonitor(".git/lfs-cache.git", evil)
    res = ws.run("--", "sh", "-c", script)
    sessions_ended(ws)
    assert res.rc == 0 and "@@done" in res.out, res.err
    assert not _ran_outside(ws, marker), "the user's git status ran a submodule's fsmonitor a session set"
    assert "core.fsmonitor" in res.err, res.err


def _remote_with_a_commit(ws: Workspace) -> Path:
    """A bare repository on this machine holding one commit, for the session to add as a submodule."""
    lib = ws.base / "lib.git"
    subprocess.run(["git", "init", "-q", "--bare", str(lib)], check=True)
    work = ws.base / "libwork"
    subprocess.run(["git", "clone", "-q", str(lib), str(work)], check=True, capture_output=True)
    ws.git("commit", "-q", "--allow-empty", "-m", "x", cwd=work)
    ws.git("push", "-q", "origin", "HEAD", cwd=work)
    return lib


def test_a_submodule_the_session_adds_keeps_working(ws):
    """`git submodule add` writes core.worktree into the submodule's config and a `.git` file into its checkout:
    both are git's own and stay (a core.worktree leading into the project; elsewhere, the user's next checkout
    there would write the session's files). Its remote is a path on this machine here: that one goes, named."""
    _repo(ws)
    lib = _remote_with_a_commit(ws)
    res = ws.run("--", "sh", "-c", f"git -c protocol.file.allow=always submodule add -q {lib} lib && echo @@added")
    sessions_ended(ws)
    assert res.rc == 0 and "@@added" in res.out, res.err
    assert (ws.repo / "lib" / ".git").is_file()
    assert _config(ws, "core.worktree", where=".git/modules/lib/config").strip() == "../../../lib"
    assert _outside_git(ws, "-C", "lib", "status").returncode == 0
    line = next(ln for ln in res.err.splitlines() if "git settings" in ln)
    assert "remote.origin.url in modules/lib/config" in line and "core.worktree" not in line, line


def test_many_git_directories_cannot_push_a_submodule_out_of_the_look(ws):
    """Eighty empty directories in .git/worktrees filled the 64 files looked at before the submodule's config."""
    marker = _repo(ws)
    evil = ws.repo / "evil.sh"
    script = "i=0; while [ $i -lt 80 ]; do mkdir -p .git/worktrees/a$i; i=$((i+1)); done; " + _gitlink_with_fsmonitor(
        ".git/modules/zz", evil
    )
    res = ws.run("--", "sh", "-c", script)
    sessions_ended(ws)
    assert res.rc == 0 and "@@done" in res.out, res.err
    assert not _ran_outside(ws, marker), "the user's git status ran a submodule's fsmonitor a session set"


# Inside session A: every directory a later launch makes in /tmp, read the moment it appears (inotify)
_TMP_READER = r"""
import ctypes, os, select, struct, sys, time
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init1(os.O_NONBLOCK)
libc.inotify_add_watch(fd, b"/tmp", 0x100)
print("@@armed", flush=True)
end, out = time.time() + float(sys.argv[1]), []
while time.time() < end:
    if not select.select([fd], [], [], 0.2)[0]:
        continue
    buf, i = os.read(fd, 65536), 0
    while i < len(buf):
        _, _, _, n = struct.unpack_from("iIII", buf, i)
        name = buf[i + 16 : i + 16 + n].rstrip(b"\0").decode(errors="replace")
        i += 16 + n
        where = os.path.join("/tmp", name)
        for _ in range(20000):  # until a file in it is read, or it is gone
            got = []
            try:
                for root, _, files in os.walk(where):
                    got += [open(os.path.join(root, f), "rb").read().decode(errors="replace") for f in files]
            except OSError:
                pass
            if any(got) or not os.path.isdir(where):
                out += got
                break
print("@@read", *out, flush=True)
"""


def test_a_file_an_include_names_is_never_copied_where_a_session_can_read_it(ws):
    """Twenty-fifth red team: session A planted a nested repository whose config includes (under a condition
    never true) the hidden .env; the user's next launch, while A ran, read the include and wrote its bytes to
    /tmp/ai-sandbox-cfg-*/config to parse them, where A copied them (first try, 4 of 4). A hidden file is never
    read; what is read is parsed from git's stdin."""
    from tests.security.test_between_sessions import _argv

    _repo(ws)
    secret = token("INCLUDESECRET")
    ws.write(".gitignore", ".env\n")
    ws.write(".env", secret + "\n")
    ws.write("reader.py", _TMP_READER)
    ws.git("init", "-q", "nested")
    ws.git("-C", "nested", "config", "includeIf.onbranch:no-such-branch.path", str(ws.repo / ".env"))
    if ws.user:
        chown_tree(ws.base, ws.user)
    cmd = [*_argv(ws), "--", "python3", "reader.py", "6"]
    reader = subprocess.Popen(cmd, cwd=ws.repo, env=ws.env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert reader.stdout is not None
    assert b"@@armed" in reader.stdout.readline()
    assert ws.run("--", "true").rc == 0
    said = reader.communicate(timeout=60)[0].decode()
    assert "@@read" in said, said
    assert secret not in said, "a running session read a hidden file ai-sandbox copied into /tmp"


def test_a_stopped_rebase_that_would_run_commands_is_named(ws):
    """Twenty-fifth red team: a rebase the session left stopped, its list holding an `exec` line (beyond what
    `git status` shows): the user's `git rebase --continue` runs it, outside."""
    _repo(ws)
    ws.git("commit", "-q", "--allow-empty", "-m", "second")
    evil = ws.repo / "evil.sh"
    script = f"git -c sequence.editor=\"sed -i '1i break'\" rebase -q -i -x {evil} HEAD~1 >/dev/null 2>&1; echo @@done"
    res = ws.run("--", "sh", "-c", script)
    sessions_ended(ws)
    assert "@@done" in res.out, res.err
    assert (ws.repo / ".git" / "rebase-merge" / "git-rebase-todo").exists()
    assert any("stopped whose state runs commands" in ln for ln in res.err.splitlines()), res.err


# --- the twenty-sixth red team ----------------------------------------------------------------------------------


def test_a_remote_named_like_a_path_is_no_remote(ws):
    """A remote named `/…/.git/x.git` with a network URL: git ignores a remote whose name holds a slash and takes
    the name for a path, so `branch.main.remote` naming it pushed to the bare repository there and ran its hook."""
    marker = _repo(ws)
    bare = ws.repo / ".git" / "x.git"
    branch = ws.git("rev-parse", "--abbrev-ref", "HEAD").strip()
    script = (
        f"git init -q --bare {bare} && printf '#!/bin/sh\\necho ran >> {marker}\\n' > {bare}/hooks/pre-receive && "
        f"chmod +x {bare}/hooks/pre-receive && git config 'remote.{bare}.url' https://example.invalid/r.git && "
        f"git config branch.{branch}.remote {bare} && git config branch.{branch}.merge refs/heads/{branch} && echo @@done"
    )
    res = ws.run("--", "sh", "-c", script)
    sessions_ended(ws)
    assert res.rc == 0 and "@@done" in res.out, res.err
    assert _config(ws, "--get-all", f"branch.{branch}.remote") == ""
    assert not _ran_outside(ws, marker, ["push"]), "the user's git push ran a hook a session wrote"


def test_a_stopped_rebase_naming_a_merge_strategy_is_named(ws):
    """`git rebase --continue` runs `git merge-<strategy>` the state names, found even as a relative path."""
    _repo(ws)
    ws.git("commit", "-q", "--allow-empty", "-m", "second")
    script = (
        "git -c sequence.editor=\"sed -i '1i break'\" rebase -q -i HEAD~1 >/dev/null 2>&1; "
        "echo /x > .git/rebase-merge/strategy; echo @@done"
    )
    res = ws.run("--", "sh", "-c", script)
    sessions_ended(ws)
    assert "@@done" in res.out, res.err
    assert any("stopped whose state runs commands" in ln for ln in res.err.splitlines()), res.err


def test_a_submodule_pointing_outside_the_project_is_never_rewritten(ws):
    """Gitlinks whose `.git` files named the user's ~/.ssh and ~/.config/git: the end rewrote their `config`
    files (the global git config stripped, ~/.ssh/config moved aside), outside the project."""
    _repo(ws)
    ssh = ws.home / ".ssh"
    ssh.mkdir(exist_ok=True)
    (ssh / "config").write_text("Host *\n  ServerAliveInterval 30\n")
    (ws.home / ".config" / "git").mkdir(parents=True, exist_ok=True)
    (ws.home / ".config" / "git" / "config").write_text("[alias]\n\tst = status\n")
    before = {p: p.read_text() for p in (ssh / "config", ws.home / ".config" / "git" / "config")}
    oid = ws.git("rev-parse", "HEAD").strip()
    script = (
        f"mkdir a b && echo 'gitdir: {ssh}' > a/.git && echo 'gitdir: {ws.home}/.config/git' > b/.git && "
        f"git update-index --add --cacheinfo 160000,{oid},a --cacheinfo 160000,{oid},b && echo @@done"
    )
    res = ws.run("--", "sh", "-c", script)
    sessions_ended(ws)
    assert "@@done" in res.out, res.err
    for path, text in before.items():
        assert path.is_file() and path.read_text() == text, f"{path} was changed by ai-sandbox"
    assert sorted(p.name for p in ssh.iterdir()) == ["config"]
    assert any("outside the project" in ln for ln in res.err.splitlines()), res.err


# --- the forty-third red team -----------------------------------------------------------------------------------

HOOK_PLANTS = {
    "file": "cp {evil} {hooks}/post-checkout",
    "link": "ln -s {evil} {hooks}/post-checkout",
    "linked-directory": "mkdir -p mine && cp {evil} mine/post-checkout && rm -rf {hooks} && ln -s $PWD/mine {hooks}",
    "name-taken": "cp {evil} {hooks}/post-checkout && touch {hooks}/post-checkout.ai-sandbox-disabled",
    # the re-attack: a hundred names taken kept the hook in place; a hook moved in kept its old change time
    "names-taken": "cp {evil} {hooks}/post-checkout && touch {hooks}/post-checkout.ai-sandbox-disabled "
    "$(seq -f {hooks}/post-checkout.ai-sandbox-disabled.%g 1 99)",
    "moved-in": "rm -rf {hooks} && mv .git/h {hooks}",
}


@pytest.mark.parametrize("plant", HOOK_PLANTS)
def test_hooks_in_a_submodule_the_session_adds_never_run_outside(ws, plant):
    """The session added a submodule, whose git directory is new in .git/modules (so its hooks/ was no read-only
    place at the launch), and put a post-checkout hook there: the user's next checkout in it, or `git submodule
    update` at the root, ran the hook outside, which copied .env (root and user, both backends). What the session
    made in such a git directory's hooks is renamed aside at the end, and named; the template's samples stay."""
    marker = _repo(ws)
    evil = ws.repo / "evil.sh"
    lib = _remote_with_a_commit(ws)
    if plant == "moved-in":  # as an earlier session leaves it
        (ws.repo / ".git" / "h").mkdir()
        shutil.copy2(evil, ws.repo / ".git" / "h" / "post-checkout")
        if ws.user:
            chown_tree(ws.repo / ".git" / "h", ws.user)
        time.sleep(1.1)
    plant_it = HOOK_PLANTS[plant].format(evil=evil, hooks=".git/modules/lib/hooks")
    script = f"git -c protocol.file.allow=always submodule add -q {lib} lib && {plant_it} && echo @@planted"
    res = ws.run("--", "sh", "-c", script)
    sessions_ended(ws)
    assert res.rc == 0 and "@@planted" in res.out, res.err
    _outside_git(ws, "-C", "lib", "checkout", "-q", "-b", "other")
    assert not marker.exists(), "the user's checkout in the submodule ran a hook the session planted"
    line = next((ln for ln in res.err.splitlines() if "hooks" in ln), "")
    assert "modules/lib/hooks" in line and ".ai-sandbox-disabled" in line, res.err
    if plant in ("file", "link"):
        assert (ws.repo / ".git/modules/lib/hooks/pre-commit.sample").exists()
    if plant in ("file", "link", "moved-in"):
        assert (ws.repo / ".git/modules/lib/hooks/post-checkout.ai-sandbox-disabled").is_symlink() == (plant == "link")
    assert evil.read_text().startswith("#!/bin/sh")  # a link's target is never touched


NESTED = "git init -q lib && git -C lib -c user.name=a -c user.email=a@b.invalid commit -q --allow-empty -m one && "


def test_a_hook_beside_a_commondir_the_session_wrote_never_runs_outside(ws):
    """The re-attack: a nested repository registered as a gitlink, its `.git/commondir` naming a directory the
    session made, and a hook in `lib/.git/hooks`: the hooks were looked for where commondir led, the end then put
    the pointer back, and git used `lib/.git/hooks`, which nobody had looked at."""
    marker = _repo(ws)
    evil = ws.repo / "evil.sh"
    script = (
        NESTED + "git init -q --bare lib/.git/cdir && cp -r lib/.git/objects lib/.git/refs lib/.git/HEAD lib/.git/cdir/"
        f" && cp {evil} lib/.git/hooks/post-checkout && echo cdir > lib/.git/commondir && git add lib && echo @@planted"
    )
    res = ws.run("--", "sh", "-c", script)
    sessions_ended(ws)
    assert res.rc == 0 and "@@planted" in res.out, res.err
    _outside_git(ws, "-C", "lib", "checkout", "-q", "-b", "x")
    assert not marker.exists(), "the user's checkout in the nested repository ran a hook the session planted"


def test_a_commondir_naming_another_repository_never_rewrites_its_config(ws):
    """The re-attack: the session pointed a nested repository's `.git/commondir` at another repository of the
    user's, outside the project: the end took that repository's config for the session's and removed its
    core.editor and aliases. Only the pointer is put back."""
    _repo(ws)
    other = ws.base / "userrepo"
    subprocess.run(["git", "init", "-q", str(other)], check=True)
    subprocess.run(["git", "-C", str(other), "config", "alias.st", "status"], check=True)
    subprocess.run(["git", "-C", str(other), "config", "core.editor", "vim"], check=True)
    if ws.user:
        chown_tree(other, ws.user)
    before = (other / ".git" / "config").read_bytes()
    res = ws.run("--", "sh", "-c", NESTED + f"git add lib && echo {other}/.git > lib/.git/commondir && echo @@planted")
    sessions_ended(ws)
    assert res.rc == 0 and "@@planted" in res.out, res.err
    assert (other / ".git" / "config").read_bytes() == before, res.err


def test_the_session_is_over_when_the_launch_returns(ws):
    """A script's next command runs the moment the launch returns: a setting the session planted is gone by then,
    and so are its index marks (forty-third red team: under firejail, whose launch became firejail and left the end
    to the watcher, core.fsmonitor was still set ~20 ms after the launch returned, 4 of 5 times as root and 5 of 5
    as a user). The output goes to files, not pipes: the watcher holds the launch's stderr, so reading a pipe to
    its end would wait for the watcher too."""
    _repo(ws)
    plant_env(ws)  # a hidden file: the index marks of skipworktree.py are set and must be cleared
    evil = ws.repo / "evil.sh"
    cmd = [AIS, *ws.backend_args, "--", "sh", "-c", f"git config core.fsmonitor {evil} && echo @@set"]
    if ws.user:
        chown_tree(ws.base, ws.user)
        cmd = setpriv_argv(ws.user.uid, ws.user.gid, cmd)
    for i in range(3):
        with open(ws.base / f"out{i}", "wb") as out, open(ws.base / f"err{i}", "wb") as err:
            rc = subprocess.run(cmd, cwd=ws.repo, env=ws.env(), stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        planted = _config(ws, "--get-all", "core.fsmonitor")  # at once: no wait for a watcher
        sessions_ended(ws, timeout=0)
        said = (ws.base / f"err{i}").read_text(errors="replace")
        assert rc.returncode == 0 and "@@set" in (ws.base / f"out{i}").read_text(), said
        assert planted == "", f"core.fsmonitor outlived the launch (run {i + 1}): {said}"


def test_a_mark_that_hides_an_edit_from_git_does_not_outlive_the_session(ws):
    """The session edits a tracked file and marks it `--assume-unchanged` or `--skip-worktree`: the user's own
    `git status` and `git diff` then showed nothing, and `git commit -a` left the edit out (forty-fifth red team,
    F3; as outside, where the same commands leave the marks). The end clears the marks the session set on files that
    are there, and names them (hiddenedits.py); the user's own stay, and so does a skip-worktree mark on a file that
    is not there (what a sparse checkout sets: cleared, `commit -a` would delete the file)."""
    _repo(ws)
    for name in ("b.txt", "c.txt", "mine.txt", "gone.txt"):
        ws.write(name, f"{name}\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "more")
    ws.git("update-index", "--assume-unchanged", "mine.txt")  # the user's own
    ws.write("mine.txt", "the user's local change\n")
    res = ws.run(
        "--", "sh", "-c",
        "echo evil >> b.txt && git update-index --assume-unchanged b.txt && "
        "echo evil >> c.txt && git update-index --skip-worktree c.txt && "
        "rm gone.txt && git update-index --skip-worktree gone.txt && git status --porcelain",
    )  # fmt: skip
    assert res.rc == 0, res.err
    assert res.out == "", res.out  # inside, git shows none of it
    tags = {line[2:]: line[0] for line in _outside_git(ws, "ls-files", "-v").stdout.splitlines()}
    assert (tags["b.txt"], tags["c.txt"]) == ("H", "H"), tags
    assert (tags["mine.txt"], tags["gone.txt"]) == ("h", "S"), tags
    assert _outside_git(ws, "status", "--porcelain").stdout.splitlines() == [" M b.txt", " M c.txt"]
    said = [line for line in res.err.splitlines() if "b.txt" in line]
    assert len(said) == 1 and "c.txt" in said[0] and "mine.txt" not in said[0], res.err
    assert len(res.err.splitlines()) == 1, res.err  # nothing else: the session wrote the index, as git does


# The session's own write of the index: each entry named gets the stat data of the file as it is now (index versions
# 2 and 3), and the index its checksum anew; git then trusts the entry and never reads the file. With EXT=1 the entry
# also carries the on-disk extended bit, with no extended flag set (index version 3); MODE sets its mode (octal).
FORGE = r"""
import hashlib, os, struct, sys
data = open(".git/index", "rb").read()
assert data[:4] == b"DIRC" and struct.unpack(">I", data[4:8])[0] in (2, 3)
ext, off, out = os.environ.get("EXT") == "1", 12, bytearray(data[:12])
for _ in range(struct.unpack(">I", data[8:12])[0]):
    fields, oid, flags = list(struct.unpack(">10I", data[off : off + 40])), data[off + 40 : off + 60], struct.unpack(">H", data[off + 60 : off + 62])[0]
    extra = data[off + 62 : off + 64] if flags & 0x4000 else b""
    name = data[off + 62 + len(extra) : data.index(b"\0", off + 62 + len(extra))]
    off += (62 + len(extra) + len(name) + 8) & ~7
    if name.decode() in sys.argv[1:]:
        st = os.lstat(name)
        fields[:6] = (st.st_ctime_ns // 10**9, st.st_ctime_ns % 10**9, st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9,
                      st.st_dev & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF)
        fields[7:] = (st.st_uid, st.st_gid, st.st_size)
        if ext and not extra:
            flags, extra = flags | 0x4000, b"\0\0"
        if os.environ.get("MODE"):
            fields[6] = int(os.environ["MODE"], 8)
    head = struct.pack(">10I", *fields) + oid + struct.pack(">H", flags) + extra
    out += head + name + b"\0" * (((len(head) + len(name) + 8) & ~7) - len(head) - len(name))
if ext:
    out[4:8] = struct.pack(">I", 3)
out += data[off:-20]
open(".git/index", "wb").write(bytes(out) + hashlib.sha1(bytes(out)).digest())
"""


@pytest.mark.parametrize("trick", ["", "ext", "mode", "replace"])
def test_an_index_entry_given_the_stat_of_an_edit_does_not_hide_it_after_the_session(ws, trick):
    """The session edits a tracked file and writes the index itself, the entry given the edited file's stat: git
    trusts the stat, and the user's `git status`, `git diff` and `commit -a` saw nothing, with no mark to find (found
    while closing F3: the same hiding, by the index's bytes). The end gives such an entry no stat data (hiddenedits.py),
    and git reads the file again. Silent: nothing shows that would not show without the session's write. ext: the
    entry also carries git's extended bit with no extended flag, which a first version took for a flag to leave
    alone (forty-seventh red team, F1); mode: its mode is written 1100644, which git reads as a file's and a first
    version took for something else (F4); replace: the index written in place, then replaced as git replaces it,
    which a descriptor held on the launch's index file would read as what the index said then (a copy is kept)."""
    _repo(ws)
    ws.write("b.txt", "b\n")
    ws.git("add", "b.txt")
    ws.git("commit", "-qm", "b")
    then = " && cp .git/index .git/i2 && mv .git/i2 .git/index" if trick == "replace" else ""
    script = f'echo evil >> b.txt && sleep 1.1 && python3 -c "$FORGE" b.txt{then} && git status --porcelain -uno && echo done'
    env = {"FORGE": FORGE, "EXT": "1" if trick == "ext" else "", "MODE": "1100644" if trick == "mode" else ""}
    res = ws.run("--", "sh", "-c", script, env=env)
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)  # inside, git sees nothing: the forgery works
    assert _outside_git(ws, "status", "--porcelain", "-uno").stdout.splitlines() == [" M b.txt"]
    assert "+evil" in _outside_git(ws, "diff").stdout
    assert _outside_git(ws, "ls-files", "-v", "b.txt").stdout == "H b.txt\n"
    assert "b.txt" not in res.err and "index" not in res.err, res.err  # silent


def test_a_file_planted_before_the_session_and_swapped_in_with_its_directory_does_not_hide_an_edit(ws):
    """Forty-seventh red team, F2: a file written in an earlier session keeps its change time when the directory above
    it is renamed into place, so an entry forged with its stat recorded a change time from before the launch, which a
    first version took for git's own, not the session's. Session 1 plants src/deep/lib.py's replacement in an ignored
    directory; session 2 swaps the directories and forges the entry. Every entry below a directory the launch did not
    walk as it is now is looked at. (As a user the suite hands the files over before each launch, which gives them a
    new change time: the earlier session's file is then as new as the launch, and only root's run tells.)"""
    _repo(ws)
    ws.write(".gitignore", "build/\nevil.sh\n")
    ws.write("src/app.py", "print(1)\n")
    ws.write("src/deep/lib.py", "x = 1\n")
    ws.git("add", ".")
    ws.git("commit", "-qm", "src")
    plant = "mkdir -p build/plant && cp -pr src build/plant/ && echo 'print(666)' > build/plant/src/deep/lib.py"
    assert ws.run("--", "sh", "-c", plant).rc == 0
    time.sleep(1.5)  # the planted file's change time well before the next launch
    swap = 'mv src build/old && mv build/plant/src src && python3 -c "$FORGE" src/deep/lib.py && git status --porcelain'
    res = ws.run("--", "sh", "-c", swap, env={"FORGE": FORGE})
    assert res.rc == 0 and res.out == "", (res.out, res.err)  # inside, git sees nothing
    assert _outside_git(ws, "status", "--porcelain").stdout.splitlines() == [" M src/deep/lib.py"]
    assert "print(666)" in _outside_git(ws, "diff").stdout


def test_a_nested_index_the_end_cannot_read_leaves_the_projects_to_be_done(ws):
    """Forty-seventh red team, F3: a nested repository's index the session made unreadable to git (garbage) made the
    end give up before the project's own index: the session's mark there stayed. Now each work tree is done on its
    own, and the one that could not be read is named."""
    _repo(ws)
    lib = ws.repo / "lib"
    lib.mkdir()
    ws.git("init", "-q", cwd=lib)
    ws.write("lib/x.txt", "x\n")
    ws.git("add", ".", cwd=lib)
    ws.git("commit", "-qm", "lib", cwd=lib)
    ws.write("b.txt", "b\n")
    ws.git("add", "b.txt")
    ws.git("commit", "-qm", "b")
    script = "echo evil >> b.txt && git update-index --assume-unchanged b.txt && printf DIRCgarbage > lib/.git/index"
    res = ws.run("--", "sh", "-c", script)
    assert res.rc == 0, res.err
    assert _outside_git(ws, "status", "--porcelain", "-uno").stdout.splitlines() == [" M b.txt"]
    assert any("lib" in line and "could not look" in line for line in res.err.splitlines()), res.err


def test_an_index_entry_given_the_stat_of_your_own_edit_does_not_hide_it_after_the_session(ws):
    """Forty-seventh red team, F2's variant in one session: you edited b.txt before the launch and did not stage it;
    the session gives its entry the file's stat, and your `git status` no longer showed your edit (`commit -a` left
    it out). Its change time is from before the launch: what the index said then is what the end compares with. (As
    a user the suite hands the files over before each launch, which gives them a new change time: only root's run
    tells the old code from the new.)"""
    _repo(ws)
    ws.write("b.txt", "b\n")
    ws.git("add", "b.txt")
    ws.git("commit", "-qm", "b")
    ws.write("b.txt", "b\nyour fix\n")
    assert _outside_git(ws, "status", "--porcelain", "-uno").stdout.splitlines() == [" M b.txt"]
    time.sleep(1.1)
    res = ws.run("--", "sh", "-c", 'python3 -c "$FORGE" b.txt && git status --porcelain -uno', env={"FORGE": FORGE})
    assert res.rc == 0 and res.out == "", (res.out, res.err)  # inside, your edit is gone from git
    assert _outside_git(ws, "status", "--porcelain", "-uno").stdout.splitlines() == [" M b.txt"]
    assert "+your fix" in _outside_git(ws, "diff").stdout


# A split index's shared part rewritten in place: one entry given the file's stat data, or the assume-unchanged bit
# (ASSUME=1). The last 20 bytes stay: git checks only that they are the file's name, never the content's hash.
FORGE_SHARED = r"""
import glob, os, struct, sys
for idx in glob.glob(".git/sharedindex.*"):
    data = bytearray(open(idx, "rb").read())
    off = 12
    for _ in range(struct.unpack(">I", data[8:12])[0]):
        flags = struct.unpack(">H", data[off + 60 : off + 62])[0]
        head = 62 + (2 if flags & 0x4000 else 0)
        name = bytes(data[off + head : data.index(b"\0", off + head)])
        if name.decode() == sys.argv[1]:
            if os.environ.get("ASSUME") == "1":
                data[off + 60 : off + 62] = struct.pack(">H", flags | 0x8000)
            else:
                st = os.lstat(name)
                data[off : off + 24] = struct.pack(">6I", st.st_ctime_ns // 10**9, st.st_ctime_ns % 10**9,
                    st.st_mtime_ns // 10**9, st.st_mtime_ns % 10**9, st.st_dev & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF)
                data[off + 28 : off + 40] = struct.pack(">3I", st.st_uid, st.st_gid, st.st_size)
        off += (head + len(name) + 8) & ~7
    with open(idx, "r+b") as f:
        f.write(data)
"""


@pytest.mark.parametrize("assume", ["0", "1"])
def test_a_split_index_rewritten_in_place_does_not_hide_an_edit(ws, assume):
    """Forty-eighth red team, F1: with the split index (`core.splitIndex`, yours; or `update-index --split-index`, the
    session's), the entries live in `.git/sharedindex.*`, which the session rewrote in place: `.git/index` was not
    written, so the end looked at nothing, and the edit stayed hidden (given the file's stat, or the mark). Now a
    split index is read whole at every end. (As a user the suite's chown before the launch writes .git/index's change
    time, so only root's run tells the old code from the new.)"""
    ws.git("init", "-q")
    ws.git("config", "core.splitIndex", "true")
    for name in ("a.txt", "b.txt"):
        ws.write(name, f"{name}\n")
        os.utime(ws.repo / name, (time.time() - 86400, time.time() - 86400))  # not racy: kept in the shared part
    ws.git("add", ".")
    ws.git("commit", "-qm", "init")
    time.sleep(1.1)
    # an old modification time: the entry is not racily clean against .git/index, which was not written since
    edit = "echo evil >> b.txt && touch -d 2020-01-01 b.txt"
    # `git diff`, not `git status`: status writes .git/index, which the end would then look at anyway
    script = f'{edit} && python3 -c "$FORGE" b.txt && git diff --name-only && echo done'
    res = ws.run("--", "sh", "-c", script, env={"FORGE": FORGE_SHARED, "ASSUME": assume})
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)  # inside, git sees nothing: the forgery works
    assert _outside_git(ws, "status", "--porcelain", "-uno").stdout.splitlines() == [" M b.txt"], res.err
    assert "+evil" in _outside_git(ws, "diff").stdout


# A commit like HEAD whose tree is the index's (the session's staged edit in it), put in HEAD's place by a replace ref
COPY_OF_HEAD = 'tree=$(git write-tree) && copy=$(git cat-file commit HEAD | sed "1s/.*/tree $tree/" | git hash-object -t commit -w --stdin)'


@pytest.mark.parametrize("where", ["loose", "packed"])
def test_a_replace_ref_that_hides_a_staged_edit_does_not_outlive_the_session(ws, where):
    """Forty-eighth red team, F3: the session staged an edit and put a copy of HEAD whose tree holds it in HEAD's place
    (`git replace HEAD <copy>`): the user's `git status`, `git diff --cached` and `commit -a` showed nothing, and their
    next commit carried the edit. The end removes the replace refs the session added, and names them; the user's own
    (one from before the launch, loose or packed as the session left the refs) stay. packed: the session then ran
    `git pack-refs --all`, which moves every ref into .git/packed-refs."""
    _repo(ws)
    mine = _outside_git(ws, "hash-object", "-w", "--stdin").stdout.strip()  # an object of the user's, replaced
    blob = _outside_git(ws, "rev-parse", "HEAD:a.txt").stdout.strip()
    assert _outside_git(ws, "replace", blob, mine).returncode == 0
    pack = " && git pack-refs --all" if where == "packed" else ""
    script = f"echo evil >> a.txt && git add a.txt && {COPY_OF_HEAD} && git replace HEAD $copy{pack} && git status --porcelain -uno && echo done"
    res = ws.run("--", "sh", "-c", script)
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)  # inside, git shows nothing staged
    assert _outside_git(ws, "status", "--porcelain", "-uno").stdout.splitlines() == ["M  a.txt"]
    assert "+evil" in _outside_git(ws, "diff", "--cached").stdout
    assert _outside_git(ws, "replace", "-l").stdout.split() == [blob]  # the user's own stays
    said = [line for line in res.err.splitlines() if "replace" in line]
    head = _outside_git(ws, "rev-parse", "HEAD").stdout.strip()
    assert len(said) == 1 and f"refs/replace/{head}" in said[0] and blob not in said[0], res.err


@pytest.mark.parametrize("lock", ["packed-refs.lock", "refs/replace/$head.lock"])
def test_a_lock_file_the_session_left_does_not_keep_its_replace_ref(ws, lock):
    """Forty-ninth red team, F4: the session left `.git/packed-refs.lock` (or the lock of its replace ref) behind, and
    the end's delete failed on it (git waits a second for a lock, then gives up): the replace ref hiding the staged
    edit stayed. A lock file made during the session, still there once git gave up, is the session's (none of its
    processes is left): removed, and the delete done."""
    _repo(ws)
    script = (
        f"echo evil >> a.txt && git add a.txt && {COPY_OF_HEAD} && git replace HEAD $copy && head=$(git rev-parse HEAD)"
    )
    res = ws.run("--", "sh", "-c", f"{script} && touch .git/{lock} && echo done")
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    assert _outside_git(ws, "replace", "-l").stdout.split() == [], res.err
    assert _outside_git(ws, "status", "--porcelain", "-uno").stdout.splitlines() == ["M  a.txt"]
    assert not [p for p in (ws.repo / ".git").rglob("*.lock")], res.err
    said = [line for line in res.err.splitlines() if "replace" in line]
    assert len(said) == 1 and "removed the git replace refs" in said[0] and ".lock" in said[0], res.err


# In v.py as checked out with `ident`, the blob's id between `$Id: ` and ` $` becomes code of the same size
IDENT = r"""
import re
text = open("v.py").read()
code = re.sub(r"\$Id: [0-9a-f]{40} \$", lambda m: "$Id: " + '"; print(666); x = "'.ljust(40) + " $", text)
assert code != text
open("v.py", "w").write(code)
"""


@pytest.mark.parametrize("name", ["grafts", "attributes"])
def test_what_the_git_directory_info_files_add_does_not_outlive_the_session(ws, name):
    """Forty-eighth red team, beside F3: `.git/info/grafts` gives a commit other parents in the user's git, and
    `.git/info/attributes` attributes no `git status` shows (`ident`: a checkout writes the blob's id between `$Id:`
    and `$`, and git reads anything there as `$Id$`; an edit of the same size there, Python code here, is then seen
    nowhere). Each is put back as the launch found it (here: none), the session's moved aside, and named."""
    _repo(ws)
    ws.write("v.py", 'VERSION = "$Id$"\n')
    ws.git("add", "v.py")
    ws.git("commit", "-qm", "v")
    head = _outside_git(ws, "rev-parse", "HEAD").stdout.strip()
    text = {"grafts": f"{head}\n", "attributes": "v.py ident\n"}[name]
    edit = {"grafts": "true", "attributes": 'rm v.py && git checkout -- v.py && python3 -c "$IDENT"'}[name]
    script = f"mkdir -p .git/info && printf '{text}' > .git/info/{name} && {edit} && git status --porcelain -uno"
    res = ws.run("--", "sh", "-c", script + " && echo done", env={"IDENT": IDENT})
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)  # inside, git shows nothing
    assert not (ws.repo / ".git" / "info" / name).exists()
    assert [p.name for p in (ws.repo / ".git" / "info").iterdir() if p.name.startswith(f"{name}.ai-sandbox-")]
    said = [line for line in res.err.splitlines() if f"info/{name}" in line and line.startswith("ai-sandbox:")]
    assert len(said) == 1, res.err
    if name == "attributes":
        assert _outside_git(ws, "status", "--porcelain", "-uno").stdout.splitlines() == [" M v.py"]


@pytest.mark.parametrize("link", ["refs", "logs"])
def test_a_link_on_the_way_to_the_replace_refs_never_leads_the_end_into_another_repository(ws, link):
    """Forty-ninth red team, F1: the session linked `.git/refs/replace` to another repository's `.git` (which it
    cannot write) and named its objects in `objects/info/alternates`: git listed that repository's branches and tags
    as replace refs, and the end deleted them all through the link, then its emptied `refs/`. logs: a real replace
    ref, its log directory linked to the other repository's branch logs, whose `main` log went with it. Now a link
    on the way is named, and nothing is deleted."""
    _repo(ws)
    victim = ws.home / "victim"
    victim.mkdir()
    ws.git("init", "-q", "-b", "main", cwd=victim)
    ws.git("commit", "-q", "--allow-empty", "-m", "theirs", cwd=victim)
    ws.git("branch", "keep", cwd=victim)
    ws.git("tag", "v1", cwd=victim)
    if ws.user:
        chown_tree(victim, ws.user)
    plant = {
        "refs": f"echo {victim}/.git/objects > .git/objects/info/alternates && ln -s {victim}/.git .git/refs/replace",
        "logs": f"mkdir -p .git/logs/refs && ln -s {victim}/.git/logs/refs/heads .git/logs/refs/replace && "
        "mkdir -p .git/refs/replace && git rev-parse HEAD > .git/refs/replace/main",
    }[link]
    res = ws.run("--", "sh", "-c", plant + " && echo done")
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    refs = subprocess.run(
        ["git", "-c", "safe.directory=*", "-C", str(victim), "for-each-ref", "--format=%(refname)"],
        capture_output=True,
        text=True,
    )
    assert refs.stdout.split() == ["refs/heads/keep", "refs/heads/main", "refs/tags/v1"], refs
    assert (victim / ".git" / "logs" / "refs" / "heads" / "main").is_file()
    said = [line for line in res.err.splitlines() if "did not remove the git replace refs" in line]
    assert len(said) == 1 and "is a link" in said[0], res.err


# Each commit-graph file named: HEAD's tree in it becomes the index's (the session's staged edit), its checksum made
# anew. git takes a commit's tree from the graph without reading the commit (forty-ninth red team, F2).
FORGE_GRAPH = r"""
import hashlib, os, subprocess, sys
git = lambda *a: subprocess.run(["git", *a], capture_output=True, text=True, check=True).stdout.strip()
old, new = bytes.fromhex(git("rev-parse", "HEAD^{tree}")), bytes.fromhex(git("write-tree"))
for path in sys.argv[1:]:
    data = bytearray(open(path, "rb").read())
    i = data.find(old)
    assert i > 0, path
    data[i : i + len(old)] = new
    data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
    os.chmod(path, 0o644)
    open(path, "wb").write(data)
"""
GRAPH = ".git/objects/info/commit-graph"
GRAPHS = {  # how the session writes the graph it forges, and where it lies
    "file": f'git commit-graph write --reachable && python3 -c "$FORGE_GRAPH" {GRAPH}',
    "chain": 'git commit-graph write --reachable --split && python3 -c "$FORGE_GRAPH" .git/objects/info/commit-graphs/*.graph',
    # in an object directory of its own, which alternates names: git reads the first graph it finds
    "alternates": f"git commit-graph write --reachable && mkdir -p .o/info && mv {GRAPH} .o/info/ && "
    'echo "$PWD/.o" > .git/objects/info/alternates && python3 -c "$FORGE_GRAPH" .o/info/commit-graph',
    # commit-graphs/ a link to a directory of the session's in the git directory
    "link": "mkdir .git/g && ln -s ../../g .git/objects/info/commit-graphs && git commit-graph write --reachable "
    '--split && python3 -c "$FORGE_GRAPH" .git/g/*.graph',
}


@pytest.mark.parametrize("how", list(GRAPHS))
def test_a_forged_commit_graph_does_not_hide_a_staged_edit_after_the_session(ws, how):
    """Forty-ninth red team, F2: a commit-graph (git's cache of the commits, which it trusts without reading them)
    naming the index's tree as HEAD's hid the session's staged edit from the user's `git status` and `git diff HEAD`,
    and their `commit -a` carried it; so did one in an object directory the session named in
    `objects/info/alternates`. The end removes the graph files that changed during the session, and says so; the
    alternates file is put back as the launch found it."""
    _repo(ws)
    script = f"echo evil >> a.txt && git add a.txt && {GRAPHS[how]} && git status --porcelain -uno && echo done"
    res = ws.run("--", "sh", "-c", script, env={"FORGE_GRAPH": FORGE_GRAPH})
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)  # inside, git shows nothing staged
    assert _outside_git(ws, "status", "--porcelain", "-uno").stdout.splitlines() == ["M  a.txt"], res.err
    assert "+evil" in _outside_git(ws, "diff", "HEAD").stdout
    said = [line for line in res.err.splitlines() if ("commit-graph" if how != "alternates" else "alternates") in line]
    assert len(said) == 1, res.err
    assert _outside_git(ws, "commit-graph", "verify").returncode == 0  # what is left, if anything, is git's own


def test_a_commit_graph_behind_a_link_the_session_made_is_named_not_followed(ws):
    """The same forgery with `.git/objects/info` swapped for a link to a directory of the session's: the end never
    removes anything through a link (it may lead into another repository: forty-ninth red team, F1), and names it."""
    _repo(ws)
    script = (
        "echo evil >> a.txt && git add a.txt && mv .git/objects/info .git/objects/i2 && ln -s i2 .git/objects/info && "
        f"{GRAPHS['file']} && git status --porcelain -uno && echo done"
    )
    res = ws.run("--", "sh", "-c", script, env={"FORGE_GRAPH": FORGE_GRAPH})
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    assert (ws.repo / ".git" / "objects" / "i2" / "commit-graph").is_file()
    said = [line for line in res.err.splitlines() if "commit-graph" in line]
    assert len(said) == 1 and "is a link" in said[0] and "objects/info" in said[0], res.err


@pytest.mark.parametrize(
    "where", [".git/objects/info/alternates", ".git/info/grafts", ".git/info/attributes", ".git/commondir"]
)
def test_a_fifo_the_session_leaves_at_a_file_git_reads_is_moved_aside(ws, where):
    """Fiftieth red team, F5: a FIFO the session left at `objects/info/alternates` (a file git opens and reads) hung
    the user's next git, and nothing was said: it read as no file, as at the launch. It is moved aside, named."""
    _repo(ws)
    res = ws.run("--", "sh", "-c", f"rm -f {where} && mkfifo {where} && echo done")
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    assert not os.path.lexists(ws.repo / where)
    proc = subprocess.run(
        ["timeout", "20", "git", "-c", "safe.directory=*", "status"], cwd=ws.repo, capture_output=True
    )
    assert proc.returncode == 0, proc.stderr
    assert where.split("/")[-1] in res.err and "removed: the launch found none" in res.err, res.err


@pytest.mark.parametrize(
    "key, value",
    [
        ("submodule.lib.ignore", "all"),  # hid a submodule commit from status and diff; commit -a recorded it
        ("remote.origin.push", "+refs/ai/x:refs/heads/deploy"),  # the user's plain push published a hidden ref
        ("remote.origin.mirror", "true"),
    ],
)
def test_a_setting_that_hides_a_change_or_pushes_a_hidden_ref_does_not_outlive_the_session(ws, key, value):
    """Fifty-fourth red team, F1 and F2: keys git allows a session to add with any value (they were safe: git's own
    commands write them) that hide a change from `git status` or push what the user never saw. Removed, named."""
    _repo(ws)
    res = ws.run("--", "sh", "-c", f"git config {key} '{value}' && echo done")
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    assert _config(ws, "--get-all", key) == ""
    assert key in res.err, res.err


def test_a_worktree_the_session_prunes_leaves_no_warning(ws):
    """Fifty-fifth red team, F2: `git worktree prune` (or `remove`) inside a session removed the worktree's
    directory in .git/worktrees, and the end said it could not put its commondir back: a false alarm."""
    _repo(ws)
    wt = ws.base / "wt"
    ws.git("worktree", "add", "-q", str(wt))
    subprocess.run(["rm", "-rf", str(wt)], check=True)
    res = ws.run("--", "sh", "-c", "git worktree prune && echo done")
    assert res.rc == 0 and res.out == "done\n", (res.out, res.err)
    assert not (ws.repo / ".git" / "worktrees" / "wt").exists()
    assert "could not put back" not in res.err and "commondir" not in res.err, res.err
