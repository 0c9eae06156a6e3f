"""What a session leaves in the git index to hide its edits (hiddenedits.py): the marks the end takes for the
session's, from two listings, and the entries whose stat data it looks at again."""

from __future__ import annotations

import subprocess

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from ai_sandbox.hiddenedits import ASSUME, SKIP, Entry, changed, compare, entries, looked_at, marked

A, B, C = "a" * 40, "b" * 40, "c" * 40


def _listing(*entries: tuple[str, str, str]) -> bytes:
    """(tag, object id, path) -> an `ls-files -z --stage -t -v` listing."""
    return b"".join(f"{tag} 100644 {oid} 0\t{path}\0".encode() for tag, oid, path in entries)


def test_each_tag_git_gives_a_mark_is_read_and_an_unmarked_index_is_empty():
    got = marked(_listing(("h", A, "a"), ("S", B, "b"), ("s", C, "c"), ("H", A, "d")))
    assert got == {"a": (frozenset({ASSUME}), A), "b": (frozenset({SKIP}), B), "c": (frozenset({ASSUME, SKIP}), C)}
    assert marked(_listing(("H", A, "x"), ("H", B, "hs x"))) == {}
    assert marked(b"") == {}


def test_a_tag_inside_a_name_or_an_unmerged_stage_is_not_a_mark():
    listing = _listing(("H", A, "x\ts 100644 y")) + b"h 100644 " + B.encode() + b" 2\tconflict\0"
    assert marked(listing) == {}


def test_the_tags_are_the_ones_git_prints(tmp_path):
    """Measured, not assumed: git's own listing of an index with each mark (lowercase: assume-unchanged)."""
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@e"]
    subprocess.run([*git, "init", "-q"], check=True)
    for name in ("a", "b", "c", "d"):
        (tmp_path / name).write_text(name)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "update-index", "--assume-unchanged", "a", "c"], check=True)
    subprocess.run([*git, "update-index", "--skip-worktree", "b", "c"], check=True)
    out = subprocess.run([*git, "ls-files", "-z", "--stage", "-t", "-v"], capture_output=True, check=True).stdout
    assert {p: bits for p, (bits, _) in marked(out).items()} == {
        "a": {ASSUME}, "b": {SKIP}, "c": {ASSUME, SKIP}
    }  # fmt: skip


def _now(listing: bytes) -> dict[str, Entry]:
    """The end's entries for a plain listing: every one a plain entry, its stat recorded at 0."""
    out = {}
    for rec in listing.split(b"\0"):
        if rec:
            meta, _, path = rec.partition(b"\t")
            tag, mode, oid, _ = meta.split(b" ")
            out[path.decode()] = Entry(tag, mode, oid.decode(), 0, 0)
    return out


def test_the_sessions_marks_are_cleared_and_the_users_stay():
    before = marked(_listing(("h", A, "mine"), ("H", B, "b")))
    now_listing = _listing(("h", A, "mine"), ("h", B, "b"), ("S", C, "c"), ("S", C, "gone"))
    found = compare(before, _now(now_listing), {"mine": True, "b": True, "c": True, "gone": False}, set())
    assert found.clear == {ASSUME: ["b"], SKIP: ["c"]} and found.doubtful == []


def test_a_mark_git_carried_with_git_mv_stays_and_one_left_at_its_path_is_no_excuse():
    before = marked(_listing(("h", A, "mine"), ("H", A, "same")))
    moved = _listing(("h", A, "mine2"), ("H", A, "same"))
    assert compare(before, _now(moved), {}, set()).clear == {}
    # the user's mark taken off where it is, and another entry with that object marked: not a move
    off = _listing(("H", A, "mine"), ("h", A, "same"))
    assert compare(before, _now(off), {}, set()).clear == {ASSUME: ["same"]}


def test_a_mark_carried_off_a_path_another_entry_came_to_stays():
    """`git mv e tmp && git mv d e`: the user's mark went to tmp with its object, d's entry came to e (its own mark,
    ai-sandbox's, cleared by skipworktree's end). A first version took e, still listed, for a mark not moved."""
    before = marked(_listing(("S", A, "e"), ("S", B, "d")))
    now = _listing(("H", B, "e"), ("S", A, "tmp"))
    assert compare(before, _now(now), {}, set()).clear == {}


