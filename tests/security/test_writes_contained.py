"""What an agent steered by what it reads cannot plant: nothing that runs later outside the sandbox (issue 27's
table), on the real sandbox, as root and as a user, with the default config (write containment is on unless
the user's config says `confine_writes = false`: docs/writes.md). Each write must fail inside, and nothing may
reach the host; each write the work needs must reach it.

The paths probed are in the suite's own home (HOME), the project, its git directory, and as root a name of the
suite's own in /etc: a write there would be a write to /etc/ld.so.preload as well.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from tests.conftest import (
    BACKENDS,  # noqa: F401  (the module runs once per backend: conftest)
    Result,
    Workspace,
    token,
)

pytestmark = pytest.mark.sandbox

# what runs later outside when the user (their shell, git, their login, ssh, their editor) uses it
PLANTED = {
    "bashrc": "~/.bashrc",
    "profile": "~/.profile",
    "bash_profile (new)": "~/.bash_profile",
    "local bin": "~/.local/bin/git",
    "gitconfig": "~/.gitconfig",
    "autostart": "~/.config/autostart/x.desktop",
    "systemd user unit": "~/.config/systemd/user/x.service",
    "ssh config": "~/.ssh/config",
    "authorized_keys": "~/.ssh/authorized_keys",
    "home": "~/x",
    "git hook": ".git/hooks/pre-commit",
    "vscode tasks": ".vscode/tasks.json",
    "idea": ".idea/workspace.xml",
}


def _confine(ws: Workspace, more: str = "") -> None:
    """The user config holds only `more`: containment is the default."""
    ws.config_file.write_text(more)


def _setup(ws: Workspace) -> None:
    _confine(ws)
    for d in (".local/bin", ".config/autostart", ".config/systemd/user", ".ssh"):
        (ws.home / d).mkdir(parents=True, exist_ok=True)
    for f in (".bashrc", ".profile", ".gitconfig", ".ssh/config"):
        (ws.home / f).write_text("# the user's\n")
    (ws.repo / ".vscode").mkdir(exist_ok=True)
    (ws.repo / ".idea").mkdir(exist_ok=True)


def _host(ws: Workspace, path: str) -> Path:
    return ws.home / path[2:] if path.startswith("~/") else ws.repo / path


def _probe(ws: Workspace, paths: list[str], mark: str) -> Result:
    script = "; ".join(
        f'if (echo {mark} >> "{p.replace("~/", "$HOME/", 1)}") 2>/dev/null; then echo "@@ok {p}"; else echo "@@no {p}"; fi'
        for p in paths
    )
    res = ws.run("--", "sh", "-c", script + "; true")
    print(res.out, res.err)
    assert res.rc == 0, res.err
    return res


def test_nothing_that_runs_later_outside_can_be_planted(ws, firejail):
    _setup(ws)
    mark = token("PLANTED")
    paths = list(PLANTED.values())
    etc = f"/etc/ai-sandbox-test-{mark}"
    if ws.identity == "root":
        paths += [etc, "/root/" + mark, "/usr/local/" + mark, "/var/lib/" + mark, "/opt/" + mark]
    res = _probe(ws, paths, mark)
    written = [p for p in paths if f"@@ok {p}" in res.out]
    assert not written, f"written inside: {written}"
    for p in paths:
        host = Path(p) if p.startswith("/") else _host(ws, p)
        assert not host.exists() or mark not in host.read_text(errors="replace"), f"{p} reached the host"


def test_the_places_the_work_needs_stay_writable(ws, firejail):
    _confine(ws)
    mark = token("WORK")
    out = ws.base / "elsewhere"  # a directory of the user's in /tmp, outside the home
    out.mkdir()
    paths = ["src.txt", ".git/info/exclude", "~/.cache/x", f"/tmp/ais-writes-{mark}", f"{out}/y"]
    res = _probe(ws, paths, mark)
    assert all(f"@@ok {p}" in res.out for p in paths), res.out
    assert mark in (ws.repo / "src.txt").read_text()
    assert mark in (ws.home / ".cache" / "x").read_text()
    assert mark in (out / "y").read_text()  # the /tmp entry the launch keeps (the project's) is the host's
    # the rest of /tmp is the sandbox's own (docs/network.md: the user's servers): written, and gone at the end
    assert not os.path.exists(f"/tmp/ais-writes-{mark}")
    # git's ordinary writes: config (remote add, user.email), a commit, a branch
    script = "git config user.email me@example.invalid && git config user.name me && git remote add o https://example.invalid/o.git && git checkout -qb b && " \
        "git commit -q --allow-empty -m m && echo @@git-ok"  # fmt: skip
    res = ws.run("--", "sh", "-c", script)
    assert "@@git-ok" in res.out, res.err
    assert ws.git("config", "remote.o.url").strip() == "https://example.invalid/o.git"


def test_the_protected_places_cannot_be_renamed_away(ws, firejail):
    """A read-only mount moves with its parent: `mv .git .git-old` and a fresh .git/hooks would have planted a hook
    (measured). The git directory is a mount point: EBUSY. The home too cannot be renamed from inside."""
    mark = token("HOOK")
    script = (
        f"mv .git .git-old 2>/dev/null && mkdir -p .git/hooks && echo {mark} > .git/hooks/pre-commit; "
        f"mv .vscode .vs2 2>/dev/null && mkdir .vscode && echo {mark} > .vscode/tasks.json; "
        f"mv $HOME $HOME.old 2>/dev/null; true"
    )
    _setup(ws)
    res = ws.run("--", "sh", "-c", script)
    assert res.rc == 0, res.err
    assert (ws.repo / ".git" / "HEAD").exists() and not (ws.repo / ".git-old").exists()
    assert not (ws.repo / ".git" / "hooks" / "pre-commit").exists()
    assert not (ws.repo / ".vscode" / "tasks.json").exists() and not (ws.repo / ".vs2").exists()
    assert ws.home.is_dir() and not Path(f"{ws.home}.old").exists()


def test_the_agents_own_state_and_the_users_writable_reach_the_host(ws, firejail):
    """`ai-sandbox claude` (a stand-in `claude` on PATH) writes its profile's state: ~/.claude/ (made by the launch
    when missing) and ~/.claude.json in place; `writable` in the user config adds a place."""
    mark = token("STATE")
    (ws.home / ".claude.json").write_text("{}\n")
    extra = ws.home / "extra"
    extra.mkdir()
    _confine(ws, 'writable = ["~/extra"]\n')
    bindir = ws.base / "bin"
    bindir.mkdir()
    agent = bindir / "claude"
    agent.write_text(
        f"#!/bin/sh\necho {mark} > $HOME/.claude/x && echo {mark} > $HOME/.claude.json && echo {mark} > "
        f"$HOME/extra/y && echo {mark} > $HOME/.codex-x; echo @@done\n"
    )
    agent.chmod(0o755)
    res = ws.run("claude", env={"PATH": f"{bindir}:{os.environ['PATH']}"})
    print(res.out, res.err)
    assert "@@done" in res.out, res.err
    assert mark in (ws.home / ".claude" / "x").read_text()
    assert mark in (ws.home / ".claude.json").read_text()
    assert mark in (extra / "y").read_text()
    assert not (ws.home / ".codex-x").exists()  # the home beside them stays read-only


# what Claude Code does to save ~/.claude.json (measured, 2.1.197): the link resolved, a lock directory and a
# temporary file beside the target, renamed over it
_SAVE_BY_RENAME = """#!/usr/bin/env python3
import json, os, sys
path = os.path.realpath(os.path.expanduser("~/.claude.json"))
data = json.load(open(path)) if os.path.exists(path) else {}
data["saved"] = data.get("saved", 0) + 1
try:
    os.mkdir(path + ".lock")
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.rename(tmp, path)
    os.rmdir(path + ".lock")
    print("@@saved")
