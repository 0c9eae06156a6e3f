"""What a session leaves in the git index to hide its edits from the user's own git, undone at its end.

- **Marks**: `git update-index --assume-unchanged` or `--skip-worktree` on a tracked file makes git take the index's
  copy for the file, so the session's edit of it is gone from the user's `git status` and `git diff`, and `git commit
  -a` leaves it out (forty-fifth red team, F3; outside, the same commands leave the marks). Every such mark the
  session added, on a file that is there, is cleared and named in one line. What stays, as in a run without the
  sandbox: the marks the index held at the launch (the user's, by path; one git carried along to a new path with `git
  mv`, by its object id), ai-sandbox's own (skipworktree.py, while a live session needs them), and a skip-worktree
  mark on a file the work tree lacks (what a sparse checkout sets: cleared, `git commit -a` would delete the file).
  Where more new marks hold a moved mark's object than marks moved, which are the user's cannot be told: all stay,
  named (cleared, one may be the user's over a local change of a secret, which `commit -a` would then take).
- **Stat data**: git trusts an entry whose recorded size, times and inode match the file's, and never reads it. The
  index is a file the session can write: an entry rewritten with the stat of the edited file (its checksum made
  anew) hid the edit from `git status`, `git diff` and `git commit -a` with no mark at all (measured, git 2.39); so
  did one given the stat of a file you had edited before the launch (your edit then left out of `commit -a`), or of
  a file planted in an earlier session and swapped in with its directory (forty-seventh red team, F2). Every entry
  whose stat data (or anything else git lists of it) is not what the index said at the launch is looked at: where
  its file's content is not its object, its stat data is cleared (`update-index --index-info`, same object, the mode
  as git reads it), and git reads the file again. What the index said at the launch is a copy of the index file
  the launch reads (a descriptor held on the file would not do: git replaces the file, but the session can write
  it in place first). A split index (`sharedindex.*` in the git directory) keeps its entries in a shared file
  the session can rewrite in place, unseen by the copy: where one was written, every tracked file is read.

The indexes of the scanned repositories' other checkouts (the main one, each linked worktree) lie in the git
directory a session writes, so they are looked at too (from a linked worktree, a session staged content of its own
in the main checkout's index and marked it: the user's `commit -a` there took it); their marks at the launch are
read from the launch's copy of their index, at the end.

The launch runs no git for this: its scan listed the index with the marks (`ls-files -t -v`), and that listing is
what the end compares marks with; it copies the index file, and stats a few paths. The end lists again only the
indexes whose file changed, and reaches each work tree through the descriptor the launch opened on it
(skipworktree.Held): a session may have moved it, or put a link to another repository in its place.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Mapping

from ai_sandbox.records import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.commitgraph import Graphs
    from ai_sandbox.layers.tree import Tree
    from ai_sandbox.objectstore import Stores
    from ai_sandbox.skipworktree import Held

ASSUME, SKIP = "assume-unchanged", "skip-worktree"
_FLAGS = {ASSUME: "--no-assume-unchanged", SKIP: "--no-skip-worktree"}
_TAGS = (b"h ", b"s ", b"S ")  # what `ls-files --stage -t -v` tags a marked stage-0 entry with (H: not marked)
# git's flags an entry given new stat data would lose (cache.h): assume-unchanged, intent-to-add, skip-worktree. Any
# other (the on-disk extended bit, git's in-memory ones) is no reason to leave an entry alone: one carrying only the
# extended bit, which git writes with none of the extended flags set, kept a forged entry from being looked at
# (forty-seventh red team, F1)
_KEPT = 0x8000 | 1 << 29 | 1 << 30
Marked = dict[str, tuple[frozenset[str], str]]  # path -> (its marks, its object id)


@record
class Look:
    """One work tree's index as the launch found it."""

    tree: str  # the work tree's path
    listing: bytes  # `ls-files -z --stage -t -v`, as the scan got it
    ident: str  # "DEV:INO" of the work tree's directory (skipworktree.tree_id)
    gitdir: str  # "DEV:INO" of the git directory its `.git` names (skipworktree.gitdir_id)
    index: tuple[int, int, int] | None  # the index file's (inode, size, ctime): one unchanged is not listed again
    then: bytes | None  # the index file's bytes as the launch read them (b"": none there; None: not read)
    shared: frozenset[tuple[str, int, int]]  # a split index's shared files then: (name, inode, change time)
    replaced: dict[str, str] | None  # the repository's replace refs then (replacerefs.py); None: git could not say
    graphs: Graphs | None  # the repository's commit-graph files then (commitgraph.py)
    since: int  # when the launch looked (time.time_ns): a lock file made after it is the session's (replacerefs.py)
    stores: Stores | None  # the object directories then (objectstore.py)
    common: str = ""  # the common git directory it had (real path): a git directory the session swapped in there
    # is looked at too (fifty-third red team, F2 and F3)
    scanned: bool = True  # False: another checkout of a scanned repository, its index in the git directory the
    # session can write (listing empty: the marks then are read from the copy at the end)
    settled: bytes | None = None  # the index's bytes as ai-sandbox itself last wrote it (settle); None: then's