def test_more_marks_on_a_moved_marks_object_than_marks_moved_stay_and_are_named():
    before = marked(_listing(("h", A, "mine")))
    now = _listing(("h", A, "one"), ("h", A, "two"))
    found = compare(before, _now(now), {}, set())
    assert found.clear == {} and found.doubtful == ["one", "two"]


def test_ai_sandboxs_own_marks_are_left_to_it_and_a_new_mark_on_top_of_the_users_is_the_sessions():
    before = marked(_listing(("S", A, "hidden"), ("h", B, "mine")))
    now = _listing(("s", A, "hidden"), ("s", B, "mine"), ("S", C, "ours"))
    found = compare(before, _now(now), {}, {"ours"})
    assert found.clear == {ASSUME: ["hidden"], SKIP: ["mine"]}


@pytest.mark.parametrize("present", [True, False])
def test_an_assume_unchanged_mark_is_cleared_whether_the_file_is_there_or_not(present):
    now = _listing(("h", A, "f"), ("S", B, "g"))
    found = compare({}, _now(now), {"f": present, "g": present}, set())
    assert found.clear == ({ASSUME: ["f"], SKIP: ["g"]} if present else {ASSUME: ["f"]})


_PATHS = st.sampled_from(["a", "b", "c", "d/e", "d/f"])
_ENTRY = st.tuples(st.sampled_from(["H", "h", "S", "s"]), st.sampled_from([A, B, C]))


@given(st.dictionaries(_PATHS, _ENTRY), st.dictionaries(_PATHS, _ENTRY), st.sets(_PATHS))
def test_every_mark_is_either_as_at_the_launch_carried_ours_missing_cleared_or_named(before_d, now_d, ours):
    """Whatever the session leaves: no new mark on a present file is silently kept."""
    before_l = _listing(*((t, o, p) for p, (t, o) in sorted(before_d.items())))
    now_l = _listing(*((t, o, p) for p, (t, o) in sorted(now_d.items())))
    before, now = marked(before_l), marked(now_l)
    found = compare(before, _now(now_l), {}, ours)
    cleared = {(m, p) for m, ps in found.clear.items() for p in ps}
    now_all = _now(now_l)
    carried_from = {
        (b, o)
        for p, (bits, o) in before.items()
        if p not in now_all or now_all[p].oid != o
        for b in bits - (now[p][0] if p in now else frozenset())
    }
    for p, (bits, oid) in now.items():
        for b in bits - before.get(p, (frozenset(), ""))[0]:
            kept = (b == SKIP and p in ours) or (b, oid) in carried_from
            assert ((b, p) in cleared) != kept or p in found.doubtful, (b, p)
    for b, p in cleared:
        assert b in now[p][0] and b not in before.get(p, (frozenset(), ""))[0]


def _debug(*records: tuple[str, str, str, int, int, str]) -> bytes:
    """(tag, object id, path, stage, ctime in s, flags in hex) -> an `ls-files -z --stage -t -v --debug` listing."""
    return b"".join(
        f"{tag} 100644 {oid} {stage}\t".encode() + path.encode() + b"\0"
        + f"  ctime: {ct}:5\n  mtime: {ct}:5\n  dev: 1\tino: 2\n  uid: 0\tgid: 0\n  size: 3\tflags: {fl}\n".encode()
        for tag, oid, path, stage, ct, fl in records
    )  # fmt: skip


def test_the_debug_listing_is_read_by_its_nuls_whatever_a_name_holds():
    odd = "x\n  ctime: 9:9\nH 100644 " + C + " 0\tfake"
    got = entries(_debug(("H", A, odd, 0, 7, "0"), ("h", B, "b", 0, 8, "8000"), ("H", C, "u", 2, 9, "0")))
    assert got == {
        odd: Entry(b"H", b"100644", A, 7 * 10**9 + 5, 0),
        "b": Entry(b"h", b"100644", B, 8 * 10**9 + 5, 0x8000),
    }
    assert entries(b"") == {}
    for bad in (_debug(("H", A, "a", 0, 7, "0"))[:-3], b"H 100644 " + A.encode() + b" 0\ta", b"junk\0junk"):
        with pytest.raises(ValueError):
            entries(bad)


