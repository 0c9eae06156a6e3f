"""Running git: every call ai-sandbox makes goes through here, hardened (no hooks, no fsmonitor, no transport),
with a time limit, and its NUL-separated output split. git runs outside the sandbox, on a repository the agent
can write: nothing the repository configures may run code here.
"""

from __future__ import annotations

import contextlib
import os

from ai_sandbox import spawn, tools
from ai_sandbox.errors import PolicyError, UnavailableError
from ai_sandbox.gitcommand import QUICK, argv, hardened

# Seconds any git call may take. None takes that long on a sane repository (a monorepo's listing: ~2 s), but
# git reads .git/config, and a session can make it include a FIFO: every later call of ai-sandbox's hung, the
# watcher's release of the index marks and the next launch included (red team, T2).
TIMEOUT = 120.0


class GitTimeout(PolicyError):
    """A git call took longer than its time limit."""


def _timeout(args: list[str], cwd: str, limit: float) -> GitTimeout:
    return GitTimeout(
        f"git {args[0]} took longer than {limit:.0f} s in {cwd}",
        "check the repository's config and the files it includes (a FIFO left in .git by a session?)",
    )


def not_installed() -> UnavailableError:
    return UnavailableError(
        f"git is not installed (looked in {tools.where()})",
        "install git (e.g. `sudo apt-get install git`); ai-sandbox reads its rules from git",
    )


def _run(
    args: list[str],
    cwd: str,
    stdin: bytes | None = None,
    env: dict[str, str] | None = None,
    timeout: float = TIMEOUT,
    new_session: bool = False,
) -> spawn.Finished:
    if new_session:  # the history walk (never on the launch path), which outlives a closed terminal
        import subprocess

        try:
            proc = subprocess.run(
                argv(args, cwd), input=stdin, capture_output=True, env=hardened(env), timeout=timeout,
                start_new_session=True,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            raise _timeout(args, cwd, timeout) from None
        except FileNotFoundError:
            raise not_installed() from None
        return spawn.Finished(proc.returncode, proc.stdout, proc.stderr)
    try:
        return spawn.run(argv(args, cwd), hardened(env), stdin, timeout)
    except spawn.TimedOut:
        raise _timeout(args, cwd, timeout) from None
    except FileNotFoundError:
        raise not_installed() from None


def git_output(args: list[str], cwd: str, stdin: bytes | None = None, timeout: float = TIMEOUT) -> bytes:
    """git's stdout; a failure refuses with git's first line."""
    return _git(args, cwd, stdin, timeout=timeout)


def index_write(args: list[str], root: str, stdin: bytes, place: str) -> spawn.Finished:
    """A git command that only changes index entries' flags (update-index --[no-]skip-worktree), run with an
    empty directory of its own, made in place (ai-sandbox's cache: read-only inside every sandbox), as the work
    tree. Writing the index, git re-reads each racily clean file through its clean filter; a session can define
    one in .git/config (or in a file it includes: a FIFO that serves one text, then another) and attach it to
    every path in .git/info/attributes (all writable inside): it ran outside the sandbox as the user and copied
    a hidden .env (red team, C2 and T1). With no file where git looks, git opens none and no filter runs,
    whatever the config says when git reads it.

    The price: git can no longer mark a racily clean entry (a file changed within the second git last wrote
    the index, same size) for a look at its content, and the index it writes is newer than the file, so the
    change would look clean to the user's next `git status` and `commit -a` would leave it out (seen on a
    Debian 13 run). The index keeps the modification time it had: every entry racy before stays racy, and the
    user's own git, in the real work tree, looks at its content as it would have."""
    git_dir = git_dir_of(root)
    if not git_dir:
        raise PolicyError(f"cannot find the git directory of {root}", "check its .git")
    index = os.environ.get("GIT_INDEX_FILE") or os.path.join(git_dir, "index")
    try:
        before = os.stat(index)
    except OSError:
        before = None
    empty = os.path.join(place, f"empty-worktree-{os.getpid()}")
    os.makedirs(empty, mode=0o700, exist_ok=True)
    try:
        if os.listdir(empty):
            raise PolicyError(f"{empty} is not empty", "remove it")
        env = {**os.environ, "GIT_DIR": git_dir, "GIT_WORK_TREE": empty}
        proc = _run(args, empty, stdin, env=env, timeout=QUICK)
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(empty)
    if before is not None:
        with contextlib.suppress(OSError):  # an older time only makes git look at more files, never fewer
            now = os.stat(index)
            if now.st_mtime_ns > before.st_mtime_ns:
                os.utime(index, ns=(now.st_atime_ns, before.st_mtime_ns))
    return proc


def _git(
    args: list[str], cwd: str, stdin: bytes | None = None, ok: tuple[int, ...] = (0,), timeout: float = TIMEOUT
) -> bytes:
    proc = _run(args, cwd, stdin, timeout=timeout)
    if proc.returncode not in ok:
        raise _git_error([a for a in args if not a.startswith(("-c", "filter."))], cwd, proc.stderr)
    return proc.stdout


def _git_error(args: list[str], cwd: str, stderr: bytes) -> PolicyError:
    text = os.fsdecode(stderr).strip()
    first = next((ln for ln in text.splitlines() if ln.strip()), "exit status without message")
    if "dubious ownership" in text:
        return PolicyError(
            f"git refuses to read {cwd}: it is owned by another user",
            f"if you trust it, run `git config --global --add safe.directory {cwd}`",
        )
    return PolicyError(
        f"git {args[0]} failed in {cwd}: {first.removeprefix('fatal: ')}",
        "fix the repository (run the same git command to see why) — ai-sandbox will not guess what is ignored",
    )


def _split_z(data: bytes) -> list[str]:
    return [p for p in os.fsdecode(data).split("\0") if p]  # one decode: NUL is never inside a character


def git_dir_of(root: str) -> str:
    """The git directory root/.git is or names (`gitdir: …` in a linked worktree's file), as a real path. A link
    to a directory is followed, as git follows it (taken for no repository, a session's `mv .git .gitreal; ln -s
    .gitreal .git` turned the stash line off for good: nineteenth red team)."""
    dotgit = os.path.join(root, ".git")
    if os.path.isdir(dotgit):
        return os.path.realpath(dotgit)
    from ai_sandbox.verify import read_regular

    try:
        # never a FIFO a session put there; a link to a file is followed, as git follows it (twentieth red team)
        where = os.path.realpath(dotgit) if os.path.islink(dotgit) else dotgit
        head = read_regular(where, 1 << 20)  # git reads it whole: trailing blank lines too (twentieth red team)
    except OSError:
        return ""
    if not head.startswith(b"gitdir: "):
        return ""
    # as git reads it (setup.c): the line's ends stripped, \r too (`gitdir: <dir>\r` beside a link `<dir>\r` to the
    # home made the next launch take the home for the git directory: twenty-first red team)
    target = os.fsdecode(head[len(b"gitdir: ") :].rstrip(b"\r\n"))
    return os.path.realpath(os.path.join(root, target))