except OSError as e:
    print(f"@@failed {e}")
"""


@pytest.mark.parametrize("before", ["a file", "none"])
def test_an_agent_file_saved_by_rename_in_the_read_only_home_is_saved(ws, firejail, before):
    """Claude Code saves ~/.claude.json by rename in the home, read-only inside: every save failed, silently (its
    lock's mkdir: EROFS). The launch keeps the file in ~/.claude/ with a link in its place (profile `[moved]`): the
    agent saves through it, the user's content is kept, and outside the link leads to the same file."""
    _confine(ws)
    if before == "a file":
        (ws.home / ".claude.json").write_text('{"mine": 1}\n')
    bindir = ws.base / "bin"
    bindir.mkdir()
    (bindir / "claude").write_text(_SAVE_BY_RENAME)
    (bindir / "claude").chmod(0o755)
    path = {"PATH": f"{bindir}:{os.environ['PATH']}"}
    res = ws.run("claude", env=path)
    assert "@@saved" in res.out, res.out + res.err
    link = ws.home / ".claude.json"
    assert link.is_symlink() and os.readlink(link) == ".claude/.claude.json"
    data = json.loads(link.read_text())
    assert data == ({"mine": 1, "saved": 1} if before == "a file" else {"saved": 1})
    moved = [ln for ln in res.err.splitlines() if "moved ~/.claude.json to ~/.claude/.claude.json" in ln]
    assert len(moved) == (1 if before == "a file" else 0), res.err
    if moved:
        assert moved[0] in (Path(__file__).parents[2] / "docs" / "writes.md").read_text(), "writes.md shows another"
    again = ws.run("claude", env=path)
    assert "@@saved" in again.out and "moved" not in again.err, again.out + again.err
    assert json.loads(link.read_text())["saved"] == 2


def test_a_kept_place_already_taken_refuses_in_one_line(ws, firejail):
    _confine(ws)
    (ws.home / ".claude.json").write_text('{"mine": 1}\n')
    (ws.home / ".claude").mkdir()
    (ws.home / ".claude" / ".claude.json").write_text('{"other": 1}\n')
    res = ws.run("claude", env={"PATH": f"{ws.base}:{os.environ['PATH']}"})
    assert res.rc != 0 and "~/.claude/.claude.json exists already" in res.err, res.err
    assert len(res.err.strip().splitlines()) == 1
    assert json.loads((ws.home / ".claude.json").read_text()) == {"mine": 1}  # nothing moved


def test_explain_lists_each_place_with_its_origin_and_the_project_cannot_widen(ws, firejail):
    _confine(ws, 'writable = ["~/extra"]\n')
    doc = json.loads(ws.run("explain", "--json").out)
    places = {p["path"]: (p["writes"], p["origin"]) for p in doc["writes"]["places"]}
    assert doc["writes"]["confined"] is True
    assert places[str(ws.home)] == ("refused", "built-in: your home")
    assert places.get(str(ws.repo), ("allowed", ""))[0] == "allowed"  # firejail, a user: no rule needed there
    assert places[str(ws.repo / ".git" / "hooks")][0] == "refused"
    assert places[str(ws.home / "extra")][0] == "allowed" and "user config" in places[str(ws.home / "extra")][1]
    ws.write(".ai-sandbox.toml", 'writable = ["~"]\n')
    res = ws.run("--", "true")
    assert res.rc != 0 and "may be set only in your own config" in res.err, res.err
    assert len(res.err.strip().splitlines()) == 1


def test_on_by_default_and_off_only_when_the_user_says_so(ws, firejail):
    assert not ws.config_file.exists()  # no user config at all: the defaults
    mark = token("ON")
    res = _probe(ws, ["~/x"], mark)
    assert "@@no ~/x" in res.out
    assert not (ws.home / "x").exists()
    assert "writes are not confined" not in ws.run("--dry-run", "--", "true").out
    ws.config_file.write_text("confine_writes = false\n")
    mark = token("OFF")
    res = _probe(ws, ["~/x"], mark)
    assert "@@ok ~/x" in res.out
    assert mark in (ws.home / "x").read_text()
    res = ws.run("--dry-run", "--", "true")
    assert "writes are not confined (your config says confine_writes = false)" in res.out
    doctor = ws.run("doctor")
    assert "! writes: not confined (confine_writes = false)" in doctor.out, doctor.out
    assert stat.S_ISREG((ws.home / "x").stat().st_mode)


def test_a_place_firejail_cannot_name_refuses_in_one_line(ws, firejail):
    """firejail reads `*?[]` in a rule as a glob (the rule would reach the siblings it matches): a project there
    cannot be confined exactly, and the launch says so instead of running with less. bwrap names it exactly."""
    _confine(ws)
    odd = ws.base / "star*dir"
    odd.mkdir()
    ws.git("init", "-q", str(odd))
    res = ws.run("--", "sh", "-c", "echo @@ran; echo x > ~/x", cwd=odd)
    if ws.backend == "bwrap":
        assert res.rc != 0 and "@@ran" in res.out and not (ws.home / "x").exists(), res.err  # confined
        return
    assert res.rc == 65 and "@@ran" not in res.out, res.err
    assert len(res.err.strip().splitlines()) == 1 and "cannot confine writes under firejail" in res.err


def test_a_submodules_hooks_are_read_only(ws, firejail):
    """`git -C lib commit` runs `.git/modules/lib/hooks/*`: the submodule's hooks are protected like the project's."""
    _confine(ws)
    lib = ws.base / "libsrc"
    ws.git("init", "-q", str(lib))
    ws.git("commit", "-q", "--allow-empty", "-m", "l", cwd=lib)
    ws.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(lib), "lib")
    hooks = ws.repo / ".git" / "modules" / "lib" / "hooks"
    assert hooks.is_dir()
    mark = token("SUBHOOK")
    res = _probe(ws, [".git/modules/lib/hooks/pre-commit", ".git/modules/lib/description"], mark)
    assert "@@no .git/modules/lib/hooks/pre-commit" in res.out and "@@ok .git/modules/lib/description" in res.out
    assert not (hooks / "pre-commit").exists()


