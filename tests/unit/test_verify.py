"""The launch check's identity test (verify.swapped) on a plain tree: what the S records say against what a
directory listing shows. Inside a sandbox the same listing sees beneath the masks (tests/security prove it with
the real backends, tests/security/test_between_sessions.py the race it closes)."""

from __future__ import annotations

import ctypes
import os

import pytest

from ai_sandbox import idents, verify
from ai_sandbox.policy import IGNORED, Mask, Policy


def _spec(policy: Policy) -> list[str]:
    seen = idents.take(policy)
    out = []
    for m in policy.masks:
        f = seen.files[m.path]
        d = seen.dirs[idents.dirname(m.path)]
        out.append((f"{f[0]}:{f[1]}" if f else "-:-") + ":" + d.decode() + ":" + m.path)
    return out


def _tree(tmp_path):
    for d in ("svc", "decoy"):
        (tmp_path / d).mkdir()
        (tmp_path / d / ".env").write_text(d)
    return Policy(root=str(tmp_path), in_git=True, masks=[Mask(str(tmp_path / "svc" / ".env"), False, IGNORED, "i")])


def test_the_file_seen_passes(tmp_path):
    assert verify.swapped(_spec(_tree(tmp_path))) is None


def test_a_directory_swapped_with_a_decoy_is_found(tmp_path):
    policy = _tree(tmp_path)
    spec = _spec(policy)
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.renameat2(-100, bytes(tmp_path / "svc"), -100, bytes(tmp_path / "decoy"), 2) == 0  # EXCHANGE
    assert verify.swapped(spec) == str(tmp_path / "svc" / ".env")


def test_a_file_replaced_in_the_same_directory_is_found_by_its_listing(tmp_path):
    policy = _tree(tmp_path)
    spec = _spec(policy)
    os.rename(tmp_path / "decoy" / ".env", tmp_path / "svc" / ".env")
    assert verify.swapped(spec) == str(tmp_path / "svc" / ".env")


def test_a_path_missing_then_is_judged_by_its_directory_alone(tmp_path):
    policy = _tree(tmp_path)
    os.remove(tmp_path / "svc" / ".env")
    spec = _spec(policy)
    assert spec[0].startswith("-:-:")
    (tmp_path / "svc" / ".env").write_text("new")
    assert verify.swapped(spec) is None  # whatever it is now, the mask is on it, in the directory seen
    os.rename(tmp_path / "svc", tmp_path / "old")
    os.mkdir(tmp_path / "svc")
    (tmp_path / "svc" / ".env").write_text("new")
    assert verify.swapped(spec) == str(tmp_path / "svc" / ".env")


def test_a_directory_unchanged_since_the_look_is_not_listed_and_one_changed_after_it_is(tmp_path, monkeypatch):
    import time

    policy = _tree(tmp_path)
    spec = _spec(policy)
    listed: list[str] = []
    real = verify._inodes
    monkeypatch.setattr(verify, "_inodes", lambda fd: listed.append(os.readlink(f"/proc/self/fd/{fd}")) or real(fd))
    assert verify.swapped(spec, time.time_ns() + 10 * verify.SLACK) is None and listed == []
    look = time.time_ns()
    os.rename(tmp_path / "decoy" / ".env", tmp_path / "svc" / ".env")  # after the look: its directory changed
    assert verify.swapped(spec, look) == str(tmp_path / "svc" / ".env") and listed == [str(tmp_path / "svc")]


def test_a_writable_mount_below_a_read_only_place_is_refused_unless_a_place_allows_it(monkeypatch):
    """Write containment's proof (X records): the read-only place itself, then every writable mount below it, judged
    by the most specific place above it; one the mount table lists but a later mount covers is judged by what a path
    reaches (firejail leaves such under its /)."""
    monkeypatch.setattr(
        verify.os, "statvfs", lambda p: type("S", (), {"f_flag": 0 if p != "/h" else verify.os.ST_RDONLY})
    )
    records = [("X", "/h"), ("O", "/h/.cache"), ("X", "/h/.cache/ai"), ("M", "/h/p/.env")]
    assert verify._not_read_only("/h", records, ["/h/.cache", "/h/p/.env", "/proc"]) is None
    assert "/h/.local" in verify._not_read_only("/h", records, ["/h/.local"])
    assert "/h/.cache/ai/x" in verify._not_read_only("/h", records, ["/h/.cache/ai/x"])
    monkeypatch.setattr(verify.os, "statvfs", lambda p: type("S", (), {"f_flag": 0}))
    assert "/h is writable" in verify._not_read_only("/h", records, [])


