"""The caches git keeps in its index file, dropped at the end of a session that wrote the index. git trusts them
without reading what they stand for: the cached-tree extension (`TREE`) names the tree of each directory as the
index holds it, and a session that set those names to HEAD's (its checksum made anew) hid its staged edit there from
the user's `git status` and `git diff HEAD`, and their `commit -a` carried it (fiftieth red team, F2). The untracked
cache (`UNTR`) can hide a planted untracked file in the same way, and the fsmonitor token (`FSMN`) the edits of
files it marks as unchanged.

git writes them again as it goes (`git commit` the cached trees, `git status` the others where configured); dropped,
they cost a slower first command. So are the extensions git skips (an unknown optional one, bytes short of one) or
reads only to go faster (the offset tables of a threaded read): a forged `TREE` inside an unknown extension, which
a trailing end-of-entries extension pointed git's threaded read at, was kept (fifty-third red team, F1). The entries
and the extensions that are no cache (a split index's link, resolve-undo, a sparse index's mark) are kept byte for
byte, but for one thing git itself does when it writes the index: an entry whose file changed in the same instant as the index was written (racily
clean) gets its size cleared, so that git reads the file rather than trust a stat the new file's later time would
make look settled.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import struct
import time

# What is kept: the split index's link, the resolve-undo entries, the sparse index's mark; and an extension git does
# not know and must not ignore (its name starts with no capital: git refuses the index, loudly). Every other is a
# cache or one git skips (an unknown optional extension could carry a forged TREE that a trailing EOIE points git at:
# fifty-third red team, F1), dropped.
_KEEP = frozenset({b"link", b"REUC", b"sdir"})
_SPARSE = b"sdir"  # a sparse index: its directory entries need the cached trees
_MTIME_MODE = struct.Struct(">I12xI")  # an entry's mtime (seconds) and mode, 8 bytes into it


def layout(data: bytes, hashlen: int) -> tuple[list[int], list[tuple[bytes, int, int]]] | None:
    """Where each entry starts and each extension lies ((name, start, end)) in an index file of git's, or None when
    data is not one read with that hash length."""
    if len(data) < 12 + hashlen or data[:4] != b"DIRC":
        return None
    version, count = struct.unpack_from(">II", data, 4)
    if version not in (2, 3, 4):
        return None
    end = len(data) - hashlen
    starts: list[int] = []
    pos = 12
    try:
        for _ in range(count):
            starts.append(pos)
            flags = struct.unpack_from(">H", data, pos + 40 + hashlen)[0]
            p = pos + 42 + hashlen + (2 if flags & 0x4000 else 0)  # git reads the extended flags in any version
            if version == 4:
                while data[p] & 0x80:  # the varint of how much of the previous name to drop
                    p += 1
                pos = data.index(b"\0", p + 1) + 1
            else:
                z = data.index(b"\0", p) if flags & 0xFFF == 0xFFF else p + (flags & 0xFFF)
                pos += (z - pos + 8) & ~7
            if pos > end:
                return None
    except (IndexError, ValueError, struct.error):
        return None
    exts = []
    while pos + 8 <= end:  # as git reads them: fewer than 8 bytes left before the checksum are no extension
        size = struct.unpack_from(">I", data, pos + 4)[0]
        if pos + 8 + size > end:
            return None
        exts.append((data[pos : pos + 4], pos, pos + 8 + size))
        pos += 8 + size
    if pos < end:
        exts.append((b"", pos, end))  # git's loop stops short of them: kept as they are
    return starts, exts


class Unreadable(ValueError):
    """An index file this module cannot read as git does."""


def _kept(name: bytes) -> bool:
    return name in _KEEP or (name != b"" and not b"A" <= name[:1] <= b"Z")


def _eoie(data: bytes, hashlen: int, exts: list[tuple[bytes, int, int]], entries_end: int) -> None:
    """Unreadable where the bytes before the checksum read as an end-of-index-entries extension other than a true
    one: git, reading with threads (`index.threads`), takes the extensions from where that one says."""
    size = 4 + hashlen
    at = len(data) - hashlen - 8 - size
    if at < 12 or data[at : at + 4] != b"EOIE" or struct.unpack_from(">I", data, at + 4)[0] != size:
        return
    true = bool(exts) and exts[-1][0] == b"EOIE" and exts[-1][1] == at
    if not true or struct.unpack_from(">I", data, at + 8)[0] != entries_end:
        raise Unreadable("an end-of-entries extension that points git elsewhere")


def strip(data: bytes, written: int) -> bytes | None:
    """data without the caches and the extensions git skips (the module's docstring), its racily clean entries
    smudged as git does, its checksum made anew (kept all zero where git skipped it); None when there is nothing to
    drop, or the index is sparse (its directory entries need the cached trees); Unreadable when data is not an index
    this reads as git does. written: the index file's mtime in seconds (git built without nanoseconds compares
    those: the wider test)."""
    for hashlen in (20, 32):
        found = layout(data, hashlen)
        if found is not None:
            break
    else:
        raise Unreadable("not an index file git writes")
    starts, exts = found
    entries_end = exts[0][1] if exts else len(data) - hashlen
    _eoie(data, hashlen, exts, entries_end)
    if _SPARSE in {name for name, _, _ in exts} or all(_kept(name) for name, _, _ in exts):
        return None
    out = bytearray(data[:entries_end])
    read = _MTIME_MODE.unpack_from
    for pos in starts:
        mtime, mode = read(out, pos + 8)
        if mtime >= written and mode & 0o170000 != 0o160000:  # git's racy check (gitlinks are never racy)
            struct.pack_into(">I", out, pos + 36, 0)
    for name, start, end in exts:
        if _kept(name):
            out += data[start:end]
    trailer = data[len(data) - hashlen :]
    if trailer == bytes(hashlen):  # index.skipHash: git wrote none and checks none
        new = bytes(out + trailer)
    else:
        import hashlib  # here, not at the top: OpenSSL's ~3 ms load at every session's end, for an index rewritten

        new = bytes(out + (hashlib.sha1 if hashlen == 20 else hashlib.sha256)(out).digest())
    _eoie(new, hashlen, [], entries_end)  # what is kept may end in bytes that read as one
    return new


def drop(gitdir: str, deadline: float, tree: str = "") -> str | None:
    """Drop the caches from the index file in gitdir, under git's index.lock (waited for until deadline); None when
    done or nothing was there, else why not. An index in a form git reads and this does not (bytes git skips, a flag
    git takes in any version: fifty-second red team, F1) is first written anew by git in tree (its work tree): never
    left unread and unsaid."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        d = os.open(gitdir, flags)
    except OSError as e:
        return e.strerror or str(e)
    try:
        try:
            return _drop(d, deadline)
        except Unreadable:
            if not tree:
                return "git's index there is in a form ai-sandbox cannot read"
        from ai_sandbox.errors import SandboxError
        from ai_sandbox.git.run import _run

        try:
            proc = _run(
                ["update-index", "-q", "--force-write-index"], tree, timeout=max(1.0, deadline - time.monotonic())
            )
        except SandboxError as e:
            return e.message
        if proc.returncode != 0:
            return os.fsdecode(proc.stderr).strip().splitlines()[0] if proc.stderr.strip() else "git could not write it"
        try:
            return _drop(d, deadline)
        except Unreadable:
            return "git's index there is in a form ai-sandbox cannot read, even as git writes it"
    finally:
        os.close(d)


def _drop(d: int, deadline: float) -> str | None:
    while True:
        try:
            lock = os.open("index.lock", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666, dir_fd=d)
            break
        except FileExistsError:
            if time.monotonic() > deadline:
                return "another git holds its index.lock"
            time.sleep(0.05)
    done = False
    try:
        try:
            fd = os.open("index", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=d)
        except FileNotFoundError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return "it is not a regular file"
            chunks = []
            while chunk := os.read(fd, 1 << 22):
                chunks.append(chunk)
        finally:
            os.close(fd)
        new = strip(b"".join(chunks), st.st_mtime_ns // 1_000_000_000)
        if new is None:
            return None
        os.fchmod(lock, st.st_mode & 0o7777)
        view = memoryview(new)
        while view:
            view = view[os.write(lock, view) :]
        os.rename("index.lock", "index", src_dir_fd=d, dst_dir_fd=d)
        done = True
        return None
    except OSError as e:
        return e.strerror or str(e) if e.errno != errno.ENOENT else None
    finally:  # (Unreadable passes through: the lock is given up for git's own write)
        os.close(lock)
        if not done:
            with contextlib.suppress(OSError):
                os.unlink("index.lock", dir_fd=d)
