"""Filesystem helpers every layer uses: path containment, an atomic write that never follows what a session
planted, and the short "a, b, c and N more" a one-line message lists paths with."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Callable, Iterable, Mapping


def below(path: str, parent: str) -> bool:
    """path is strictly inside parent (both absolute and normal)."""
    return path.startswith(parent.rstrip("/") + "/")


def printable(s: str) -> str:
    """A name as one line a terminal cannot be steered by: control characters and raw bytes escaped."""
    return s if s.isprintable() else s.encode("unicode_escape", "backslashreplace").decode("ascii")


def shown(line: str) -> str:
    """A line ai-sandbox prints, as the terminal must get it: what prints as itself (a dash, an ellipsis, any
    letter), the rest escaped as printable() does. Its messages name files a session can name (escape codes that
    set the title or clear the screen: forty-third red team), so every line is passed through this on its way out."""
    if line.isprintable():
        return line
    return "".join(c if c.isprintable() else printable(c) for c in line)


def read_json(path: str, limit: int) -> object:
    """A JSON file of ai-sandbox's own (a cache), or None when it is missing, damaged, larger than limit
    bytes, or not a regular file: read with verify.read_regular, so never through a link or from a FIFO."""
    import json

    from ai_sandbox.verify import read_regular  # standard library only: costs nothing

    try:
        return json.loads(read_regular(path, limit))
    except (OSError, ValueError, RecursionError):
        return None


def inside(path: str, parent: str) -> bool:
    """path is parent or inside it."""
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def realpaths() -> Callable[[str], str]:
    """os.path.realpath with every directory's answer remembered: thousands of masks share a few hundred
    directories, so each is looked at once (one lstat) instead of once per component per path. For one batch of
    questions asked at one moment (the launch's policy, the watcher's look before the agent runs): a link
    changed meanwhile is not seen."""
    # None: a link the kernel cannot follow to an end (a loop, a missing component, a dangling target).
    # os.path.realpath's answer below it may not be its answer for the link followed by the rest (a link met
    # again while resolving it), so such paths are asked whole; nothing below such a link can be opened.
    known: dict[str, str | None] = {"/": "/"}

    def real(path: str) -> str:
        if not os.path.isabs(path) or "/./" in path or "/../" in path or path.endswith(("/.", "/..")):
            return os.path.realpath(path)
        pending = []  # ancestors not yet known, nearest first (a loop: paths can be 2,000 levels deep)
        p = path = path.rstrip("/") or "/"
        while p not in known:
            pending.append(p)
            p = p.rpartition("/")[0] or "/"  # absolute and normal: posixpath's checks cost 3x
        for q in reversed(pending):
            head, _, name = q.rpartition("/")
            parent = known[head or "/"]
            if parent is None:
                known[q] = None
                continue
            joined = f"{parent}/{name}" if parent != "/" else f"/{name}"
            try:
                link = stat.S_ISLNK(os.lstat(joined).st_mode)
            except (OSError, ValueError):
                link = False
            known[q] = _resolved(joined) if link else joined
        answer = known[path]
        return os.path.realpath(path) if answer is None else answer

    return real


def _resolved(link: str) -> str | None:
    """A link's realpath, or None when the kernel cannot follow it to an end (ELOOP, or ENOENT where
    os.path.realpath meets a loop: `b -> nope/../a`, `a -> b/..`), whose answers for paths below it are not its
    answer followed by the rest. A link the kernel follows resolves the same way in os.path.realpath."""
    try:
        os.stat(link)
    except OSError:
        return None
    return os.path.realpath(link)


def write_atomic(path: str, content: bytes, mode: int = 0o600) -> None:
    """Write through a temporary file and a rename: a reader sees the old bytes or the new, never half.
    The temporary file is created afresh (O_EXCL, O_NOFOLLOW): a link or FIFO a session left at its name
    is removed, never written through. The directory is made (0700) when missing."""
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    _clear(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def some(items: Iterable[str], shown: int = 3) -> str:
    """`a, b, c and 4 more`: a list that fits in one line of a message."""
    items = list(items)
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def make_dirs(dirs: Mapping[str, int]) -> None:
    """Create what the backend needs to exist; an existing directory is left as the user has it, but a
    link or anything else standing at the path (planted by a session) is removed first, never followed."""
    for path, mode in dirs.items():
        if os.path.islink(path) or (os.path.lexists(path) and not os.path.isdir(path)):
            _clear(path)
        if not os.path.isdir(path):
            os.makedirs(path, mode=mode, exist_ok=True)
            os.chmod(path, mode)


def write_files(files: Mapping[str, bytes]) -> None:
    """Generated files are content-addressed: reuse one that holds exactly these bytes, else (re)write it.

    What stands at the path is never trusted: it is read without following a link or blocking on a FIFO,
    and anything but a regular file (a directory, FIFO or link a session planted) is removed first."""
    for path, content in files.items():
        if _holds(path, content):
            with contextlib.suppress(OSError):
                os.utime(path)  # in use: kept by _prune
            continue
        _clear(path)
        write_atomic(path, content)
        _prune(path)


GENERATED_AGE = 86_400  # seconds: generated files of a kind unused this long are removed when a new one is written


def _prune(path: str) -> None:
    """Remove the files of path's kind (`check-…`, `firejail-….profile`: the name up to its first '-') beside it
    that no launch used for GENERATED_AGE: each is named by its content's hash, so what changes makes a new one,
    and the cache would only grow. A launch that uses one touches it first."""
    import time

    d, name = os.path.split(path)
    kind = name.partition("-")[0] + "-"
    old = time.time() - GENERATED_AGE
    try:
        names = os.listdir(d)
    except OSError:
        return
    for other in names:
        if other.startswith(kind) and other != name:
            p = os.path.join(d, other)
            with contextlib.suppress(OSError):
                st = os.lstat(p)
                if stat.S_ISREG(st.st_mode) and st.st_mtime < old:
                    os.unlink(p)


def _holds(path: str, content: bytes) -> bool:
    from ai_sandbox.verify import read_regular  # standard library only: costs nothing

    try:
        return read_regular(path) == content
    except OSError:
        return False


def _clear(path: str) -> None:
    """Remove whatever is at path that is not ours to reuse; a directory with all it holds."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        import shutil  # only when something was planted

        shutil.rmtree(path)
    else:
        os.unlink(path)
