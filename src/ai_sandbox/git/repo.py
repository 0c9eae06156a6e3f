"""Which repository a directory is in, and its other checkouts (linked worktrees), nested clones and submodules."""

from __future__ import annotations

import os

from ai_sandbox import prefetch, spawn
from ai_sandbox.errors import PolicyError
from ai_sandbox.fs import below, inside
from ai_sandbox.git.run import _git_error, _run, _split_z, _timeout, git_dir_of
from ai_sandbox.gitcommand import QUICK, REPO_VARIABLES, WHERE, argv, hardened
from ai_sandbox.records import value


@value
class Repo:
    root: str  # absolute work-tree root
    common_dir: str  # absolute git common dir (shared by linked worktrees)


_PATH_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE")


def find_repo(cwd: str) -> Repo | None:
    """The work tree holding cwd, or None when cwd is in no git repository at all."""
    set_ = [name for name in REPO_VARIABLES if name in os.environ]
    if set_:
        return _find_repo_with(cwd, set_)
    proc = prefetch.answered(argv(WHERE, cwd), hardened())  # asked as the command started (prefetch.py)
    if isinstance(proc, spawn.TimedOut):
        raise _timeout(WHERE, cwd, QUICK)
    if proc is None:
        proc = _run(WHERE, cwd, timeout=QUICK)
    if proc.returncode != 0:
        if b"not a git repository" in proc.stderr:
            return None
        raise _where_error(cwd, proc.stderr)
    return _repo_of(cwd, proc.stdout)


def _where_error(cwd: str, stderr: bytes) -> PolicyError:
    err = _git_error(["rev-parse"], cwd, stderr)
    if b"work tree" in stderr:
        err.hint = "run ai-sandbox from inside the project's work tree (not from .git or a bare repository)"
    return err


def _repo_of(cwd: str, stdout: bytes) -> Repo:
    lines = os.fsdecode(stdout).split("\n")
    if len(lines) != 3 or lines[2] != "":
        raise PolicyError(f"cannot read git's answer for {cwd}", "a path with a newline in it is not supported")
    root, common = lines[0], lines[1]
    real = os.path.realpath(cwd)
    if not inside(real, os.path.realpath(root)):
        raise PolicyError(
            f"git says the work tree of {cwd} is {root}, which does not contain it",
            "check `git config core.worktree` (or GIT_WORK_TREE): ai-sandbox will not guess the project",
        )
    return Repo(root=root, common_dir=os.path.normpath(os.path.join(cwd, common)))


def _find_repo_with(cwd: str, set_: list[str]) -> Repo | None:
    """The caller set variables that redirect git (GIT_DIR, GIT_WORK_TREE, …): the policy is computed only
    when git, with them, uses the very repository, work tree and index it finds here without them. Anything
    else — a GIT_DIR that fails, another repository, a work tree that is not this one — refuses: the rules
    would be read from one tree while the agent's files are another (one more git call, only in this case)."""
    named = ", ".join(f"{n}={os.environ[n]}" for n in set_)
    hint = f"unset {' '.join(set_)} before starting ai-sandbox (the agent inherits them), run it in the project"
    ask = [*WHERE, "--absolute-git-dir", "--git-path", "index"]
    proc = _run(ask, cwd)
    plain = _run(ask, cwd, env={k: v for k, v in os.environ.items() if k not in REPO_VARIABLES})
    if plain.returncode != 0 and b"not a git repository" not in plain.stderr:
        raise _where_error(cwd, plain.stderr)
    without = _answer(cwd, plain.stdout) if plain.returncode == 0 else None
    if proc.returncode != 0:
        if without is None and b"not a git repository" in proc.stderr and not set(set_) & set(_PATH_VARIABLES):
            return None  # e.g. GIT_CEILING_DIRECTORIES in a shell profile, outside any repository: no repo either way
        first = next((ln for ln in os.fsdecode(proc.stderr).splitlines() if ln.strip()), "no message")
        raise PolicyError(f"git fails in {cwd} with {named}: {first.removeprefix('fatal: ')}", hint)
    with_vars = _answer(cwd, proc.stdout)
    if without is None:
        raise PolicyError(f"{named} makes git use the work tree {with_vars[0]}, where it finds no repository", hint)
    for i, label in ((0, "work tree"), (2, "git directory"), (3, "index"), (1, "common git directory")):
        if with_vars[i] != without[i]:
            raise PolicyError(
                f"{named} makes git use the {label} {with_vars[i]}, not {without[i]} of the repository here",
                hint,
            )
    relative = [n for n in _PATH_VARIABLES if n in os.environ and not os.path.isabs(os.environ[n])]
    if relative and with_vars[0] != os.path.realpath(cwd):
        raise PolicyError(
            f"{', '.join(relative)} is a relative path, which names another place from the project root "
            f"{with_vars[0]} (where ai-sandbox asks git) than from {cwd}",
            f"make it absolute, or {hint}",
        )
    return _repo_of(cwd, b"\n".join(proc.stdout.split(b"\n")[:2]) + b"\n")


