"""The caches dropped from git's index file (indexcache.py), on indexes real git wrote in every form it writes
(versions 2, 3 and 4, long names, split, SHA-256, no checksum, untracked cache): what git reads of the result is what it read before,
less the caches (the forgery through the sandbox: tests/security/test_forged_objects.py)."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import time
from pathlib import Path

import pytest

from ai_sandbox import indexcache
from tests.unit.test_replacerefs import _git  # git with a fixed identity, no system or user config


def _make(tmp_path: Path, *init: str) -> Path:
    r = tmp_path / "r"
    r.mkdir()
    _git(r, "init", "-q", *init)
    for p in ("d/a", "d/e/b", "c", "x" * 200 + "/" + "y" * 201):
        (r / p).parent.mkdir(parents=True, exist_ok=True)
        (r / p).write_text(p[:10] + "\n")
    _git(r, "add", ".")
    _git(r, "commit", "-qm", "a")
    (r / "d" / "a").write_text("staged\n")
    _git(r, "add", "d/a")
    _git(r, "write-tree")  # the cached trees, complete
    (r / "new").write_text("n\n")
    _git(r, "add", "-N", "new")  # intent-to-add: an extended flag (version 3)
    past = time.time() - 10
    for p in r.rglob("*"):
        if ".git" not in p.parts:
            os.utime(p, (past, past))
    # no entry racy: what git lists is unchanged but for the caches (1: the intent-to-add entry "needs update")
    subprocess.run(["git", "-C", str(r), "update-index", "-q", "--really-refresh"], check=False)
    return r


FORMS = {
    "v2": (),
    "v4": ("-c", "index.version=4"),
    "sha256": ("--object-format=sha256",),
}


def _listing(r: Path) -> str:
    return _git(r, "ls-files", "-s", "--debug") + "\n" + _git(r, "status", "--porcelain") + _git(r, "diff", "--cached")


@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("how", ["plain", "split", "untracked"])
def test_git_reads_the_same_index_less_its_caches(tmp_path, form, how):
    r = _make(tmp_path, *(FORMS[form] if form == "sha256" else ()))
    if form == "v4":
        _git(r, "update-index", "--index-version", "4")
    if how == "split":
        _git(r, "update-index", "--split-index")
    elif how == "untracked":
        _git(r, "update-index", "--untracked-cache")
        _git(r, "-c", "core.untrackedCache=true", "status")
    index = r / ".git" / "index"
    before = _listing(r)
    data = index.read_bytes()
    assert b"TREE" in data
    assert indexcache.drop(str(r / ".git"), time.monotonic() + 1) is None
    after = index.read_bytes()
    assert b"TREE" not in after and b"UNTR" not in after and len(after) < len(data)
    assert _listing(r) == before
    _git(r, "fsck")
    assert indexcache.drop(str(r / ".git"), time.monotonic() + 1) is None  # nothing left to drop
    assert index.read_bytes() == after
    _git(r, "commit", "-qm", "b")  # git writes its cached trees again
    assert b"TREE" in index.read_bytes()


def test_a_racily_clean_entry_is_smudged_as_git_does(tmp_path):
    """An entry whose file changed in the index's second: its size is cleared, so git reads the file again rather
    than trust a stat the rewritten index's later time would make look settled."""
    r = _make(tmp_path)
    index = r / ".git" / "index"
    st = index.stat()
    os.utime(r / "c", ns=(st.st_mtime_ns, st.st_mtime_ns))
    # c's recorded mtime now the index's second (1: the intent-to-add entry "needs update")
    subprocess.run(["git", "-C", str(r), "update-index", "-q", "--refresh"], check=False)
    os.utime(index, ns=(st.st_mtime_ns, st.st_mtime_ns))
    data = index.read_bytes()
    new = indexcache.strip(data, st.st_mtime_ns // 1_000_000_000)
    assert new is not None
    sizes = subprocess.run(["git", "-C", str(r), "ls-files", "--debug", "c"], capture_output=True, text=True).stdout
    index.write_bytes(new)
    after = _git(r, "ls-files", "--debug", "c")
    assert "size: 0" in after and "size: 0" not in sizes, (sizes, after)
    assert _git(r, "status", "--porcelain", "c") == ""  # git reads it again: still clean


def test_an_index_git_wrote_no_checksum_for_keeps_none(tmp_path):
    """index.skipHash (git 2.40): the trailer is all zero, and git checks none; the result's is zero too."""
    data = (_make(tmp_path) / ".git" / "index").read_bytes()
    zeroed = data[:-20] + bytes(20)
    new, plain = indexcache.strip(zeroed, 0), indexcache.strip(data, 0)
    assert new is not None and plain is not None
    assert new[-20:] == bytes(20) and new[:-20] == plain[:-20] and plain[-20:] != bytes(20)


def test_what_is_not_an_index_is_unreadable(tmp_path):
    for data in (b"", b"DIRC", b"DIRC\0\0\0\2\0\0\0\5" + bytes(40), b"not an index at all" * 10):
        with pytest.raises(indexcache.Unreadable):
            indexcache.strip(data, 0)


def _resum(data: bytes) -> bytes:
    return data[:-20] + hashlib.sha1(data[:-20]).digest()


@pytest.mark.parametrize("pad", [1, 4, 7])
def test_bytes_git_skips_before_the_checksum_do_not_keep_the_caches(tmp_path, pad):
    """Fifty-second red team, F1a: git's extension loop stops with fewer than 8 bytes left before the checksum, and
    reads the index; the parser refused it, and the forged cached trees stayed, unsaid."""
    r = _make(tmp_path)
    index = r / ".git" / "index"
    index.write_bytes(_resum(index.read_bytes()[:-20] + bytes(pad) + bytes(20)))
    before = _listing(r)  # git reads it
    assert indexcache.drop(str(r / ".git"), time.monotonic() + 1) is None
    assert b"TREE" not in index.read_bytes() and _listing(r) == before


def test_an_extended_flag_in_a_version_2_entry_is_read_as_git_reads_it(tmp_path):
    """Fifty-second red team, F1b: git reads an entry's extended flags in any version; the parser looked for them
    from version 3 only, lost its way, and left the forged cached trees."""
    r = _make(tmp_path)
    _git(r, "rm", "-q", "--cached", "new")  # no intent-to-add entry: git writes version 2
    index = r / ".git" / "index"
    data = bytearray(index.read_bytes())
    assert data[4:8] == b"\0\0\0\2"
    pos = 12  # the first entry: its flags get the extended bit, two zero bytes of extended flags after them
    flags = struct.unpack_from(">H", data, pos + 60)[0]
    name = data.index(b"\0", pos + 62) - (pos + 62)
    old_len, new_len = (62 + name + 8) & ~7, (64 + name + 8) & ~7
    entry = (
        bytes(data[pos : pos + 60]) + struct.pack(">HH", flags | 0x4000, 0) + bytes(data[pos + 62 : pos + 62 + name])
    )
    entry += bytes(new_len - len(entry))
    index.write_bytes(_resum(bytes(data[:pos]) + entry + bytes(data[pos + old_len :])))
    before = _listing(r)
    assert indexcache.drop(str(r / ".git"), time.monotonic() + 1) is None
    assert b"TREE" not in index.read_bytes() and _listing(r) == before


def test_an_index_this_cannot_read_is_written_by_git_first(tmp_path, monkeypatch):
    """Whatever form git reads and this does not: git writes the index anew, then the caches are dropped; where even
    that fails, the reason is said (never nothing)."""
    r = _make(tmp_path)
    real = indexcache.strip
    calls = []

    def once(data: bytes, written: int) -> bytes | None:
        calls.append(1)
        if len(calls) == 1:
            raise indexcache.Unreadable("as if")
        return real(data, written)

    monkeypatch.setattr(indexcache, "strip", once)
    assert indexcache.drop(str(r / ".git"), time.monotonic() + 5, str(r)) is None
    assert len(calls) == 2 and b"TREE" not in (r / ".git" / "index").read_bytes()
    monkeypatch.setattr(indexcache, "strip", lambda data, written: (_ for _ in ()).throw(indexcache.Unreadable("x")))
    why = indexcache.drop(str(r / ".git"), time.monotonic() + 5, str(r))
    assert why is not None and "cannot read" in why


def test_a_sparse_index_is_left(tmp_path):
    r = _make(tmp_path)
    _git(r, "sparse-checkout", "init", "--cone", "--sparse-index")
    _git(r, "sparse-checkout", "set", "d")
    data = (r / ".git" / "index").read_bytes()
    assert b"sdir" in data
    assert indexcache.strip(data, 0) is None


def test_an_index_lock_held_is_said(tmp_path):
    r = _make(tmp_path)
    (r / ".git" / "index.lock").write_bytes(b"")
    assert indexcache.drop(str(r / ".git"), time.monotonic() + 0.1) == "another git holds its index.lock"
    assert (r / ".git" / "index.lock").exists()


def _ext(name: bytes, body: bytes) -> bytes:
    return name + struct.pack(">I", len(body)) + body


def test_cached_trees_hidden_in_an_extension_git_skips_are_dropped(tmp_path):
    """Fifty-third red team, F1: the cached trees inside an unknown optional extension (`Zpad`), with an
    end-of-entries extension after them that points at them: git reading with threads (`index.threads`) takes the
    extensions from there; the parser saw only `Zpad`, and dropped nothing. Both go now."""
    r = _make(tmp_path)
    index = r / ".git" / "index"
    data = index.read_bytes()
    starts, exts = indexcache.layout(data, 20) or ([], [])
    end = exts[0][1]
    tree = next(data[s:e] for n, s, e in exts if n == b"TREE")
    eoie = _ext(b"EOIE", struct.pack(">I", end + 8) + hashlib.sha1(tree[:8]).digest())
    index.write_bytes(_resum(data[:end] + _ext(b"Zpad", tree + eoie) + bytes(20)))
    before = _git(r, "-c", "index.threads=2", "ls-files", "-s")
    with pytest.raises(indexcache.Unreadable):  # the end-of-entries extension is not the true one
        indexcache.strip(index.read_bytes(), 0)
    assert indexcache.drop(str(r / ".git"), time.monotonic() + 5, str(r)) is None  # git writes it anew, then this
    new = index.read_bytes()
    assert b"Zpad" not in new and b"TREE" not in new and b"EOIE" not in new
    assert _git(r, "-c", "index.threads=2", "ls-files", "-s") == before


def test_kept_bytes_that_read_as_an_end_of_entries_extension_are_refused(tmp_path):
    """An end-of-entries extension that is not the true one (here inside what is kept: a required extension git
    would refuse anyway) makes the index unreadable to this: git writes it anew first."""
    r = _make(tmp_path)
    data = (r / ".git" / "index").read_bytes()
    starts, exts = indexcache.layout(data, 20) or ([], [])
    end = exts[0][1]
    fake = _ext(b"EOIE", struct.pack(">I", 12) + bytes(20))
    with pytest.raises(indexcache.Unreadable):
        indexcache.strip(_resum(data[:end] + _ext(b"zzzz", fake) + bytes(20)), 0)
    with pytest.raises(indexcache.Unreadable):  # a true one pointing elsewhere than the end of the entries
        indexcache.strip(_resum(data[:end] + _ext(b"EOIE", struct.pack(">I", 12) + bytes(20)) + bytes(20)), 0)