def test_mountinfo_escapes_are_read_back():
    assert verify._unescape(b"/a\\040b\\134c") == "/a b\\c"


def test_each_mask_is_looked_at_once(tmp_path, monkeypatch):
    """The check runs inside every sandbox before the agent starts: a monorepo's 1,000 masks were looked at four
    times each (present, masked, present again, its directory), 15 of its 36 ms; then twice, a mask with an S
    record being stat'ed once as a mask and again as a path the launch saw (~400 lookups for nothing on 400 masks).
    One look at each mask, through its directory opened once: that all three tests still see what they saw is
    test_verify's and tests/security's to prove."""
    mask = tmp_path / "mask"
    mask.write_text("")
    masks = []
    for i in range(30):
        d = tmp_path / f"svc{i}"
        d.mkdir()
        os.link(mask, d / ".env")  # one inode: each reads as firejail's mask file
        masks.append(Mask(str(d / ".env"), False, IGNORED, "i"))
    policy = Policy(root=str(tmp_path), in_git=True, masks=masks)
    records = [("M", m.path) for m in masks] + [("S", s) for s in _spec(policy)]
    monkeypatch.setattr(verify, "MASK_FILE", str(mask))
    calls: list[str] = []
    for name in ("lstat", "stat"):
        real = getattr(os, name)
        monkeypatch.setattr(verify.os, name, lambda p, *a, _r=real, _n=name, **k: calls.append(p) or _r(p, *a, **k))
    assert verify.mask_problems(records) is None
    assert len(calls) <= len(masks) + 2, len(calls)


def _flip(a, b):
    libc = ctypes.CDLL(None, use_errno=True)
    assert libc.renameat2(-100, bytes(a), -100, bytes(b), 2) == 0  # RENAME_EXCHANGE


def test_a_directory_flipped_while_the_check_looks_never_passes(tmp_path, monkeypatch):
    """Thirty-third red team: a process outside the sandbox flipped `a` and a decoy in a loop while launches ran. A
    mask mounted while they were swapped lands on the decoy's file; the check took the path's lstat while swapped
    (the mask: passed) and the directory's after the swap back (the one seen: passed), and the agent read the real
    file (bwrap, 2 launches in 95). Here the mask is on the decoy's file, and the flip happens before any of the
    check's looks and is undone before any later one: every interleaving must refuse. The path and its directory
    are looked at through one opened directory, so both looks see the same directory."""
    mask = tmp_path / "mask"
    mask.write_text("")
    for d in ("a", "decoy"):
        (tmp_path / d).mkdir()
    (tmp_path / "a" / "secret.txt").write_text("SECRET")
    os.link(mask, tmp_path / "decoy" / "secret.txt")  # the mask, on the decoy's file
    secret = str(tmp_path / "a" / "secret.txt")
    policy = Policy(root=str(tmp_path), in_git=True, masks=[Mask(secret, False, IGNORED, "i")])
    records = [("M", secret)] + [("S", s) for s in _spec(policy)]
    monkeypatch.setattr(verify, "MASK_FILE", str(mask))
    monkeypatch.setattr(verify, "mount_tops", lambda path="": {})
    looks = ("lstat", "stat", "open", "fstat", "scandir", "listdir")
    real = {name: getattr(os, name) for name in looks}
    step, flips = [0], [0]
    flip_at: list[int] = []

    def counted(name):
        def look(*a, **k):
            if step[0] in flip_at:
                _flip(tmp_path / "a", tmp_path / "decoy")
                flips[0] += 1
            step[0] += 1
            return real[name](*a, **k)

        return look

    for name in looks:
        monkeypatch.setattr(os, name, counted(name))
    try:
        for first in range(8):
            for last in range(first + 1, 10):
                step[0], flips[0], flip_at[:] = 0, 0, [first, last]
                passed = verify.mask_problems(records) is None
                if flips[0] % 2:  # the check ended with the directories still swapped: undo it
                    _flip(tmp_path / "a", tmp_path / "decoy")
                assert not passed, (first, last)
    finally:
        for name in looks:
            monkeypatch.setattr(os, name, real[name])
    assert (tmp_path / "a" / "secret.txt").read_text() == "SECRET"  # the tree as it was


def test_read_regular_reads_no_more_than_its_limit_from_a_file_that_says_it_is_smaller():
    """A file can hold more than its size said when it was opened (one that grows while read; /proc's files say
    0 bytes): past the limit, read_regular refuses rather than reading on."""
    assert len(verify.read_regular("/proc/self/maps", 1 << 20)) > 10
    with pytest.raises(OSError, match="larger than 10 bytes"):
        verify.read_regular("/proc/self/maps", 10)