def test_the_tags_and_fields_are_the_ones_git_prints_with_debug(tmp_path):
    git = ["git", "-C", str(tmp_path)]
    subprocess.run([*git, "init", "-q"], check=True)
    for name in ("a", "b\nc", "i"):
        (tmp_path / name).write_text(name)
    subprocess.run([*git, "add", "a", "b\nc"], check=True)
    subprocess.run([*git, "add", "-N", "i"], check=True)
    subprocess.run([*git, "update-index", "--assume-unchanged", "a"], check=True)
    out = subprocess.run([*git, "ls-files", "-z", "--stage", "-t", "-v", "--debug"], capture_output=True, check=True)
    got = entries(out.stdout)
    assert set(got) == {"a", "b\nc", "i"} and got["a"].tag == b"h" and got["b\nc"].tag == b"H"
    ctime = (tmp_path / "b\nc").stat().st_ctime_ns
    assert got["b\nc"].ctime == ctime and got["b\nc"].flags == 0
    assert got["a"].flags != 0 and got["i"].flags != 0  # a mark, an intent to add: never given new stat data
    assert looked_at(got) == ["b\nc"]


_NAMES = st.sampled_from(["a", "b\nh 100644 x 0\tc", "d\n  ctime: 1795000500:5\n", "e\tf", "g", "h"])
_RECORD = st.tuples(
    st.sampled_from(["H", "h", "S"]), st.sampled_from([A, B]), st.integers(1, 3), st.sampled_from(["0", "4000"])
)


@given(st.dictionaries(_NAMES, _RECORD), st.dictionaries(_NAMES, _RECORD))
@example(  # found by it: a's new stat data is what another entry had, and a piece of base matched on its own
    before={"a": ("H", B, 1, "0"), "b\nh 100644 x 0\tc": ("H", A, 1, "4000")}, after={"a": ("H", B, 1, "4000")}
)
def test_the_entries_that_changed_are_found_without_reading_the_rest(before, after):
    """changed() against reading both listings whole: every entry whose record differs from the launch's (or is new)
    is found, as read whole, whatever the names hold; what it finds beside them is as read whole too."""

    def listing(index: dict[str, tuple[str, str, int, str]]) -> bytes:
        return _debug(*((tag, oid, name, 0, ct, fl) for name, (tag, oid, ct, fl) in sorted(index.items())))

    whole = entries(listing(after))
    got = changed(listing(after), listing(before))
    assert all(got[p] == whole[p] for p in got)
    old = entries(listing(before))
    assert {p for p, e in whole.items() if old.get(p) != e} <= set(got)


def test_an_entry_is_left_alone_for_a_mark_or_an_intent_to_add_only():
    """git's extended bit with no extended flag (0x4000), or an in-memory flag of git's, is no reason: a forged entry
    carrying the extended bit alone was left alone (forty-seventh red team, F1); nor is a mode git reads as a file's,
    written otherwise (1100644: F4)."""
    now = {
        f"{name}": Entry(b"H", mode, A, 10, flags)
        for name, mode, flags in [
            ("plain", b"100644", 0), ("ext", b"100644", 0x4000), ("hashed", b"100644", 1 << 20),
            ("fsmonitor", b"100644", 1 << 21), ("assumed", b"100644", 0x8000), ("ita", b"100644", 0x20004000),
            ("skip", b"100644", 0x40004000), ("odd", b"1100644", 0), ("exe", b"100755", 0), ("link", b"120000", 0),
            ("tree", b"040000", 0), ("module", b"160000", 0), ("junk", b"x", 0),
        ]
    }  # fmt: skip
    assert looked_at(now) == ["exe", "ext", "fsmonitor", "hashed", "link", "odd", "plain"]


