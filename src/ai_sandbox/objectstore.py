"""Object files a session forged, removed at its end. git reads an object by its name and checks no hash when it
reads a tree to compare it: a session that wrote the staged subtree's object under the name of HEAD's subtree
(`cp objects/<new> objects/<old>`) hid its staged edit from the user's `git status` and `git diff HEAD`, and their
`commit -a` carried it (fiftieth red team, F1; a blob written under the name of one HEAD holds would come out of the
next checkout in its place). Only `git fsck` told.

So at the end, every loose object file that changed during the session (its change time is past the launch's: no
session can set that back), and every one in a directory that did (moved in whole), is read and hashed as git names
objects; one whose content is not its name is removed (git never writes such a file; what it hid is then missing,
which git says). A pack whose index or data changed is checked by `git verify-pack` (an index can name any object
in a pack by any name); one that fails loses its index, which `git index-pack` writes again from the pack. A
multi-pack-index that changed is removed: it names objects in packs by itself, and is a cache, like the commit-graph
(commitgraph.py). Nothing is read or removed through a link.

The launch stats the object directory and its `pack` directory (which directory the end finds there tells whether
the session put another in its place); the end's cost is what the session wrote.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time

Ident = tuple[int, int]  # (device, inode); (0, 0): not there
Stores = dict[str, tuple[Ident, Ident]]  # object directory (real path at the launch) -> it, its pack directory
_FAN = re.compile(r"[0-9a-f]{2}")
_LOOSE = re.compile(r"[0-9a-f]{38}|[0-9a-f]{62}")
_PACK = re.compile(r".+\.(idx|pack)", re.DOTALL)  # git loads every .idx there, whatever its name (red team 52, F2)
_MIDX = re.compile(r"multi-pack-index(-[0-9a-f]{40,64}\.(bitmap|rev))?")
_TYPES = (b"blob ", b"tree ", b"commit ", b"tag ")
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
BUDGET = 120.0  # seconds the end spends hashing what a session wrote; past it what is left is said, not checked


def _ident(path: str) -> Ident:
    try:
        st = os.lstat(path)
    except OSError:
        return (0, 0)
    return (st.st_dev, st.st_ino)


def look(dirs: list[str]) -> Stores:
    """The launch's look: two lstat calls per object directory."""
    return {d: (_ident(d), _ident(os.path.join(d, "pack"))) for d in dirs}


class OutOfTime(Exception):
    """The end's budget ran out while an object was read."""


def sound(fd: int, name: str, deadline: float = float("inf")) -> bool:
    """Whether the regular file fd holds, zlib-compressed, an object git would name `name` (hex, no slash). Inflated
    a megabyte at a time, never past the size its header gives (a zlib bomb inflated ~1 GB per MB read and held the
    end for minutes: fifty-second red team, F3); OutOfTime past the deadline."""
    import hashlib
    import zlib

    h = hashlib.sha1() if len(name) == 40 else hashlib.sha256()
    inflate = zlib.decompressobj()
    head = b""
    limit = -1  # the inflated size the header allows, once read
    total = 0
    try:
        while chunk := os.read(fd, 1 << 20):
            while chunk:
                if time.monotonic() > deadline:
                    raise OutOfTime
                out = inflate.decompress(chunk, 1 << 20)
                chunk = inflate.unconsumed_tail
                total += len(out)
                if limit < 0:
                    head += out[: 64 - len(head)] if len(head) < 64 else b""
                    limit = _limit(head)
                    if limit == -2 or (limit == -1 and len(head) >= 64):
                        return False  # no header git writes
                if limit >= 0 and total > limit:
                    return False
                h.update(out)
                if inflate.eof:
                    break
            if inflate.eof:
                break
    except zlib.error:
        return False
    return inflate.eof and not inflate.unused_data and total == limit and h.hexdigest() == name


def _limit(head: bytes) -> int:
    """The inflated size an object's header allows (`TYPE SIZE\\0` and SIZE bytes); -1: not all read yet; -2: no
    header git writes."""
    end = head.find(b"\0")
    if end < 0:
        return -1
    kind, _, size = head[:end].partition(b" ")
    if kind + b" " not in _TYPES or not size.isdigit() or (len(size) > 1 and size.startswith(b"0")):
        return -2
    return end + 1 + int(size)


