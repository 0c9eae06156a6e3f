"""What git does not list, found another way: directories it could not open, and FIFOs, sockets and
device nodes (git lists regular files and symlinks only, so an ignored FIFO would read as "not ignored").

Special files are found by listing every directory git walked, after git's scan: never ignored directories
(hidden or kept readable whole), `.git`, nor nested repositories (each is a tree of its own). git decides
which found file is ignored.

Listing costs 12-20 µs of system calls per directory on our machines: a monorepo's 5,000 visible
directories took ~70 ms, at every launch. So each directory's listing is remembered (`Memo`) with the
directory's inode and change time (ctime): any entry created, removed or renamed in a directory changes
its ctime, which no unprivileged process can set back (unlike mtime), so a matching ctime means the same
names and types. A warm launch costs one lstat per directory (~3 µs). A directory changed within the last
second is listed and not remembered: coarse clock ticks could otherwise hide a change made between the
lstat and the listing. The memo lives in ai-sandbox's cache directory, read-only inside the sandbox.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import re
import stat
import time

from ai_sandbox import git
from ai_sandbox.fs import write_atomic
from ai_sandbox.policy import IGNORED, Entry

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

_TRACKED_ATTRS = re.compile(rb"\t((?:[^\0]*/)?\.gitattributes)\0")
RACY_NS = 1_000_000_000  # a directory changed this recently is listed afresh and not remembered

# relative directory ("" or "a/b/") -> (inode, ctime_ns, subdirectory names, special file names, has .gitattributes)
Listing = tuple[int, int, tuple[str, ...], tuple[str, ...], bool]


class Memo:
    """Listings of earlier launches, per work tree root; loaded and saved once per launch. Loaded when first
    needed, or by `load` while git walks the tree (a monorepo's file: ~6 ms of unmarshalling)."""

    def __init__(self, path: str = "") -> None:
        self.path = path
        self._trees: dict[str, dict[str, Listing]] | None = None
        self.changed = False

    def load(self) -> None:
        if self._trees is None:
            self._trees = load_memo(self.path)

    @property
    def trees(self) -> dict[str, dict[str, Listing]]:
        self.load()
        assert self._trees is not None
        return self._trees

    def save(self, roots: list[str]) -> None:
        """Keep the trees of this launch only; written when something was listed anew (never inside the
        sandbox, where the cache directory is read-only: then the next launch lists again)."""
        keep = {r: self.trees.get(r, {}) for r in roots}
        if self.changed or keep.keys() != self.trees.keys():
            save_memo(self.path, keep)


def load_memo(path: str) -> dict[str, Any]:
    """A dict of listings an earlier launch remembered; empty when there is none, or a broken one (then
    everything is listed)."""
    if not path:
        return {}
    try:
        with open(path, "rb") as f:
            data = marshal.loads(f.read())  # marshal.load(f) reads item by item: 10x slower
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    return data if isinstance(data, dict) else {}


def save_memo(path: str, data: dict[str, Any]) -> None:
    """Written atomically; a failure only means the next launch lists again."""
    if not path:
        return
    with contextlib.suppress(OSError):
        write_atomic(path, marshal.dumps(data))


class Walk:
    """The listing of one work tree, finished once git's listing of ignored and untracked entries is known."""

    def __init__(self, root: str, memo: Memo | None = None) -> None:
        self.root = root
        self.memo = memo or Memo()
        self.special: list[str] = []  # FIFOs, sockets, devices, relative to root
        self.attributes: list[str] = []  # every .gitattributes file listed (ignored ones too)
        self.tracked_attributes: list[str] = []  # .gitattributes in the index (git reads them there if absent)
        self.failed: list[tuple[str, str]] = []  # (directory, why) that could not be listed
        self.done = False

    def finish(self, scan: git.Scan, nested: list[str]) -> None:
        """List what git walked: everything but ignored directories and repositories of their own (nested:
        their paths relative to this tree)."""
        if self.done:
            return
        index = scan._index  # git's raw index: a search for one name needs no decoding
        if b".gitattributes" in index:
            self.tracked_attributes = [os.fsdecode(p) for p in _TRACKED_ATTRS.findall(index)]
        prune = {rel for rel, is_dir in scan.ignored if is_dir}
        prune.update(scan.gitlinks, nested, (rel for rel, _ in scan.unlisted))
        old = self.memo.trees.get(self.root, {})
        new: dict[str, Listing] = {}
        listed = _list(self.root, prune, old, new, self)
        self.memo.trees[self.root] = new
        self.memo.changed |= listed or new.keys() != old.keys()
        self.done = True


def _list(root: str, prune: set[str], old: dict[str, Listing], new: dict[str, Listing], walk: Walk) -> bool:
    """Walk from root, pruning what prune names; reuse a listing whose inode and ctime still match. Returns
    whether any directory was listed anew. d_type answers is_file/is_dir without a stat."""
    base = os.path.join(root, "")
    settled = time.time_ns() - RACY_NS
    lstat, S_ISDIR = os.lstat, stat.S_ISDIR
    special, attributes = walk.special, walk.attributes
    listed = False
    todo = [""]
    while todo:
        rel = todo.pop()
        try:
            st = lstat(base + rel)
        except OSError as e:
            walk.failed.append((rel.rstrip("/"), e.strerror or str(e)))
            continue
        if not S_ISDIR(st.st_mode):
            walk.failed.append((rel.rstrip("/"), "no longer a directory"))
            continue
        hit = old.get(rel)
        if hit is None or hit[0] != st.st_ino or hit[1] != st.st_ctime_ns:
            try:
                hit = _listing(base + rel, st)
            except OSError as e:
                walk.failed.append((rel.rstrip("/"), e.strerror or str(e)))
                continue
            listed = True
            if st.st_ctime_ns < settled:  # changed just now: listed, not remembered
                new[rel] = hit
        else:
            new[rel] = hit
        for name in hit[2]:
            sub = rel + name
            if sub not in prune:
                todo.append(sub + "/")
        for name in hit[3]:
            special.append(rel + name)
        if hit[4]:
            attributes.append(rel + ".gitattributes")
    return listed


def _listing(path: str, st: os.stat_result) -> Listing:
    subdirs, specials, attrs = [], [], False
    with os.scandir(path) as it:
        for e in it:
            if e.is_file(follow_symlinks=False):
                if e.name == ".gitattributes":
                    attrs = True
            elif e.is_dir(follow_symlinks=False):
                if e.name != ".git":
                    subdirs.append(e.name)
            elif not e.is_symlink():
                specials.append(e.name)
    return (st.st_ino, st.st_ctime_ns, tuple(subdirs), tuple(specials), attrs)


def entries(root: str, prefix: str, scan: git.Scan, walk: Walk, *, detail: bool = False) -> list[Entry]:
    """Hide what git could not list, whole, and the special files git says are ignored."""
    where = f" in {prefix.rstrip('/')}" if prefix else ""
    base = os.path.join(root, prefix)
    out = [
        Entry(
            base + rel, True, IGNORED, f"git could not list it{where} ({why}): hidden whole, what is in it is unknown"
        )
        for rel, why in scan.unlisted
    ]
    known = {rel for rel, _ in scan.unlisted}
    out += [
        Entry(base + rel, True, IGNORED, f"could not be listed{where} ({why}): hidden whole, what is in it is unknown")
        for rel, why in walk.failed
        if rel not in known
    ]
    hidden = git.ignored_among(scan.repo, walk.special) if walk.special else []
    why = git.ignore_rules(scan.repo, hidden) if detail and hidden else {}
    for rel in hidden:
        rule = f" ({why[rel]})" if rel in why else ""
        out.append(Entry(base + rel, False, IGNORED, f"ignored by git{where}{rule}; {_SPECIAL}"))
    return out


_SPECIAL = "a FIFO, socket or device: git lists none of those, ai-sandbox found it"
