"""Files git wrote into a hidden directory during a session, written on the host once it ends.

Inside, a hidden directory is an empty scratch tmpfs of the session (its writes vanish at exit) or a read-only
mask. When the agent's git checks out a branch, merges or resets to a commit that tracks files in one, git
writes them into the scratch: the repository ended on that commit with the files missing from the work tree,
and the user's next `git commit -a` would have recorded their deletion (red team, F5; into a read-only mask,
git refuses before it changes anything). So after the session every file the index tracks in a hidden
directory, that it did not track at launch and that the host lacks, is written from the index, as git would
have written it without the sandbox. Raw: no filter or hook of the repository's config runs outside the
sandbox (a session can write that config). Nothing on the host is ever overwritten: a file of that name stays
as it is, and the line after the session says so.

What it writes is the session's choice (the index is writable inside), so where is not: only inside the project
the launch looked at, its root opened without following a link and proved by the device and inode of the
launch's look (a session swapped the root for a link to ~/.config, or registered ~/.config as a worktree of
the repository, and a profile was written there: red team, R1 and R2); every directory on the way opened
without following links; git run in that very directory; never inside ai-sandbox's own directories.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Mapping

from ai_sandbox import git
from ai_sandbox.errors import SandboxError
from ai_sandbox.fs import below, inside, printable
from ai_sandbox.paths import cache_dir, config_home, state_dir
from ai_sandbox.policy import Policy
from ai_sandbox.records import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.idents import Snapshot
    from ai_sandbox.layers import Tree
    from ai_sandbox.skipworktree import Marks

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@record
class Pending:
    """One work tree's hidden directories, and what the index tracked in them at launch."""

    tree: str  # the work tree's path relative to the project root ("" for the root itself)
    dirs: list[str]  # the hidden directories in it, relative to it
    known: list[str]  # the tracked paths the launch found in them (their skip-worktree marks keep them)


def pending(policy: Policy, trees: list[Tree], marks: Marks) -> list[Pending]:
    """What to look at after the session: the directory masks inside each work tree git listed in the project
    (the repository's other worktrees are left out: their place is a session's to forge, R2)."""
    out = []
    dirs = [m.path for m in policy.masks if m.is_dir]
    root = policy.root.rstrip("/")
    for tree in trees if dirs else []:
        top = os.path.join(root, tree.prefix).rstrip("/")
        if not inside(top, root):
            continue
        inner = [d[len(top) + 1 :] for d in dirs if below(d, top) and not _in_git_dir(d, top)]
        if inner:
            out.append(Pending(top[len(root) + 1 :], inner, marks.needs.get(top, [])))
    return out


def _in_git_dir(path: str, top: str) -> bool:
    return path == top + "/.git" or path.startswith(top + "/.git/")


def after(root: str, seen: Snapshot, pending: list[Pending], env: Mapping[str, str]) -> None:
    """Write what git left missing in hidden directories, and say so in one line on stderr. Never raises:
    this runs as the session ends (the watcher, or the launch under a supervised backend)."""
    if not pending or seen.root is None:
        return
    try:
        fd = os.open(root, _DIR)
    except OSError:
        return
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != seen.root:
            return  # not the directory the launch looked at (swapped for a link or another directory)
        own = [os.path.realpath(d) for d in (config_home(env), state_dir(env), cache_dir(env))]
        written, kept = _all(fd, root, pending, own)
    finally:
        os.close(fd)
    if written:
        _say(
            f"git wrote {len(written)} tracked file(s) into hidden directories during the session "
            f"({printable(written[0])}{', …' if len(written) > 1 else ''}): written on the host from the index"
        )
    if kept:
        _say(
            f"git checked out {len(kept)} tracked file(s) where a hidden file of the same name stays "
            f"({printable(kept[0])}{', …' if len(kept) > 1 else ''}): yours is kept; `git status` shows it modified"
        )


def _all(root_fd: int, root: str, pending: list[Pending], own: list[str]) -> tuple[list[str], list[str]]:
    written: list[str] = []
    kept: list[str] = []
    for p in pending:
        try:
            tree_fd = _open_dirs(root_fd, p.tree.split("/") if p.tree else [], create=False)
        except OSError:
            continue
        try:
            w, k = _restore(tree_fd, os.path.join(root, p.tree) if p.tree else root, p, own)
        except (OSError, SandboxError, ValueError):
            continue
        finally:
            os.close(tree_fd)
        written += w
        kept += k
    return written, kept


def _say(line: str) -> None:
    try:
        sys.stderr.write(f"ai-sandbox: {line}\n")
        sys.stderr.flush()
    except OSError:
        pass


def _restore(tree_fd: int, tree: str, p: Pending, own: list[str]) -> tuple[list[str], list[str]]:
    """(written, kept) in one work tree, opened as tree_fd; git runs in that very directory."""
    here = f"/proc/{os.getpid()}/fd/{tree_fd}"
    known = set(p.known)
    entries = []  # (path, mode, object id, there already)
    for mode, oid, stage, path in git.index_entries(here, p.dirs):
        if stage != "0" or mode == "160000" or path in known:
            continue
        full = os.path.join(tree, path)
        if any(inside(full, d) for d in own):
            continue
        entries.append((path, mode, oid, os.path.lexists(full)))
    if not entries:
        return [], []
    blobs = git.blobs(here, [oid for _, _, oid, _ in entries])
    written, kept = [], []
    for path, mode, oid, there in entries:
        data = blobs.get(oid)
        full = os.path.join(tree, path)
        if data is None:
            continue
        if there:
            if mode != "040000" and not _holds(full, mode, data):
                kept.append(full)  # never overwritten; the same bytes (written by an earlier pass): nothing to say
        elif _write(tree_fd, path, mode, data):
            written.append(full)
    return written, kept


def _holds(path: str, mode: str, data: bytes) -> bool:
    """Whether path is already what the index says (a link to data, or a regular file of these bytes)."""
    from ai_sandbox.verify import read_regular

    with contextlib.suppress(OSError):
        if mode == "120000":
            return os.readlink(path) == os.fsdecode(data)
        return read_regular(path, len(data)) == data
    return False


def _open_dirs(fd: int, parts: list[str], create: bool) -> int:
    """The directory parts/… below fd, each opened without following a link (made when create); a new fd."""
    out = os.dup(fd)
    try:
        for part in parts:
            if part in ("", ".", ".."):
                raise OSError(f"{part!r} in a path")  # git refuses such paths in an index; never trusted here
            if create:
                with contextlib.suppress(FileExistsError):
                    os.mkdir(part, 0o777, dir_fd=out)
            nxt = os.open(part, _DIR, dir_fd=out)
            os.close(out)
            out = nxt
    except BaseException:
        os.close(out)
        raise
    return out


def _write(tree_fd: int, rel: str, mode: str, data: bytes) -> bool:
    """Create rel (and the directories above it) below tree_fd without following any link and without replacing
    anything: False when something is in the way."""
    parts = rel.split("/")
    try:
        fd = _open_dirs(tree_fd, parts[:-1], create=True)
    except OSError:
        return False
    name = parts[-1]
    try:
        if name in ("", ".", ".."):
            return False
        if mode == "120000":
            os.symlink(os.fsdecode(data), name, dir_fd=fd)
            return True
        perms = 0o777 if int(mode, 8) & stat.S_IXUSR else 0o666
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, perms, dir_fd=fd)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(out, view) :]
        finally:
            os.close(out)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