def test_past_its_budget_the_end_clears_stat_data_without_reading(tmp_path, monkeypatch):
    """Fifty-fourth red team, F3: the end read each changed entry's file whole (100 sparse files of 64 MB: 61 s),
    with no budget. Past it, the rest have their stat data cleared unread: git reads them once, as it would."""
    import os
    import time

    from ai_sandbox import hiddenedits
    from tests.unit.test_replacerefs import _git

    _git(tmp_path, "init", "-q")
    for n in ("a", "b"):
        (tmp_path / n).write_text(n + "\n")
    _git(tmp_path, "add", "a", "b")
    _git(tmp_path, "commit", "-qm", "a")
    cmd = ["git", "-C", str(tmp_path), "ls-files", "-z", "--stage", "-t", "-v", "--debug"]
    now = entries(subprocess.run(cmd, capture_output=True, check=True).stdout)
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}
    hiddenedits._restat(env, str(tmp_path), now, ["a", "b"], time.monotonic() + 2)
    assert "size: 0" not in _git(tmp_path, "ls-files", "--debug")  # each file is its object: nothing cleared
    monkeypatch.setattr(hiddenedits, "RESTAT_BUDGET", -1.0)
    hiddenedits._restat(env, str(tmp_path), now, ["a", "b"], time.monotonic() + 2)
    assert _git(tmp_path, "ls-files", "--debug").count("size: 0") == 2  # unread, cleared
    assert _git(tmp_path, "status", "--porcelain") == ""  # and git, reading them, finds them as they are


def test_an_entry_staged_anew_since_the_listing_is_never_written_back(tmp_path):
    """Fifty-fifth red team, F1: the user's `git add` while the session ended came back unstaged: the end wrote the
    object it had listed before hashing over it. An entry whose object changed since is the user's, and left."""
    import os
    import time

    from ai_sandbox import hiddenedits
    from tests.unit.test_replacerefs import _git

    _git(tmp_path, "init", "-q")
    (tmp_path / "a").write_text("a\n")
    _git(tmp_path, "add", "a")
    _git(tmp_path, "commit", "-qm", "a")
    cmd = ["git", "-C", str(tmp_path), "ls-files", "-z", "--stage", "-t", "-v", "--debug"]
    now = entries(subprocess.run(cmd, capture_output=True, check=True).stdout)  # what the end listed
    (tmp_path / "a").write_text("yours\n")
    _git(tmp_path, "add", "a")  # the user, meanwhile
    staged = _git(tmp_path, "rev-parse", ":a")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(tmp_path)}
    hiddenedits._restat(env, str(tmp_path), now, ["a"], time.monotonic() + 2)
    assert _git(tmp_path, "rev-parse", ":a") == staged


def test_the_launchs_own_index_writes_move_the_baseline_and_a_later_write_is_never_untouched(tmp_path):
    """settle takes the index as it stands for the launch's own (its marks set, or cleared by the end) and moves
    nothing else of the look; untouched names only the work trees whose index has not been written since: a write
    after the settle (the session's) is never among them, whatever it keeps of the file's size."""
    import time
    from types import SimpleNamespace

    from ai_sandbox import hiddenedits
    from tests.unit.test_replacerefs import _git

    trees = []
    for name in ("one", "two"):
        repo = tmp_path / name
        repo.mkdir()
        _git(repo, "init", "-q")
        (repo / "a").write_text("a\n")
        _git(repo, "add", "a")
        _git(repo, "commit", "-qm", "a")
        trees.append(repo)
    looks = hiddenedits.look(
        str(tmp_path), [SimpleNamespace(prefix=t.name, scan=SimpleNamespace(_index=b"")) for t in trees]
    )
    first = list(looks)
    assert hiddenedits.untouched(looks) == []  # only what this process settled
    _git(trees[0], "update-index", "--skip-worktree", "a")  # the launch's mark
    hiddenedits.settle(looks)
    assert hiddenedits.untouched(looks) == [0, 1]
    for before, after in zip(first, looks, strict=True):
        assert {n: getattr(after, n) for n in before.__annotations__ if n not in ("index", "shared", "settled")} == {
            n: getattr(before, n) for n in before.__annotations__ if n not in ("index", "shared", "settled")
        }
    index = trees[1] / ".git" / "index"
    data = index.read_bytes()
    time.sleep(0.02)  # past the kernel's coarse clock tick, as a session's first write is (the sandbox's start)
    with open(index, "r+b") as f:  # the session's write in place: same inode, same size
        f.write(data)
    assert hiddenedits.untouched(looks) == [0]
    hiddenedits.settle(looks, [0])  # only what the caller names moves on
    assert hiddenedits.untouched(looks) == [0]