class _Found:
    def __init__(self) -> None:
        self.removed: list[str] = []  # loose objects (and links) removed, as "ab/cdef…"
        self.unchecked = 0  # left when the budget ran out
        self.failed = ""  # why one could not be removed
        self.odd: list[str] = []  # pack files that were no regular file, removed


def _loose(objects: int, since: int, whole: bool, deadline: float, found: _Found) -> None:
    for fan in sorted(n for n in os.listdir(objects) if _FAN.fullmatch(n)):
        st = os.stat(fan, dir_fd=objects, follow_symlinks=False)
        if stat.S_ISLNK(st.st_mode):
            if whole or st.st_ctime_ns >= since:  # git follows it: a session's link leads git elsewhere
                _unlink(fan, objects, found, fan)
            continue
        if not stat.S_ISDIR(st.st_mode):
            continue
        every = whole or st.st_ctime_ns >= since  # made, or moved in, during the session: its files kept their times
        try:
            sub = os.open(fan, _DIR, dir_fd=objects)
        except FileNotFoundError:  # removed meanwhile (your own `git gc`): nothing left there to read
            continue
        try:
            with os.scandir(sub) as it:
                names = [e.name for e in it if _LOOSE.fullmatch(e.name) and (every or _changed(e, since))]
            for n in names:
                if time.monotonic() > deadline:
                    found.unchecked += 1
                    continue
                try:
                    good = _loose_sound(sub, n, fan + n, deadline)
                except OutOfTime:
                    found.unchecked += 1
                    continue
                if not good:
                    _unlink(n, sub, found, f"{fan}/{n}")
        finally:
            os.close(sub)


def _changed(e: os.DirEntry[str], since: int) -> bool:
    try:
        return e.stat(follow_symlinks=False).st_ctime_ns >= since
    except OSError:
        return False


def _loose_sound(sub: int, name: str, full: str, deadline: float) -> bool:
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=sub)
    except FileNotFoundError:
        return True  # gone meanwhile: nothing git can read
    except OSError:
        return False  # a link (git would follow it), a FIFO it would block on
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and sound(fd, full, deadline)
    finally:
        os.close(fd)


def _unlink(name: str, directory: int, found: _Found, shown: str, into: list[str] | None = None) -> None:
    try:
        os.unlink(name, dir_fd=directory)
    except FileNotFoundError:
        return
    except OSError as e:
        if e.errno == errno.EISDIR:  # a directory by an object's name: git cannot read it as one
            return
        found.failed = f"{shown}: {e.strerror or e}"
        return
    (found.removed if into is None else into).append(shown)


def _packs(objects: int, since: int, whole: bool, found: _Found) -> tuple[list[str], list[str], int]:
    """The packs (by base name) whose index or data changed, and the multi-pack-index files that did; and the pack
    directory's descriptor (-1: none)."""
    try:
        pack = os.open("pack", _DIR, dir_fd=objects)
    except FileNotFoundError:
        return [], [], -1
    changed: set[str] = set()
    caches: list[str] = []
    names: set[str] = set()
    odd: list[str] = []  # a FIFO (or a link, a device) as a pack file: verify-pack and the user's git block on it
    with os.scandir(pack) as it:
        for e in it:
            names.add(e.name)
            if _PACK.fullmatch(e.name) and (whole or _changed(e, since)):
                if not e.is_file(follow_symlinks=False):
                    odd.append(e.name)
                    continue
                changed.add(e.name.rsplit(".", 1)[0])
            elif _MIDX.fullmatch(e.name) and (whole or _changed(e, since)):
                caches.append(e.name)
    for n in odd:  # removed, and named with the forged objects (fifty-third red team, F4: a FIFO .idx hung both)
        names.discard(n)
        _unlink(n, pack, found, f"pack/{n}", found.odd)
    return sorted(p for p in changed if f"{p}.idx" in names), sorted(caches), pack  # git reads a pack by its .idx


