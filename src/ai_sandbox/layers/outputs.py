"""Listings of the build outputs kept readable, remembered between launches.

Inside each kept build output, the policy looks for secret-looking names (policy._secrets_in_outputs), which
means listing every directory in it at every launch: a monorepo's 4,000 `dist/`, `coverage/`, `.turbo/` and
`build/` directories cost ~160 ms. A directory's entries change only with its ctime, so its answer — the
subdirectories to descend into and the names that look like secrets — is kept by inode and ctime, as
unlisted.py keeps the FIFO search's listings; an unchanged directory costs one lstat. The file lives in
ai-sandbox's cache directory, read-only inside the sandbox, so a session cannot make the next launch skip
a secret it wrote.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable

from ai_sandbox.layers.unlisted import RACY_NS, load_memo, save_memo

# absolute directory -> (inode, ctime_ns, ((name, is_dir) of each subdirectory or secret-looking entry))
Answer = tuple[int, int, tuple[tuple[str, bool], ...]]


class OutputListings:
    def __init__(self, path: str, secret: Callable[[str], str | None]) -> None:
        self.path = path
        self.secret = secret
        self.old: dict[str, Answer] = {}
        self.loaded = False
        self.new: dict[str, Answer] = {}
        self.changed = False
        self.settled = time.time_ns() - RACY_NS

    def load(self) -> None:
        """The answers of the last launch: called while git walks the tree (a monorepo's: ~4 ms of unmarshalling),
        at the latest before the first question."""
        if not self.loaded:
            self.old, self.loaded = load_memo(self.path), True

    def scandir(self, path: str) -> tuple[tuple[str, bool], ...]:
        """What the policy's walk needs of path: its subdirectories and its secret-looking entries. `load` first."""
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise NotADirectoryError(path)
        hit = self.old.get(path)
        if hit is None or hit[0] != st.st_ino or hit[1] != st.st_ctime_ns:
            secret = self.secret
            with os.scandir(path) as it:
                found = tuple(
                    (e.name, d) for e in it if (d := e.is_dir(follow_symlinks=False)) or secret(e.name) is not None
                )
            hit = (st.st_ino, st.st_ctime_ns, found)
            self.changed = True
            if st.st_ctime_ns >= self.settled:  # changed just now: listed, not remembered
                return found
        self.new[path] = hit
        return hit[2]

    def save(self) -> None:
        """Keep this launch's answers only; written when something was listed anew."""
        if self.loaded and (self.changed or self.new.keys() != self.old.keys()):
            save_memo(self.path, self.new)