def look(root: str, trees: Iterable[Tree]) -> list[Look]:
    """The launch's look at every work tree it scanned: a copy of its index file and a few stat calls each, no git."""
    from ai_sandbox import commitgraph, objectstore
    from ai_sandbox.git import git_dir_of
    from ai_sandbox.gitsettings import common_dir, index_look
    from ai_sandbox.replacerefs import listed
    from ai_sandbox.skipworktree import gitdir_id, tree_id

    out = []
    commons: dict[str, None] = {}  # the scanned repositories' common git directories, in order
    since = time.time_ns() - 10_000_000  # a file's ctime is the kernel's coarse clock: up to a tick behind
    for t in trees:
        path = os.path.join(root, t.prefix).rstrip("/") or "/"
        own = git_dir_of(path)
        index_path = os.path.join(own or os.path.join(path, ".git"), "index")
        _not_a_link(index_path)
        then = _read(index_path)
        common = common_dir(own) if own else ""
        refs = listed(path, common)
        graphs = commitgraph.look(common, root) if own else None
        ident, gitdir = tree_id(path), gitdir_id(path)
        index, shared = index_look(path), _shared(path)
        stores = objectstore.look(list(graphs)) if graphs else None
        out.append(Look(path, t.scan._index, ident, gitdir, index, then, shared, refs, graphs, since, stores, common))
        if common:
            commons.setdefault(common, None)
    seen = {lk.tree for lk in out}
    for common in commons:  # the repository's other checkouts: their indexes lie in its git directory
        for tree, own in checkouts(common):
            if tree in seen or len(out) >= _CHECKOUTS:
                continue
            seen.add(tree)
            index_path = os.path.join(own, "index")
            _not_a_link(index_path)
            then = _read(index_path)
            ident, gitdir, index, shared = tree_id(tree), gitdir_id(tree), index_look(tree), _shared(tree)
            out.append(Look(tree, b"", ident, gitdir, index, then, shared, None, None, since, None, common, False))
    return out


_CHECKOUTS = 64  # work trees looked at in all; a repository with hundreds of worktrees has the rest unlooked


def settle(looks: list[Look], only: Iterable[int] | None = None) -> None:
    """Take each work tree's index as it is now for the launch's own (looks[i] replaced; only: those positions).
    Called after ai-sandbox itself wrote the indexes: its skip-worktree marks set before the session starts, and
    cleared at the end where the session had left the index as the launch did (untouched). Without it, each launch
    hiding a tracked file took its own two writes for the session's: the end listed the index twice and dropped the
    caches git keeps there (0.43 s of a launch on a 50,000-entry index, and the user's next `git status` walked the
    tree again). The baseline is the file's bytes, with its (inode, size, change time): on a file system that keeps
    whole seconds, a session's write in place within the second of the launch's kept all three (fifty-sixth red
    team). A split index is never settled: its shared part is another file, looked at by stat only. What the end
    compares the index with when it does check (the launch's copy, its marks) stays the launch's."""
    from ai_sandbox.gitsettings import index_file, index_look

    for i in range(len(looks)) if only is None else only:
        lk = looks[i]
        shared = _shared(lk.tree)
        index = index_look(lk.tree)
        data = None if shared else _read(index_file(lk.tree))
        fields = {name: getattr(lk, name) for name in Look.__annotations__}
        looks[i] = Look(**{**fields, "index": index, "shared": shared, "settled": data})


