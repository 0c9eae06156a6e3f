"""The commit-graph files that changed during a session, removed at its end. git keeps each commit's tree, parents
and date in `objects/info/commit-graph` (or a chain of them in `objects/info/commit-graphs/`) and takes them from
there without reading the commit: a graph whose entry for HEAD names the index's tree hid the session's staged edit
from the user's `git status` and `git diff HEAD`, and their `commit -a` carried it (forty-ninth red team, F2; so did
a graph in an object directory the session named in `objects/info/alternates`, which gitsettings.py puts back).

The graph is a cache: git works without it, and `git commit-graph write --reachable` (or the next `git gc`) writes
it again. So the end removes the graph files of an object directory where any changed, whoever wrote them (a `git gc`
in the session, or your own maintenance meanwhile, writes them too), rather than read every commit to tell a
forgery (`git commit-graph verify` reads them all; it does not look at the changed-path filters). Never through a
link: a session's link there may lead into another repository (forty-ninth red team, F1); one is named instead.

The launch looks at the repository's object directory and those of its alternates that lie in the project or its
git directory (the only ones a session can write): one lstat and one directory listing each, no git.
"""

from __future__ import annotations

import errno
import os
import re
import stat

Key = tuple[int, ...]
# object directory (its real path at the launch) -> graph file -> what stat said (None: the launch could not tell)
Graphs = dict[str, dict[str, Key] | None]
_MAX = 1024  # entries of a commit-graphs/ directory looked at; past this the launch cannot tell what changed
_REMOVED = 1 << 16  # graph files the end removes at most (a session's million would hold it ~10 s)
# what git reads or writes there (commit-graph.c): never anything else in the directory
_CHAIN = "commit-graph-chain"
_GITS = re.compile(r"commit-graph(-chain)?(\.lock)?|graph-[0-9a-f]{40,64}\.graph|tmp_graph_.*")


def _key(path: str) -> Key:
    """What no session can give a file it wrote the look of one it did not: inode, size, times (ctime: no session can
    set it back), mode; and the same of where a link leads (git follows it)."""
    st = os.lstat(path)
    out: Key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_mode)
    if stat.S_ISLNK(st.st_mode):
        try:
            t = os.stat(path)
            out += (t.st_dev, t.st_ino, t.st_size, t.st_mtime_ns, t.st_ctime_ns, t.st_mode)
        except OSError:
            out += (-1,)
    return out


def _files(objects: str) -> dict[str, Key] | None:
    """The graph files of one object directory (paths relative to it); None: more than _MAX, or unreadable."""
    info = os.path.join(objects, "info")
    out: dict[str, Key] = {}
    for name in ("commit-graph", "commit-graph.lock", "commit-graphs"):
        try:
            out[name] = _key(os.path.join(info, name))
        except FileNotFoundError:
            continue
        except OSError:
            return None
    if "commit-graphs" in out:
        try:
            with os.scandir(os.path.join(info, "commit-graphs")) as it:
                for n, e in enumerate(it):
                    if n >= _MAX:
                        return None
                    out[f"commit-graphs/{e.name}"] = _key(e.path)
        except NotADirectoryError:
            pass
        except OSError:
            return None
    return out


def object_dirs(common: str, root: str) -> list[str]:
    """The repository's object directory and those its alternates name in the project or the common git directory
    (real paths). Another repository's, elsewhere, the session cannot write."""
    from ai_sandbox.fs import inside

    objects = os.path.realpath(os.path.join(common, "objects"))
    out = [objects]
    alternates = os.path.join(objects, "info", "alternates")
    if not os.path.lexists(alternates):  # nearly every repository: one stat
        return out
    from ai_sandbox.verify import read_regular

    try:
        data = read_regular(alternates, 1 << 16, follow=True)
    except OSError:
        return out
    places = (os.path.realpath(root), os.path.realpath(common))
    for line in data.split(b"\n"):
        line = line.strip()
        if not line or line.startswith(b"#"):
            continue
        try:  # a line git cannot read either (a bad escape, a NUL) names no directory: never the launch's error
            if line.startswith(b'"') and line.endswith(b'"') and len(line) > 1:  # git's C quoting
                import codecs

                line = codecs.escape_decode(line[1:-1])[0]
            where = os.path.realpath(os.path.join(objects, os.fsdecode(line)))
        except ValueError:
            continue
        if any(inside(where, p) for p in places) and where not in out:
            out.append(where)
    return out[:16]