def _answer(cwd: str, stdout: bytes) -> tuple[str, ...]:
    """(work tree, git dir, common dir, index) as real absolute paths, to compare two answers of git."""
    lines = os.fsdecode(stdout).split("\n")
    if len(lines) != 5 or lines[4] != "":
        raise PolicyError(f"cannot read git's answer for {cwd}", "a path with a newline in it is not supported")
    return tuple(os.path.realpath(os.path.join(cwd, p)) for p in lines[:4])


def nested_repo(root: str, rel: str) -> Repo | None:
    """The repository checked out at root/rel (a submodule or an untracked nested clone), if any."""
    path = os.path.join(root, rel)
    if not os.path.exists(os.path.join(path, ".git")):
        return None
    repo = find_repo(path)
    if repo is None or os.path.realpath(repo.root) != os.path.realpath(path):
        return None
    return repo


def other_checkouts(repo: Repo) -> list[Repo]:
    """The repository's other work trees (`git worktree list` names them all): the main one when repo is a linked
    worktree, and every linked one but repo. Read from the common git directory, as git does: each
    `worktrees/<id>/gitdir` names a checkout's `.git` file, which must name that directory back (one a user
    deleted, or that another repository claims, is skipped: git itself calls it prunable)."""
    common = os.path.realpath(repo.common_dir)
    here = os.path.realpath(repo.root)
    base = os.path.join(common, "worktrees")
    found = []
    # the main work tree, seen from a linked one (from the main one itself moved by core.worktree, the directory
    # holding .git is no checkout: part of this project, and its own rules apply); a bare repository has none
    if os.path.basename(common) == ".git" and below(git_dir_of(here), base):
        main = os.path.dirname(common)
        if main != here and git_dir_of(main) == common:
            found.append(main)
    try:
        names = sorted(os.listdir(base))
    except OSError:
        names = []
    from ai_sandbox.verify import read_regular  # standard library only: costs nothing

    for name in names:
        try:
            # a session can write the common git directory: a FIFO nobody writes or a link to /dev/zero there hung
            # every later launch (forty-third red team); unreadable, it names no checkout, as a deleted one
            dotgit = os.fsdecode(read_regular(os.path.join(base, name, "gitdir"), 1 << 16).rstrip(b"\n"))
        except OSError:
            continue
        root = os.path.realpath(os.path.dirname(dotgit))
        if root != here and git_dir_of(root) == os.path.join(base, name):
            found.append(root)
    return [Repo(root=r, common_dir=common) for r in dict.fromkeys(found)]


def untracked_below(repo: Repo, rels: list[str]) -> list[str]:
    """Every untracked, not ignored file inside these untracked directories (git collapses each to one
    entry), and each repository cloned in them as `path/`. Pathspecs are literal: a directory named `*`
    or `[ab]` names only itself."""
    args = ["ls-files", "-z", "--others", "--exclude-standard", "--", *(r + "/" for r in rels)]
    proc = _run(args, repo.root, env={**os.environ, "GIT_LITERAL_PATHSPECS": "1"})
    if proc.returncode != 0:
        raise _git_error(args, repo.root, proc.stderr)
    return _split_z(proc.stdout)


def repos_below(repo: Repo, rel: str) -> list[str]:
    """Repositories cloned somewhere inside the untracked directory rel (git lists each as `path/`)."""
    return [p.rstrip("/") for p in untracked_below(repo, [rel]) if p.endswith("/")]