@pytest.mark.parametrize("how", ["carriage-return", "link"])
def test_a_git_file_the_session_rewrites_never_opens_the_home_to_the_next_launch(ws, firejail, how):
    """Twenty-first red team: in a linked worktree the session wrote `gitdir: <real>\\r` into `.git` and a link
    `<real>\\r` -> $HOME beside the real directory. git strips the \\r (nothing changes for it); the next launch took
    the link's target for the project's git directory: the whole home writable. A git directory is writable only
    where it is one (HEAD, objects, refs), never a home nor a directory holding one."""
    _confine(ws)
    wt = ws.base / "wt"
    ws.git("commit", "-q", "--allow-empty", "-m", "i")
    ws.git("worktree", "add", "-q", str(wt))
    real = ws.git("rev-parse", "--absolute-git-dir", cwd=wt).strip()
    plant = {
        "carriage-return": f'ln -s "$HOME" "{real}$(printf "\\r")" && printf "gitdir: %s\\r\\n" "{real}" > .git',
        "link": f'ln -s "$HOME" "{real}-home" && printf "gitdir: %s\\n" "{real}-home" > .git',
    }[how]
    res = ws.run("--", "sh", "-c", f"{plant} && echo @@planted", cwd=wt)
    assert "@@planted" in res.out, res.err
    mark = token("OPENED")
    res = ws.run("--", "sh", "-c", f"echo {mark} > ~/x; echo {mark} > ~/.bashrc; true", cwd=wt)
    print(res.out, res.err)
    bashrc = ws.home / ".bashrc"
    assert not (ws.home / "x").exists() and not (bashrc.exists() and mark in bashrc.read_text(errors="replace"))


