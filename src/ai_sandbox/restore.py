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
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys

from ai_sandbox import git
from ai_sandbox.errors import SandboxError
from ai_sandbox.fs import below, printable
from ai_sandbox.policy import Policy
from ai_sandbox.records import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.layers import Tree
    from ai_sandbox.skipworktree import Marks


@record
class Pending:
    """One work tree's hidden directories, and what the index tracked in them at launch."""

    tree: str  # the work tree's root
    dirs: list[str]  # the hidden directories in it, relative to it
    known: list[str]  # the tracked paths the launch found in them (their skip-worktree marks keep them)


def pending(policy: Policy, trees: list[Tree], marks: Marks) -> list[Pending]:
    """What to look at after the session: the directory masks inside each work tree git listed."""
    out = []
    dirs = [m.path for m in policy.masks if m.is_dir]
    for tree in trees if dirs else []:
        top = os.path.join(policy.root, tree.prefix).rstrip("/")
        inner = [d[len(top) + 1 :] for d in dirs if below(d, top) and not _in_git_dir(d, top)]
        if inner:
            out.append(Pending(top, inner, marks.needs.get(top, [])))
    return out


def _in_git_dir(path: str, top: str) -> bool:
    return path == top + "/.git" or path.startswith(top + "/.git/")


def after(pending: list[Pending]) -> None:
    """Write what git left missing in hidden directories, and say so in one line on stderr. Never raises:
    this runs as the session ends (the watcher, or the launch under a supervised backend)."""
    written: list[str] = []
    kept: list[str] = []
    for p in pending:
        try:
            w, k = _restore(p)
        except (OSError, SandboxError, ValueError):
            continue
        written += w
        kept += k
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


def _say(line: str) -> None:
    try:
        sys.stderr.write(f"ai-sandbox: {line}\n")
        sys.stderr.flush()
    except OSError:
        pass


def _restore(p: Pending) -> tuple[list[str], list[str]]:
    known = set(p.known)
    wanted: list[tuple[str, str, str]] = []  # (path, mode, object id)
    kept: list[str] = []
    for mode, oid, stage, path in git.index_entries(p.tree, p.dirs):
        if stage != "0" or mode == "160000" or path in known:
            continue
        if os.path.lexists(os.path.join(p.tree, path)):
            if mode != "040000":
                kept.append(os.path.join(p.tree, path))
            continue
        wanted.append((path, mode, oid))
    if not wanted:
        return [], kept
    blobs = git.blobs(p.tree, [oid for _, _, oid in wanted])
    written = []
    for path, mode, oid in wanted:
        data = blobs.get(oid)
        if data is not None and _write(p.tree, path, mode, data):
            written.append(os.path.join(p.tree, path))
    return written, kept


def _write(tree: str, rel: str, mode: str, data: bytes) -> bool:
    """Create tree/rel (and the directories above it) without following any link and without replacing
    anything: False when something is in the way."""
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return False  # git refuses such paths in an index; never trusted here either
    fd = os.open(tree, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=fd)
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        name = parts[-1]
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
