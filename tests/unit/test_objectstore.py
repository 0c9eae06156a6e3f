"""Object files a session forged (objectstore.py), on real repositories written by real git: what is read, what
counts as forged, what the end removes (the forgery through the sandbox: tests/security/test_forged_objects.py)."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import time
import zlib
from pathlib import Path

import pytest

from ai_sandbox import objectstore
from tests.unit.test_replacerefs import _git  # git with a fixed identity, no system or user config


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "r"
    r.mkdir()
    _git(r, "init", "-q")
    (r / "d").mkdir()
    (r / "d" / "a").write_text("a\n")
    _git(r, "add", "d")
    _git(r, "commit", "-qm", "a")
    return r


def _objects(repo: Path) -> str:
    return os.path.realpath(repo / ".git" / "objects")


def _end(repo: Path, before: objectstore.Stores, since: int, capsys: pytest.CaptureFixture[str]) -> str:
    objectstore.undo(before, str(repo), str(repo), since, set())
    return capsys.readouterr().err


def _loose(data: bytes, kind: bytes = b"blob") -> tuple[str, bytes]:
    raw = kind + b" %d\0" % len(data) + data
    return hashlib.sha1(raw).hexdigest(), zlib.compress(raw)


def test_sound_reads_what_git_names(tmp_path):
    name, packed = _loose(b"hello\n")
    f = tmp_path / "o"
    for content, want in ((packed, True), (packed[:-3], False), (packed + b"x", False), (b"not zlib", False)):
        f.write_bytes(content)
        fd = os.open(f, os.O_RDONLY)
        try:
            assert objectstore.sound(fd, name) is want, content
        finally:
            os.close(fd)
    other, _ = _loose(b"other\n")
    f.write_bytes(packed)
    fd = os.open(f, os.O_RDONLY)
    assert objectstore.sound(fd, other) is False
    os.close(fd)


def test_objects_written_by_git_are_left_and_nothing_is_said(repo, capsys):
    before = objectstore.look([_objects(repo)])
    since = time.time_ns() - 10_000_000
    (repo / "d" / "b").write_text("b\n")
    _git(repo, "add", "d")
    _git(repo, "commit", "-qm", "b")
    _git(repo, "gc", "-q")
    _git(repo, "multi-pack-index", "write")  # a cache: removed, and said
    (repo / "e").write_text("e\n")
    _git(repo, "add", "e")
    err = _end(repo, before, since, capsys)
    assert "object files" not in err and "index of packs" not in err, err
    assert "multi-pack-index" in err and not (repo / ".git/objects/pack/multi-pack-index").exists()
    _git(repo, "fsck")


def test_an_old_forged_file_is_not_read_unless_its_directory_moved(repo, capsys):
    """A file's change time tells what the session wrote; one from before the launch is read only in a directory
    the session made or moved in (its files keep their times)."""
    old = _git(repo, "rev-parse", "HEAD:d")
    path = repo / ".git" / "objects" / old[:2] / old[2:]
    os.chmod(path, 0o644)
    path.write_bytes(_loose(b"forged\n", b"tree")[1])
    before = objectstore.look([_objects(repo)])
    time.sleep(0.02)
    since = time.time_ns() - 10_000_000
    assert _end(repo, before, since, capsys) == ""  # from before the launch: the launch's own look is not this
    os.rename(path.parent, repo / "x")
    os.rename(repo / "x", path.parent)  # the directory moved: its ctime is new, its file's is not
    err = _end(repo, before, since, capsys)
    assert "removed object files" in err and f"{old[:2]}/{old[2:]}" in err
    assert not path.exists()


def _forge_idx(idx: Path, old: str, new: str) -> None:
    """The pack index names new's object by old's name (one object in the pack)."""
    data = bytearray(idx.read_bytes())
    i = data.find(bytes.fromhex(new))
    data[i : i + 20] = bytes.fromhex(old)
    first = bytes.fromhex(old)[0]
    for k in range(256):
        struct.pack_into(">I", data, 8 + 4 * k, 1 if k >= first else 0)
    data[-20:] = hashlib.sha1(bytes(data[:-20])).digest()
    os.chmod(idx, 0o644)
    idx.write_bytes(data)


def _staged(repo: Path) -> tuple[str, str]:
    """HEAD's subtree d and the staged one, with an edit of d/a staged."""
    old = _git(repo, "rev-parse", "HEAD:d")
    (repo / "d" / "a").write_text("evil\n")
    _git(repo, "add", "d")
    return old, _git(repo, "write-tree", "--prefix=d/")