def untouched(looks: list[Look]) -> list[int]:
    """The positions of the settled looks whose work tree's index holds the very bytes ai-sandbox last left there
    (settle), with the same inode, size and change time, and no split index. Asked once the session is gone and
    before the end writes anything: an index the session changed is never among them."""
    return [i for i, lk in enumerate(looks) if lk.settled is not None and _unwritten(lk, lk.tree)]


def _unwritten(lk: Look, where: str) -> bool:
    """Whether where's index is as the look last saw it: its (inode, size, change time), a split index's shared
    files by the same, and its bytes (those ai-sandbox last wrote, else the launch's copy). Bytes too, not the stat
    alone: a file system that keeps whole seconds left an in-place write of the session's with all three unchanged
    (fifty-sixth red team). An index too large to copy (over 256 MB) is judged by the stat alone."""
    from ai_sandbox.gitsettings import index_file, index_look

    if index_look(where) != lk.index or _shared(where) != lk.shared:
        return False
    base = lk.settled if lk.settled is not None else lk.then
    index = index_file(where)
    if base is None:  # not copied at the launch: only one too large is judged by the stat alone (a link at
        return _too_large(index)  # .git/index, which git follows, was judged so too: fifty-seventh red team)
    return _read(index) == base


def _not_a_link(index: str) -> None:
    """Refuse an index file that is a link: git reads and writes through it (its lock renamed onto the target), and
    the end could neither compare what a session wrote there with the launch's copy nor drop its cached trees (the
    launch copies without following links). A session made one, then the next session's forged cached trees outlived
    its end (fifty-seventh red team). git never makes one."""
    from ai_sandbox.errors import PolicyError

    if os.path.islink(index):
        raise PolicyError(
            f"git's index {index} is a link (to {os.readlink(index)}), which a session may have made: ai-sandbox "
            "cannot check what a session does in it",
            f'put the file back: `cp --remove-destination -- "$(readlink -f {index})" {index}`',
        )


def _too_large(index: str) -> bool:
    """A regular file (not a link) larger than the launch copies."""
    try:
        st = os.lstat(index)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and st.st_size > _INDEX_LIMIT


def checkouts(common: str) -> list[tuple[str, str]]:
    """(work tree, its git directory) of each checkout of the repository whose common git directory is common: the
    main one (common is its `.git`) and each linked one in `worktrees/`, by the `gitdir` file git reads there. Only
    one whose `.git` names that git directory back: a session may write `worktrees/*/gitdir` to name any place."""
    from ai_sandbox.git import git_dir_of
    from ai_sandbox.verify import read_regular

    out = []
    if os.path.basename(common) == ".git":
        out.append((os.path.dirname(common), common))
    try:
        names = sorted(os.listdir(os.path.join(common, "worktrees")))[:_CHECKOUTS]
    except OSError:
        names = []
    for n in names:
        own = os.path.join(common, "worktrees", n)
        try:
            dotgit = os.fsdecode(read_regular(os.path.join(own, "gitdir"), 4096).rstrip(b"\r\n"))
        except (OSError, ValueError):
            continue
        if os.path.basename(dotgit) == ".git" and os.path.isabs(dotgit):
            out.append((os.path.dirname(dotgit), own))
    return [(tree, own) for tree, own in out if git_dir_of(tree) == own]


