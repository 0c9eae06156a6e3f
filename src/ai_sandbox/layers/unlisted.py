"""What git does not list, found another way: directories it could not open, and FIFOs, sockets and
device nodes (git lists regular files and symlinks only, so an ignored FIFO would read as "not ignored").

Special files are found by listing every directory git walked — those holding tracked files, then the
untracked ones — and never ignored directories (hidden or kept readable whole), `.git`, nor nested
repositories (each is a tree of its own). The listing uses d_type (no stat per entry); the directories
holding tracked files are listed in a thread as soon as git's index is read, while git's own walks for
ignored and untracked files still run: on a 1M-file monorepo that walk costs ~70 ms of system calls,
which then overlap git's ~150 ms instead of adding to them. git decides which found file is ignored.
"""

from __future__ import annotations

import os
import re
import threading

from ai_sandbox import project
from ai_sandbox.policy import IGNORED, Entry

# the directory part of each index record (`<mode> <oid> <stage>\t<path>\0`), and tracked .gitattributes
_TRACKED_DIR = re.compile(rb"\t([^\0]*)/[^/\0]*\0")
_TRACKED_ATTRS = re.compile(rb"\t((?:[^\0]*/)?\.gitattributes)\0")


class Walk:
    """The listing of one work tree: started from git's index (`start`), finished once git's listing of
    ignored and untracked entries is known (`finish`)."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.special: list[str] = []  # FIFOs, sockets, devices, relative to root
        self.attributes: list[str] = []  # every .gitattributes file listed (ignored ones too)
        self.tracked_attributes: list[str] = []  # .gitattributes in the index (git reads them there if absent)
        self.failed: list[tuple[str, str]] = []  # (directory, why) that could not be listed
        self._deferred: list[str] = []  # directories holding no tracked file: ignored, untracked or nested
        self._thread: threading.Thread | None = None
        self._index = b""
        self.done = False

    def start(self, index: bytes) -> None:
        """List the directories that hold tracked files (none of them can be ignored whole), in a thread."""
        self._index = index
        self._thread = threading.Thread(target=self._tracked, daemon=True)
        self._thread.start()

    def _tracked(self) -> None:
        index = self._index
        dirs = {""}
        for raw in set(_TRACKED_DIR.findall(index)):
            d = os.fsdecode(raw)
            while d not in dirs:
                dirs.add(d)
                d = d.rpartition("/")[0]
        if b".gitattributes" in index:
            self.tracked_attributes = [os.fsdecode(p) for p in _TRACKED_ATTRS.findall(index)]
        _list(self.root, [""], dirs.__contains__, self, self._deferred)

    def finish(self, scan: project.Scan, nested: list[str]) -> None:
        """List what remains: directories git did not report as ignored, nor as repositories of their own
        (nested: their paths relative to this tree)."""
        if self.done:
            return
        if self._thread is None:
            self.start(scan._index)  # noqa: SLF001 — git's index was not handed over early: read it now
        assert self._thread is not None
        self._thread.join()
        prune = {rel for rel, is_dir in scan.ignored if is_dir}
        prune.update(scan.gitlinks, nested, (rel for rel, _ in scan.unlisted))
        todo = [d + "/" for d in self._deferred if d not in prune]
        _list(self.root, todo, lambda d: d not in prune, self, None)
        self.done = True


def _list(root: str, todo: list[str], descend, walk: Walk, deferred: list[str] | None) -> None:  # noqa: ANN001
    """List each directory in todo (relative, "" or ending in "/") and every subdirectory `descend`
    accepts; subdirectories it refuses go to deferred, when given. d_type answers is_file/is_dir without
    a stat (Python falls back to lstat only on filesystems that leave d_type unknown)."""
    base = os.path.join(root, "")
    scandir = os.scandir
    special, attributes = walk.special, walk.attributes
    while todo:
        rel = todo.pop()
        try:
            it = scandir(base + rel)
        except OSError as e:
            walk.failed.append((rel.rstrip("/"), e.strerror or str(e)))
            continue
        with it:
            for e in it:
                if e.is_file(follow_symlinks=False):
                    if e.name == ".gitattributes":
                        attributes.append(rel + e.name)
                elif e.is_dir(follow_symlinks=False):
                    if e.name == ".git":
                        continue
                    sub = rel + e.name
                    if descend(sub):
                        todo.append(sub + "/")
                    elif deferred is not None:
                        deferred.append(sub)
                elif not e.is_symlink():
                    special.append(rel + e.name)


def entries(root: str, prefix: str, scan: project.Scan, walk: Walk, *, detail: bool = False) -> list[Entry]:
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
    hidden = project.ignored_among(scan.repo, walk.special) if walk.special else []
    why = project.ignore_rules(scan.repo, hidden) if detail and hidden else {}
    for rel in hidden:
        rule = f" ({why[rel]})" if rel in why else ""
        out.append(Entry(base + rel, False, IGNORED, f"ignored by git{where}{rule}; {_SPECIAL}"))
    return out


_SPECIAL = "a FIFO, socket or device: git lists none of those, ai-sandbox found it"