def test_an_index_rewritten_in_place_with_the_same_stat_is_never_untouched(tmp_path, monkeypatch):
    """Fifty-sixth red team: on a file system that keeps whole seconds (ext4 with 128-byte inodes, ext3, vfat), the
    session rewrote the index in place within the second of the launch's own write: same inode, size and change
    time. The end took it for unwritten and skipped its check; the staged edit and the mark hidden in it went into
    the user's next `commit -a`. The bytes are compared too."""
    from types import SimpleNamespace

    from ai_sandbox import gitsettings, hiddenedits
    from tests.unit.test_replacerefs import _git

    _git(tmp_path, "init", "-q")
    (tmp_path / "a").write_text("a\n")
    _git(tmp_path, "add", "a")
    _git(tmp_path, "commit", "-qm", "a")
    looks = hiddenedits.look(str(tmp_path), [SimpleNamespace(prefix="", scan=SimpleNamespace(_index=b""))])
    hiddenedits.settle(looks)
    index = tmp_path / ".git" / "index"
    same = looks[0].index
    monkeypatch.setattr(gitsettings, "index_look", lambda root: same)  # the coarse clock: all three kept
    assert hiddenedits.untouched(looks) == [0]
    data = bytearray(index.read_bytes())
    data[12 + 60] ^= 1  # in place, same size: a bit of the first entry's flags (its assume-unchanged mark's word)
    with open(index, "r+b") as f:
        f.write(data)
    assert hiddenedits.untouched(looks) == []
    unsettled = hiddenedits.look(str(tmp_path), [SimpleNamespace(prefix="", scan=SimpleNamespace(_index=b""))])
    with open(index, "r+b") as f:  # and a look never settled (no hidden tracked file): the launch's copy is the base
        f.write(bytes(data[:-1]) + bytes([data[-1] ^ 1]))
    monkeypatch.setattr(gitsettings, "index_look", lambda root: unsettled[0].index)
    assert not hiddenedits._unwritten(unsettled[0], str(tmp_path))


def test_an_index_that_is_a_link_is_never_judged_by_its_stat_alone(tmp_path, monkeypatch):
    """Fifty-seventh red team: a session made .git/index a link to a copy (git follows it, and writes through it).
    The launch cannot copy a link (it opens without following), and the end judged such an index by its stat alone,
    as it does one too large to copy: on a whole-second file system the next session rewrote the link's target in
    place within the second, and its staged edit went unchecked, with no line. The launch now refuses such an index;
    the end still takes one for written."""
    from types import SimpleNamespace

    from ai_sandbox import gitsettings, hiddenedits
    from ai_sandbox.errors import PolicyError
    from tests.unit.test_replacerefs import _git

    _git(tmp_path, "init", "-q")
    (tmp_path / "a").write_text("a\n")
    _git(tmp_path, "add", "a")
    _git(tmp_path, "commit", "-qm", "a")
    trees = [SimpleNamespace(prefix="", scan=SimpleNamespace(_index=b""))]
    [lk] = hiddenedits.look(str(tmp_path), trees)
    git_dir = tmp_path / ".git"
    (git_dir / "index").rename(git_dir / "idx2")
    (git_dir / "index").symlink_to("idx2")
    with pytest.raises(PolicyError, match="is a link"):
        hiddenedits.look(str(tmp_path), trees)
    fields = {name: getattr(lk, name) for name in hiddenedits.Look.__annotations__}
    uncopied = hiddenedits.Look(**{**fields, "then": None, "index": gitsettings.index_look(str(tmp_path))})
    monkeypatch.setattr(gitsettings, "index_look", lambda root: uncopied.index)  # the coarse clock: all three kept
    assert not hiddenedits._unwritten(uncopied, str(tmp_path))
