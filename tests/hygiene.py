"""The suite leaves the machine as it found it: nothing written into the real home, no process left running.

The suite runs with HOME pointed at a home of its own (tests/conftest.py), so what reads HOME (ai-sandbox's
config, state and parse caches, podman's storage, npm's cache) writes there. What could still reach the real
home goes by the passwd entry or a path a test names. `Home` looks at it before and after: every directory
up to three levels down, by its entries. A new file anywhere adds an entry to its directory, and every
directory down to the first new one is listed; three levels keep the look cheap (a home holding a pyenv has
over a million files) while a write under `~/.local/share/x` or `~/.config/x` is still seen.

The processes: the pytest process is made a child subreaper (prctl), so a daemon a test starts that
outlives its parent (podman's rootless pause process, a watcher) is re-parented to it rather than to init,
and is found among its children at the end.
"""

from __future__ import annotations

import ctypes
import os
import signal
from pathlib import Path

DEPTH = 3
PR_SET_CHILD_SUBREAPER = 36


def _listing(path: str) -> frozenset[str] | None:
    try:
        return frozenset(os.listdir(path))
    except OSError:
        return None


class Home:
    """The directories of a home, up to DEPTH levels down, each with its entries."""

    def __init__(self, home: str | os.PathLike[str], depth: int = DEPTH) -> None:
        self.home = os.fspath(home)
        self.depth = depth
        self.dirs = self._look()

    def _look(self) -> dict[str, frozenset[str]]:
        found: dict[str, frozenset[str]] = {}
        todo = [(self.home, 0)]
        while todo:
            path, level = todo.pop()
            names = _listing(path)
            if names is None:
                continue
            found[path] = names
            if level < self.depth:
                for name in names:
                    child = os.path.join(path, name)
                    if os.path.isdir(child) and not os.path.islink(child):
                        todo.append((child, level + 1))
        return found

    def written(self, ignore: tuple[str, ...] = ()) -> list[str]:
        """The paths that appeared since the look (the highest new one of each branch), but those under ignore."""
        now = self._look()
        new = []
        for path, names in now.items():
            before = self.dirs.get(path)
            if before is None:
                continue  # itself new: named by its parent
            for name in sorted(names - before):
                full = os.path.join(path, name)
                if not any(full == i or full.startswith(i.rstrip("/") + "/") for i in ignore):
                    new.append(full)
        return sorted(new)


def become_subreaper() -> bool:
    """Orphans of our descendants come to us, not to init: what a test leaves running is then our child."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def children(pid: int | None = None) -> list[tuple[int, str]]:
    """The live children of pid (this process), each with its command line."""
    pid = os.getpid() if pid is None else pid
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            state = stat.rsplit(")", 1)[1].split()[0]
            if ppid != pid:
                continue
            if state == "Z":  # ended, not yet waited for: reap it
                os.waitpid(int(entry), os.WNOHANG)
                continue
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, ValueError, IndexError, ChildProcessError):
            continue
        found.append((int(entry), cmd.strip()[:200]))
    return sorted(found)


def end(procs: list[tuple[int, str]]) -> None:
    """Kill what was left running (after it was reported), and reap it."""
    for pid, _ in procs:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