def _pack(repo: Path, oid: str) -> str:
    """A pack of the one object, written by git as objects/pack/pack-<name>.{pack,idx}; its name."""
    cmd = ["git", "-C", str(repo), "pack-objects", "-q", str(repo / ".git" / "objects" / "pack" / "pack")]
    return subprocess.run(cmd, input=oid + "\n", capture_output=True, text=True, check=True).stdout.strip()


def test_a_pack_whose_index_lies_loses_its_index(repo, capsys):
    old, new = _staged(repo)
    before = objectstore.look([_objects(repo)])
    since = time.time_ns() - 10_000_000
    name = _pack(repo, new)
    pack = repo / ".git" / "objects" / "pack" / f"pack-{name}"
    _forge_idx(Path(f"{pack}.idx"), old, new)
    err = _end(repo, before, since, capsys)
    assert "removed the index of packs" in err and name in err, err
    assert not Path(f"{pack}.idx").exists() and Path(f"{pack}.pack").exists()  # git index-pack writes it again
    _git(repo, "index-pack", f"{pack}.pack")
    assert _end(repo, before, since, capsys) == ""


def test_a_link_for_the_object_directory_is_named_not_followed(repo, tmp_path, capsys):
    before = objectstore.look([_objects(repo)])
    since = time.time_ns() - 10_000_000
    objects = repo / ".git" / "objects"
    os.rename(objects, repo / ".git" / "o2")
    os.symlink("o2", objects)
    err = _end(repo, before, since, capsys)
    assert "did not check" in err and "a link" in err, err


@pytest.mark.parametrize("name", ["evil", "pack-" + "AB" * 20, "pack-x\nnewline"])
def test_a_pack_by_any_name_is_checked(repo, capsys, name):
    """Fifty-second red team, F2: git loads every .idx in objects/pack, whatever its name; one named `evil.idx`
    (or in capitals) was never checked, and its lie hid the staged edit."""
    old, new = _staged(repo)
    before = objectstore.look([_objects(repo)])
    since = time.time_ns() - 10_000_000
    made = _pack(repo, new)
    base = repo / ".git" / "objects" / "pack" / "pack"
    for ext in ("pack", "idx"):
        os.rename(f"{base}-{made}.{ext}", base.parent / f"{name}.{ext}")
    _forge_idx(base.parent / f"{name}.idx", old, new)
    err = _end(repo, before, since, capsys)
    assert "removed the index of packs" in err, err
    assert not (base.parent / f"{name}.idx").exists() and (base.parent / f"{name}.pack").exists()


def _bomb(path: Path, megabytes: int) -> None:
    """A loose object's file that inflates ~1,000-fold: a blob header claiming 1 byte, then zeros."""
    z = zlib.compressobj(9)
    zeros = bytes(1 << 20)
    head = z.compress(b"blob 1\0x") + z.compress(zeros) + z.flush(zlib.Z_FULL_FLUSH)
    block = z.compress(zeros) + z.flush(zlib.Z_FULL_FLUSH)  # after a full flush, each block's bytes are the same
    path.write_bytes(head + block * ((megabytes << 20) // len(block)) + z.flush())


def test_a_zlib_bomb_is_read_no_further_than_its_header_says(repo, capsys):
    """Fifty-second red team, F3: a loose object inflating ~1 GB per MB held the end for minutes (5 min 18 s for
    100 MB). Inflating stops past the size the header gives."""
    before = objectstore.look([_objects(repo)])
    since = time.time_ns() - 10_000_000
    fan = repo / ".git" / "objects" / "00"
    fan.mkdir(exist_ok=True)
    _bomb(fan / ("0" * 38), 4)
    start = time.monotonic()
    err = _end(repo, before, since, capsys)
    assert time.monotonic() - start < 5, err  # it took 17.5 s for 4 MB
    assert "removed object files" in err and "00/" + "0" * 38 in err


def test_an_object_past_the_budget_is_said_unchecked(repo, capsys, monkeypatch):
    before = objectstore.look([_objects(repo)])
    since = time.time_ns() - 10_000_000
    (repo / "b").write_text("b\n" * 1000)
    _git(repo, "add", "b")
    monkeypatch.setattr(objectstore, "BUDGET", -1.0)
    err = _end(repo, before, since, capsys)
    assert "did not finish checking" in err and " loose, 0 packs left" in err, err


def test_sound_refuses_what_git_would_not_write(tmp_path):
    f = tmp_path / "o"
    for raw in (b"blob 01\0x", b"blob x\0x", b"thing 1\0x", b"blob 2\0x", b"blob 1\0xy", b"blob" + b"1" * 100):
        f.write_bytes(zlib.compress(raw))
        fd = os.open(f, os.O_RDONLY)
        try:
            assert objectstore.sound(fd, hashlib.sha1(raw).hexdigest()) is False, raw
        finally:
            os.close(fd)