@pytest.mark.parametrize("link", ["~/.cache/claude", "~/.npm"])
def test_a_link_a_session_planted_never_opens_where_it_leads(ws, firejail, link):
    """A place of the profile or the caches replaced by a link to ~/.local/bin (from inside ~/.cache, writable
    while confined; or by a session with confine_writes off): the next confined launch must not bind where it
    leads."""
    bindir = ws.base / "bin"
    bindir.mkdir()
    (bindir / "npm").write_text("#!/bin/sh\n")
    (bindir / "npm").chmod(0o755)
    (ws.home / ".local" / "bin").mkdir(parents=True)
    target = link.replace("~", "$HOME")
    if link == "~/.npm":  # straight in the home: a session with containment off plants it
        ws.config_file.write_text("confine_writes = false\n")
    ws.run("--", "sh", "-c", f'mkdir -p $HOME/.cache && rm -rf "{target}" && ln -s "$HOME/.local/bin" "{target}"')
    assert (ws.home / link[2:]).is_symlink()
    _confine(ws)
    mark = token("LINKED")
    agent = bindir / "claude"
    agent.write_text(f"#!/bin/sh\necho {mark} > {target}/git; true\n")
    agent.chmod(0o755)
    res = ws.run("claude", env={"PATH": f"{bindir}:{os.environ['PATH']}"})
    print(res.out, res.err)
    assert not (ws.home / ".local" / "bin" / "git").exists()


