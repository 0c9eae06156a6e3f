"""What the masks are on: one look, per launch, at the device and inode of every hidden path and of the
directory holding it.

The record (state.py) keeps the directories' identities, the launch check (verify.py) compares each mask
inside with the identity seen here, and the watcher (watch.py) starts from it. One look, taken after git
listed the project and before anything is written: a directory a running session swaps for a decoy after it
makes the launch check refuse (the mask is not on the file the policy decided on) and the watcher end the
session; one swapped before it makes the record refuse (the directory the last launch recorded stands
elsewhere). When each of them looked for itself, a session swapped the directory holding `.env` with a decoy
between two looks: the next session masked the decoy, its check passed, and its agent read the real file
under the decoy's old name (red team, F2).
"""

from __future__ import annotations

import os
import time

from ai_sandbox.policy import Policy
from ai_sandbox.records import factory, record

NONE = b"-"  # a directory that was not there


@record
class Snapshot:
    files: dict[str, tuple[int, int] | None] = factory(dict)  # each mask's path -> (st_dev, st_ino); None: missing
    dirs: dict[str, bytes] = factory(dict)  # each directory holding a mask or a capped path -> b"DEV:INO" or NONE
    root: tuple[int, int] | None = None  # the project root (unwritten.py looks only into that very directory)
    when: int = 0  # time.time_ns() as the look began: a directory unchanged since then holds the same entries


def take(policy: Policy) -> Snapshot:
    """One lstat per mask and per directory holding one (a monorepo's 6,000 masks sit in 2,000 directories)."""
    when = time.time_ns()
    files: dict[str, tuple[int, int] | None] = {}
    dirs: dict[str, bytes] = {}
    for m in policy.masks:
        files[m.path] = ident(m.path)
    for p in [*files, *(m.path for m in policy.capped)]:
        d = dirname(p)
        if d not in dirs:
            got = ident(d)
            dirs[d] = b"%d:%d" % got if got is not None else NONE
    return Snapshot(files, dirs, ident(policy.root), when)


def ident(path: str) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def dirname(path: str) -> str:
    return path.rpartition("/")[0] or "/"  # paths here are absolute and normal: posixpath's checks cost 3x