def _read(index: str) -> bytes | None:
    """The index file's bytes (b"" when there is none; None when it cannot be read whole): a copy, as the session may
    write the file in place before git replaces it, and a descriptor held on it would then read what it wrote. One
    read: 0.09 ms for a 0.2 MB index, 0.47 ms (AMD EPYC VM) to 2.5 ms (Intel Xeon VM) for a 50,000-file one of 5.3 MB."""
    try:  # never a FIFO waited on, never through a link
        fd = os.open(index, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return b""
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _INDEX_LIMIT:
            return None
        # one read of the whole file, then to its end should it have grown: a 5.3 MB index in 2.5-3 ms, where reads
        # of 4 MB joined took 4.5-7 ms (measured on the bench's monorepo)
        chunks = [os.read(fd, st.st_size + 1)]
        while chunk := os.read(fd, 1 << 22):
            chunks.append(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


RESTAT_BUDGET = 10.0  # seconds the end spends reading the files of entries the session's index changed
_INDEX_LIMIT = 256 << 20  # bytes of an index copied at the launch; a larger one (millions of files) is not


def marked(listing: bytes) -> Marked:
    """The marked stage-0 entries of an `ls-files -z --stage -t -v` listing. Each tag is searched for in git's bytes:
    an index with no mark (nearly all) is never split."""
    out: Marked = {}
    for tag in _TAGS:
        i = 0 if listing.startswith(tag) else _after(listing, b"\0" + tag, 0)
        while i != -1:
            end = listing.find(b"\0", i)
            end = len(listing) if end == -1 else end
            meta, _, raw = listing[i:end].partition(b"\t")
            fields = meta.split(b" ")
            if len(fields) == 4 and fields[3] == b"0":
                out[os.fsdecode(raw)] = (_bits(tag[:1]), fields[2].decode())
            i = _after(listing, b"\0" + tag, end)
    return out


def _bits(tag: bytes) -> frozenset[str]:
    return frozenset(({ASSUME} if tag.islower() else set()) | ({SKIP} if tag in (b"s", b"S") else set()))


def _after(listing: bytes, needle: bytes, start: int) -> int:
    """Where the record after the next `\\0` + tag begins, or -1."""
    j = listing.find(needle, start)
    return -1 if j == -1 else j + 1


@record
class Entry:
    """One stage-0 index entry as `ls-files -z --stage -t -v --debug` shows it."""

    tag: bytes
    mode: bytes
    oid: str
    ctime: int  # the change time git recorded for it, in ns (0: none)
    flags: int  # git's in-memory flags (a mark, an intent to add: _KEPT)


def entries(listing: bytes) -> dict[str, Entry]:
    """Every stage-0 entry of an `ls-files -z --stage -t -v --debug` listing. Each record is `TAG MODE OID
    STAGE<TAB>PATH<NUL>` and five lines of stat data: a path may hold a newline, never a NUL, so the records are
    found by the NULs and the five lines after each. Anything else refuses (ValueError): never a guess."""
    pieces = listing.split(b"\0")
    out: dict[str, Entry] = {}
    head = pieces[0]
    for piece in pieces[1:]:
        lines = piece.split(b"\n", 5)
        if len(lines) != 6 or not lines[0].startswith(b"  ctime: ") or b"\tflags: " not in lines[4]:
            raise ValueError("git ls-files --debug printed an unexpected record")
        meta, _, raw = head.partition(b"\t")
        fields = meta.split(b" ")
        if len(fields) != 4 or len(fields[0]) != 1:
            raise ValueError("git ls-files --debug printed an unexpected record")
        if fields[3] == b"0":
            sec, _, ns = lines[0][len(b"  ctime: ") :].partition(b":")
            flags = int(lines[4].rsplit(b"\tflags: ", 1)[1], 16)
            out[os.fsdecode(raw)] = Entry(fields[0], fields[1], fields[2].decode(), int(sec) * 10**9 + int(ns), flags)
        head = lines[5]
    if head:
        raise ValueError("git ls-files --debug printed an unexpected record")
    return out


def changed(listing: bytes, base: bytes) -> dict[str, Entry]:
    """The entries of listing whose record is not one of base's (both `ls-files -z --stage -t -v --debug`), each read
    on its own: the listings are cut at their NULs, piece k ending in record k's head and piece k + 1 starting with
    its stat data (five lines, no name in them), so record k is base's when the pair of pieces k, k + 1 is a pair of
    base's (a piece alone is not enough: two records' stat data can be alike, found by the property test). Only the
    records of pairs base lacks are read (a 50,000-file index's listing is ~10 MB: read whole, ~60 ms)."""
    pieces = listing.split(b"\0")
    theirs = base.split(b"\0")
    known = set(zip(theirs, theirs[1:], strict=False))
    out: dict[str, Entry] = {}
    for k, pair in enumerate(zip(pieces, pieces[1:], strict=False)):
        if pair not in known:
            head = pair[0] if k == 0 else _split(pair[0])[5]
            out.update(entries(head + b"\0" + b"\n".join(_split(pair[1])[:5]) + b"\n"))
    return out


def _split(piece: bytes) -> list[bytes]:
    """A piece: five lines of stat data, then the next record's head (which may hold newlines)."""
    lines = piece.split(b"\n", 5)
    if len(lines) != 6:
        raise ValueError("git ls-files --debug printed an unexpected record")
    return lines


def _may_mark(listing: bytes) -> bool:
    """Could a record of an `ls-files -t -v --debug` listing be marked? (A hit inside a name costs a full read.)"""
    return listing.startswith(_TAGS) or any(b"\n" + tag in listing for tag in _TAGS)


@record
class Found:
    """What the end found in one work tree."""

    clear: dict[str, list[str]]  # mark -> the paths the session set it on: cleared
    doubtful: list[str]  # new marks that may be the user's, carried by `git mv`: kept, named


def compare(before: Marked, now: dict[str, Entry], present: Mapping[str, bool], ours: set[str]) -> Found:
    """The marks the session set: on an entry now and not on it before at that path, and neither ai-sandbox's
    (ours: its skip-worktree marks a live session still needs) nor one the index held at the launch and git carried to
    a new path (same mark, same object, and its old path gone from the index or holding another object now). present:
    whether each marked path is in the work tree (a skip-worktree mark on a missing file stays)."""
    lost: dict[tuple[str, str], int] = {}
    for p, (bits, oid) in before.items():
        there = now.get(p)
        if there is not None and there.oid == oid:
            continue  # still there, or taken off where it was: a mark not carried anywhere
        for b in bits - (_bits(there.tag) if there is not None else frozenset()):
            lost[(b, oid)] = lost.get((b, oid), 0) + 1
    clear: dict[str, list[str]] = {}
    carried: dict[tuple[str, str], list[str]] = {}
    for p, e in sorted(now.items()):
        new = _bits(e.tag) - before.get(p, (frozenset(), ""))[0] - ({SKIP} if p in ours else set())
        for b in sorted(new):
            if (b, e.oid) in lost:
                carried.setdefault((b, e.oid), []).append(p)
            elif b == ASSUME or present.get(p, True):
                clear.setdefault(b, []).append(p)
    doubtful = sorted({p for key, ps in carried.items() if len(ps) > lost[key] for p in ps})
    return Found(clear, doubtful)


def looked_at(entries: Mapping[str, Entry]) -> list[str]:
    """Those of these entries that git compares with a file by its stat: a regular file or a link, as git reads the
    mode (its type bits: a mode written `1100644` is a file to git, and was left alone: forty-seventh red team, F4),
    with no mark and no intent to add (git's extended bit alone, 0x4000, was no reason to leave one alone: F1)."""
    return sorted(p for p, e in entries.items() if not e.flags & _KEPT and _kind(e.mode) is not None)


def _kind(mode: bytes) -> bytes | None:
    """The mode git gives an entry of this one's type, or None for a directory or a submodule."""
    try:
        bits = int(mode, 8)
    except ValueError:
        return None
    kind = bits & 0o170000
    if kind == 0o120000:
        return b"120000"
    if kind == 0o100000:
        return b"100755" if bits & 0o100 else b"100644"
    return None


def clear(env: Mapping[str, str], root: str, looks: list[Look], held: Held | None) -> None:
    """At the session's end, after skipworktree.release: undo what the session left in each index to hide its edits
    (the module's docstring), in each work tree where it is now; said in one line each. Never raises: it runs as the
    session ends."""
    from ai_sandbox.errors import PolicyError
    from ai_sandbox.skipworktree import say_line

    try:
        _clear(env, root, looks, held)
    except (PolicyError, OSError, ValueError) as e:  # a journal unreadable: said, never raised
        say_line(f"could not look for what the session hid from git in its index: {_why(e)}")


def _clear(env: Mapping[str, str], root: str, looks: list[Look], held: Held | None) -> None:
    from ai_sandbox import commitgraph, git, indexcache, objectstore
    from ai_sandbox.errors import PolicyError
    from ai_sandbox.replacerefs import undo
    from ai_sandbox.skipworktree import LOCK_WAIT, gitdir_id, owned_marks, say_line, tree_id

    moved = held.now() if held else {}
    deadline = time.monotonic() + LOCK_WAIT  # for every tree's index.lock together (skipworktree.write_index)
    todo: list[tuple[Marked, Look, str, dict[str, Entry]]] = []
    graphs: set[str] = set()  # object directories looked at (a repository's worktrees share one)
    stores: set[str] = set()
    wrote: list[str] = []  # the work trees whose index the session wrote: its caches are dropped last
    objects: list[tuple[Look, str]] = []  # then the object files are read (what a session wrote: it may be long)
    for lk in looks:
        where = moved.get(lk.tree)
        if where is None:
            where = lk.tree if lk.ident and tree_id(lk.tree) == lk.ident else None
        if where != lk.tree:
            _replaced(lk, where)
        if where is None:
            continue  # gone: nothing of this index is reachable
        if lk.gitdir and gitdir_id(where) != lk.gitdir and not _swapped(lk, where, root):
            continue  # another repository's git directory: nothing of this index is there
        if lk.scanned:  # what lies in the common git directory: looked at once, from a scanned checkout
            try:
                undo(where, lk.replaced, lk.since)
            except (PolicyError, OSError, ValueError) as e:
                say_line(f"could not look for the replace refs the session made in {where}: {_why(e)}")
            try:
                commitgraph.undo(lk.graphs, lk.tree, where, graphs)
            except (OSError, ValueError) as e:
                say_line(f"could not look for the commit-graph files the session changed in {where}: {_why(e)}")
            objects.append((lk, where))
        if where == lk.tree and _unwritten(lk, where):
            continue  # the index file was not written, nor a split index's shared part
        wrote.append(where)
        split = bool(_shared(where))
        try:  # one index that cannot be read (a nested one the session broke) leaves the others to be done
            listed = git.git_output(["ls-files", "-z", "--stage", "-t", "-v", "--debug"], where, timeout=git.QUICK)
            # a split index keeps its entries in a shared file the copy does not hold, which the session can rewrite
            # in place (git checks only that its last bytes are its name's: forty-eighth red team, F1)
            base = None if split else _then(lk, where)
            if base is None and not split:
                say_line(
                    f"what git's index in {where} said at the launch could not be read back: every tracked file was "
                    "read to check what the index says of it"
                )
            differ = entries(listed) if base is None else changed(listed, base)
            now = entries(listed) if base is not None and _may_mark(listed) else differ  # never read whole twice
            _restat(env, where, now, looked_at(differ), deadline)
            # the marks at the launch: the scan listed them; another checkout's are read from the launch's copy
            before = marked(lk.listing) if lk.scanned else None if base is None else _marks(base)
        except (PolicyError, OSError, ValueError) as e:
            say_line(f"could not look for what the session hid from git in {where}'s index: {_why(e)}")
            continue
        if before is None and any(e.tag != b"H" for e in now.values()):
            say_line(
                f"could not tell which git index marks in {where} the session set (the launch's copy of its index "
                "could not be read back): `git ls-files -v` shows them (h, s, S), `git status` does not show their "
                "edits"
            )
        elif before is not None and any(e.tag != b"H" for e in now.values()):
            todo.append((before, lk, where, now))
    if todo:
        with owned_marks(env, root) as ours:  # no launch marks its hidden files meanwhile
            for before, lk, where, now in todo:
                present = {p: os.path.lexists(os.path.join(where, p)) for p, e in now.items() if e.tag != b"H"}
                found = compare(before, now, present, ours.get(lk.tree, set()) | ours.get(where, set()))
                _apply(env, where, found, deadline)
    for where in wrote:  # after every write of git's above, which keeps the caches of what it did not touch
        why = indexcache.drop(git.git_dir_of(where) or os.path.join(where, ".git"), deadline, where)
        if why:
            say_line(
                f"could not drop the cached trees from git's index in {where} ({why}): the session may have forged "
                "them to hide its staged edits from `git status`; `git ls-files -s` against `git ls-tree -r HEAD` "
                "shows what is staged"
            )
    for lk, where in objects:
        try:
            objectstore.undo(lk.stores, lk.tree, where, lk.since, stores)
        except (PolicyError, OSError, ValueError) as e:
            say_line(f"could not look for the object files the session forged in {where}: {_why(e)}")


def _replaced(lk: Look, where: str | None) -> None:
    """Say so where the session moved a repository away and left another at its path (fiftieth red team, F4: a copy
    of it with a hook of the session's, which the user's next `git commit` there ran, outside). Its git directory is
    the session's: nothing of it is looked at (its hooks, config, caches)."""
    from ai_sandbox.fs import printable
    from ai_sandbox.skipworktree import gitdir_id, say_line

    other = gitdir_id(lk.tree)
    if not other or other == lk.gitdir:
        return
    moved = f"moved it to {printable(where)}" if where else "removed it"
    say_line(
        f"the session {moved} and left another git repository at {printable(lk.tree)}: its git directory is the "
        "session's, whose hooks and settings your git there would run as yours; remove it"
        + (f" and move {printable(where)} back" if where else "")
    )


def _swapped(lk: Look, where: str, root: str) -> bool:
    """The work tree is where it was, its git directory is not the launch's: whether it is one the session could
    make (in the project or the repository's common git directory: a linked worktree's `.git/worktrees/NAME`, which
    is no mount point, replaced by a copy; its index then held a forged mark, and every end check was skipped:
    fifty-third red team, F2 and F3), said either way. Such a one is looked at as the launch's was."""
    from ai_sandbox.fs import inside, printable
    from ai_sandbox.git import git_dir_of
    from ai_sandbox.skipworktree import say_line

    now = git_dir_of(where)
    ours = bool(now) and (inside(now, os.path.realpath(root)) or bool(lk.common) and inside(now, lk.common))
    say_line(
        f"the git directory of {printable(where)} is not the one the launch found"
        + (f" ({printable(now)})" if now else "")
        + (
            ": the session replaced it; it was looked at as the launch's"
            if ours
            else ": it lies outside the project, and was not looked at; check it before you run git there"
        )
    )
    return ours


def _then(lk: Look, where: str) -> bytes | None:
    """What the index said at the launch, listed by git from the launch's copy (an anonymous file: nothing on disk);
    b"" when there was none; None when the launch could not copy it or git cannot list the copy."""
    from ai_sandbox.git.run import _run
    from ai_sandbox.gitcommand import QUICK

    if lk.then is None:
        return None
    if not lk.then:
        return b""
    fd = os.memfd_create("ai-sandbox-index")
    try:
        view = memoryview(lk.then)
        while view:
            view = view[os.write(fd, view) :]
        env = {**os.environ, "GIT_INDEX_FILE": f"/proc/{os.getpid()}/fd/{fd}"}
        proc = _run(["ls-files", "-z", "--stage", "-t", "-v", "--debug"], where, env=env, timeout=QUICK)
    finally:
        os.close(fd)
    return proc.stdout if proc.returncode == 0 else None


def _shared(where: str) -> frozenset[tuple[str, int, int]]:
    """A split index's shared files in the work tree's git directory (`sharedindex.*`): name, inode and change time
    of each (none: the index is not split). One listing of the git directory."""
    from ai_sandbox.git import git_dir_of

    try:
        with os.scandir(git_dir_of(where) or os.path.join(where, ".git")) as it:
            found = [e for e in it if e.name.startswith("sharedindex.")]
            return frozenset((e.name, e.inode(), e.stat(follow_symlinks=False).st_ctime_ns) for e in found)
    except OSError:
        return frozenset()


def _why(e: Exception) -> str:
    from ai_sandbox.errors import PolicyError

    return e.message if isinstance(e, PolicyError) else str(e)


def _restat(env: Mapping[str, str], where: str, now: dict[str, Entry], paths: list[str], deadline: float) -> None:
    """Clear the stat data of each entry in paths whose file's content is not its object (skipworktree's hash, as git
    hashes a blob, without git): git then reads the file (racily clean or not) and sees what is there. A file git
    filters (git-crypt, LFS, line endings) hashes otherwise and is looked at again too, once: harmless. Silent, as
    nothing the user's git shows changes but what the session had hidden."""
    from ai_sandbox.skipworktree import blob_id, say_line, write_index

    # past the budget, the rest are not read: their stat data is cleared all the same (harmless where the file is
    # its object: git reads it once); 100 sparse files of 64 MB held the end 61 s (fifty-fourth red team, F3)
    budget = time.monotonic() + RESTAT_BUDGET
    stale = [
        p for p in paths if time.monotonic() > budget or blob_id(os.path.join(where, p), len(now[p].oid)) != now[p].oid
    ]
    if not stale:
        return
    # what the index says now: an entry you staged anew meanwhile (your `git add` while the session ended) is yours,
    # never written back to what was read before the hashing (fifty-fifth red team, F1: it came back unstaged). The
    # window left is this listing's to the write's, milliseconds where the hashing took seconds.
    stale = _still(where, now, stale)
    if not stale:
        return
    data = b"".join(
        (_kind(now[p].mode) or b"") + b" " + now[p].oid.encode() + b"\t" + os.fsencode(p) + b"\0" for p in stale
    )
    proc = write_index(env, where, ["-z", "--index-info"], data, deadline)
    if proc.returncode != 0:
        from ai_sandbox.fs import some

        first = os.fsdecode(proc.stderr).strip().splitlines()[:1] or ["no message"]
        say_line(
            f"could not make git look again at {some(stale)} in {where} ({first[0]}): the session may have made "
            "git's index hide its edits there; `touch` each of them, and `git status` shows them"
        )


def _still(where: str, now: dict[str, Entry], paths: list[str]) -> list[str]:
    """Those of paths whose stage-0 entry still holds the object it held when listed (one `ls-files --stage`)."""
    from ai_sandbox import git

    listing = git.git_output(["ls-files", "-z", "--stage"], where, timeout=git.QUICK)
    held: dict[str, str] = {}
    for line in listing.split(b"\0"):
        meta, tab, raw = line.partition(b"\t")
        fields = meta.split(b" ")
        if tab and len(fields) == 3 and fields[2] == b"0":
            held[os.fsdecode(raw)] = fields[1].decode("ascii", "replace")
    return [p for p in paths if held.get(p) == now[p].oid]


def _marks(listing: bytes) -> Marked:
    """The marked stage-0 entries of an `ls-files -z --stage -t -v --debug` listing (the launch's copy, listed)."""
    if not _may_mark(listing):
        return {}
    return {p: (_bits(e.tag), e.oid) for p, e in entries(listing).items() if e.tag in (b"h", b"s", b"S")}


def _by_mark(marks: dict[str, list[str]]) -> str:
    """`assume-unchanged on a, b; skip-worktree on c`."""
    from ai_sandbox.fs import some

    return "; ".join(f"{m} on {some(marks[m])}" for m in (ASSUME, SKIP) if marks.get(m))


def _apply(env: Mapping[str, str], where: str, found: Found, deadline: float) -> None:
    import shlex

    from ai_sandbox.errors import PolicyError
    from ai_sandbox.fs import some
    from ai_sandbox.skipworktree import say_line, update_index

    done: dict[str, list[str]] = {}
    failed: dict[str, list[str]] = {}
    why = ""
    for mark, paths in found.clear.items():  # one call per mark: git applies only the last of the two flags given
        try:
            update_index(env, where, _FLAGS[mark], paths, deadline)
            done[mark] = paths
        except PolicyError as e:
            failed[mark] = paths
            why = "another git holds its index.lock" if "index.lock" in e.message else e.message
    if done:
        say_line(
            f"cleared git index marks the session set in {where}, which hid its edits there from your `git status`, "
            f"`git diff` and `git commit -a`: {_by_mark(done)}"
        )
    if failed:
        say_line(
            f"could not clear git index marks the session set in {where} ({why}), which hide its edits there from "
            f"`git status`: {_by_mark(failed)}; `git -C {shlex.quote(where)} update-index --no-assume-unchanged "
            "PATH` (or `--no-skip-worktree PATH`) clears one"
        )
    if found.doubtful:
        say_line(
            f"kept the git index marks of {some(found.doubtful)} in {where}: the session moved marked entries, and "
            "which of these marks are yours cannot be told; `git ls-files -v` shows them (h, s, S), `git status` "
            "does not show their edits"
        )