def test_a_nested_repositorys_own_hooks_are_read_only(ws, firejail):
    """Twenty-seventh red team, F2: a repository with its `.git` directory inside the project (a nested clone, or a
    submodule added from an existing repository: git keeps its `.git` there) had writable hooks, which the user's
    `git commit` in it ran outside."""
    lib = ws.repo / "lib"
    ws.git("init", "-q", str(lib))
    ws.git("commit", "-q", "--allow-empty", "-m", "l", cwd=lib)
    hooks = lib / ".git" / "hooks"
    assert hooks.is_dir()
    res = _probe(ws, ["lib/.git/hooks/pre-commit", "lib/work.txt"], token("NESTED"))
    assert "@@no lib/.git/hooks/pre-commit" in res.out and "@@ok lib/work.txt" in res.out
    assert not (hooks / "pre-commit").exists()
    res = ws.run("--", "sh", "-c", "mv lib/.git lib/.git-old && mkdir -p lib/.git/hooks; echo @@rc=$?")
    assert "@@rc=0" not in res.out and (lib / ".git" / "HEAD").exists()  # the directory above is a mount point


@pytest.mark.parametrize("where", [".git", ".git/hooks", ".vscode"])
def test_a_protected_place_that_is_a_link_refuses_in_one_line(ws, firejail, where):
    """Twenty-seventh red team, F3 and F4: where the project's `.git`, its hooks or `.vscode` is a link, the
    protection went to the link's target, and the session replaced the link itself (writable: it lies in the
    project or the git directory) with a directory of its own, or repointed `.git` at a git directory it made, whose
    hooks and fsmonitor the user's git then ran. bwrap also failed with its own error on a link leading outside.
    The launch refuses in one line, naming the link."""
    real = ws.base / "elsewhere"
    place = ws.repo / where
    if where == ".vscode":
        real.mkdir()
    else:
        (ws.repo / where).rename(real)
    place.symlink_to(real)
    if where == ".git":
        assert ws.git("rev-parse", "--git-dir").strip()  # git itself follows the link
    marker = ws.base / "ran"
    res = ws.run("--", "touch", str(marker))
    assert res.rc == 65, res.out + res.err
    assert len(res.err.strip().splitlines()) == 1 and f"{place} is a link" in res.err, res.err
    assert not marker.exists()
    ws.config_file.write_text("confine_writes = false\n")  # what the line offers, with the rest of its defence
    assert ws.run("--", "touch", str(marker)).rc == 0


@pytest.mark.parametrize("how", ["gitdir-file", "link"])
def test_a_nested_repository_whose_git_directory_lies_elsewhere_in_the_project(ws, firejail, how):
    """Twenty-eighth red team: a nested repository whose `.git` is a `gitdir:` file (git init --separate-git-dir)
    or a link, its git directory elsewhere in the project: its hooks were writable. The git directory a `gitdir:`
    file names gets read-only hooks; a `.git` link refuses the launch (the session could replace the link)."""
    store = ws.repo / "store" / "sub.git"
    sub = ws.repo / "sub"
    if how == "gitdir-file":
        store.parent.mkdir()
        ws.git("init", "-q", f"--separate-git-dir={store}", str(sub))
    else:
        ws.git("init", "-q", str(sub))
        (sub / ".git").rename(store.parent)
        (sub / ".git").symlink_to("../store")
        store = store.parent
    assert (store / "hooks").is_dir()
    res = ws.run("--", "sh", "-c", f"echo x > {store}/hooks/pre-commit; echo @@rc=$?")
    if how == "link":
        assert res.rc == 65 and f"{sub}/.git is a link" in res.err, res.out + res.err
        assert len(res.err.strip().splitlines()) == 1
    else:
        assert "@@rc=0" not in res.out, res.out + res.err
    assert not (store / "hooks" / "pre-commit").exists()