def undo(before: Stores | None, then: str, now: str, since: int, done: set[str]) -> None:
    """At the session's end: check what changed in each object directory looked at (the module's docstring), and say
    what was removed. then, now: the work tree's path at the launch and at the end; done: the object directories
    already checked (a repository's worktrees share one)."""
    from ai_sandbox.fs import inside, printable
    from ai_sandbox.skipworktree import say_line

    old, new = os.path.realpath(then), os.path.realpath(now)
    deadline = time.monotonic() + BUDGET
    for launched, (was, packwas) in (before or {}).items():
        objects = new + launched[len(old) :] if old != new and inside(launched, old) else launched
        if objects in done:
            continue
        done.add(objects)
        where = printable(objects)
        try:
            fd = os.open(objects, _DIR)
        except FileNotFoundError:
            continue
        except OSError as e:
            link = os.path.islink(objects)
            why = "a link, which would lead the check elsewhere" if link else (e.strerror or str(e))
            say_line(
                f"did not check the object files the session wrote in {where} ({why}): a forged one hides its edits "
                "from `git status`, `git diff` and `git commit -a`; `git fsck` finds them"
            )
            continue
        try:
            st = os.fstat(fd)
            whole = (st.st_dev, st.st_ino) != was
            found = _Found()
            _loose(fd, since, whole, deadline, found)
            packs, caches, pack = _packs(fd, since, whole or _ident(os.path.join(objects, "pack")) != packwas, found)
            try:
                bad, unchecked = _verify(objects, packs, deadline) if packs else ([], [])
                for b in bad:
                    _unlink(f"{b}.idx", pack, found, f"pack/{b}.idx")
                for c in caches:
                    _unlink(c, pack, found, f"pack/{c}")
            finally:
                if pack >= 0:
                    os.close(pack)
        except OSError as e:
            say_line(
                f"could not check the object files the session wrote in {where} ({e.strerror or e}): a forged one "
                "hides its edits from `git status`, `git diff` and `git commit -a`; `git fsck` finds them"
            )
            continue
        finally:
            os.close(fd)
        _say(where, found, bad, caches, unchecked)


def _verify(objects: str, packs: list[str], deadline: float) -> tuple[list[str], list[str]]:
    """The packs `git verify-pack` fails (their index names an object by what it does not hold), and those left
    unchecked when the budget ran out."""
    from ai_sandbox.errors import SandboxError
    from ai_sandbox.git.run import _run

    bad: list[str] = []
    left: list[str] = []
    for p in packs:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            left.append(p)
            continue
        try:
            proc = _run(["verify-pack", os.path.join(objects, "pack", f"{p}.idx")], objects, timeout=remaining)
        except SandboxError:  # timed out: said as unchecked
            left.append(p)
            continue
        if proc.returncode != 0:
            bad.append(p)
    return bad, left


def _say(where: str, found: _Found, bad: list[str], caches: list[str], unchecked: list[str]) -> None:
    from ai_sandbox.fs import printable
    from ai_sandbox.skipworktree import say_line

    forged = [r for r in found.removed if not r.startswith("pack/")] + found.odd
    if forged:
        names = ", ".join(printable(n) for n in forged[:3]) + (
            f" and {len(forged) - 3} more" if len(forged) > 3 else ""
        )
        say_line(
            f"removed object files the session left in {where} whose content is not the object their name says "
            f"({names}): git reads an object by its name without checking, so a forged one hides the session's edits "
            "from `git status`, `git diff` and `git commit -a`; `git fsck` names what is now missing"
        )
    if bad:
        say_line(
            f"removed the index of packs the session changed in {where}/pack, which `git verify-pack` failed "
            f"({', '.join(printable(b) for b in bad)}): an index that names an object by what the pack does not hold "
            "hides the session's edits from `git status`; `git index-pack` on each .pack writes a true one"
        )
    if caches and any(f"pack/{c}" in found.removed for c in caches):
        say_line(
            f"removed the multi-pack-index files that changed during the session in {where}/pack: git finds objects "
            "through them without checking, so a forged one hides the session's edits from `git status`; they are a "
            "cache, which `git multi-pack-index write` writes again"
        )
    if found.unchecked or unchecked:
        say_line(
            f"did not finish checking the object files the session wrote in {where} ({found.unchecked} loose, "
            f"{len(unchecked)} packs left after {BUDGET:.0f} s): a forged one hides its edits from `git status`; "
            "`git fsck` finds them"
        )
    if found.failed:
        say_line(
            f"could not remove a forged object file in {where} ({found.failed}): it hides the session's edits from "
            "`git status`; remove it by hand, then `git fsck`"
        )