def look(common: str, root: str) -> Graphs | None:
    """The launch's look at the graph files git reads for the repository whose git directory is common; None where
    there is none (no git directory)."""
    return {d: _files(d) for d in object_dirs(common, root)} if common else None


def undo(before: Graphs | None, then: str, now: str, done: set[str]) -> None:
    """At the session's end: remove the graph files of each object directory where any changed since the launch, and
    say so. then, now: the work tree's path at the launch and at the end (a session may move a nested repository:
    its object directories moved with it); done: the object directories already looked at (a repository's
    worktrees share one)."""
    from ai_sandbox.fs import inside, printable
    from ai_sandbox.skipworktree import say_line

    old, new = os.path.realpath(then), os.path.realpath(now)
    for launched, was in (before or {}).items():
        objects = new + launched[len(old) :] if old != new and inside(launched, old) else launched
        if objects in done:
            continue
        done.add(objects)
        moved = os.path.realpath(objects) != objects  # a link on the way now: git reads another directory's
        if not moved and was is not None and _files(objects) == was:
            continue
        where = printable(objects)
        link = objects if moved else _linked(objects)
        if link is not None:
            say_line(
                f"did not remove the commit-graph files that changed during the session in {where}: {printable(link)} "
                "is a link, which would lead the removal elsewhere; git takes each commit's tree from them, so a forged "
                "one hides the session's edits from `git status`, `git diff` and `git commit -a`: remove the link, "
                "then the files, then `git commit-graph write --reachable`"
            )
            continue
        removed, failed = _remove(objects)
        if removed:
            names = ", ".join(printable(n) for n in removed[:3]) + (
                f" and {len(removed) - 3} more" if len(removed) > 3 else ""
            )
            say_line(
                f"removed the commit-graph files that changed during the session in {where}/info ({names}): git takes "
                "each commit's tree from them, so a forged one hides the session's edits from `git status`, `git diff` "
                "and `git commit -a`; they are a cache (a `git gc` or maintenance writes them too), which `git "
                "commit-graph write --reachable` writes again"
            )
        if failed:
            say_line(
                f"could not remove the commit-graph files that changed during the session in {where}/info ({failed}): "
                "git takes each commit's tree from them, so a forged one hides the session's edits from `git status`; "
                "remove them by hand, then `git commit-graph write --reachable`"
            )


def _linked(objects: str) -> str | None:
    """objects/info when it is a link now (objects itself is where it was: checked by the caller)."""
    info = os.path.join(objects, "info")
    return info if os.path.islink(info) else None


def _remove(objects: str) -> tuple[list[str], str]:
    """Unlink git's graph files in objects/info (relative to a descriptor: never through a link; a commit-graphs that
    is a link is removed itself); the names removed, and why one could not be ("" when all went)."""
    removed: list[str] = []
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        info = os.open(os.path.join(objects, "info"), flags)
    except FileNotFoundError:
        return removed, ""
    except OSError as e:
        return removed, f"{e.strerror or e}"
    try:
        try:
            graphs = os.open("commit-graphs", flags, dir_fd=info)
        except FileNotFoundError:
            graphs = -1
        except OSError as e:
            if e.errno not in (errno.ELOOP, errno.ENOTDIR):  # mode 0111: git reads the chain in it, we could not list
                raise  # said (fifty-first red team, F1: it was taken for a link, and nothing said)
            graphs = -2  # a link or a file: removed itself below
        if graphs >= 0:
            try:
                # the chain first, by its exact name: the graph files it does not name are never read, and no count
                # of others can push it past _REMOVED (fiftieth red team, F3: `tmp_graph_chain<N>` decoys did)
                names = sorted((n for n in os.listdir(graphs) if _GITS.fullmatch(n)), key=lambda n: n != _CHAIN)
                for n in names[:_REMOVED]:
                    _unlink(n, graphs, removed, f"commit-graphs/{n}")
            finally:
                os.close(graphs)
        for n in ("commit-graph", "commit-graph.lock", *(("commit-graphs",) if graphs == -2 else ())):
            _unlink(n, info, removed, n)
    except OSError as e:
        return removed, f"{e.strerror or e}"
    finally:
        os.close(info)
    return removed, ""


def _unlink(name: str, directory: int, removed: list[str], shown: str) -> None:
    try:
        if stat.S_ISDIR(os.lstat(name, dir_fd=directory).st_mode):
            return  # not git's: a directory by that name is nothing git reads as a graph
        os.unlink(name, dir_fd=directory)
    except FileNotFoundError:
        return
    removed.append(shown)
