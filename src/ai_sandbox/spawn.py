"""Running a program with its output piped back, within a time limit, without the subprocess module: what the
launch's git calls need of it. subprocess brings threading, locale and selectors with it (~3 ms of every
launch); posix_spawn starts the program without copying the launcher's memory, as subprocess does.

The child gets what subprocess would give it: stdout and stderr piped, stdin piped (with input) or the
launcher's own, no other descriptor of the launcher's (close_fds), SIGPIPE and SIGXFSZ back to their defaults.
There is no cwd: posix_spawn cannot change directory before Python 3.13, and git takes `-C DIR`.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Mapping


class Finished:
    """A program's exit status (negative: the signal that ended it) and what it printed."""

    __slots__ = ("returncode", "stdout", "stderr")

    def __init__(self, returncode: int, stdout: bytes, stderr: bytes) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


class TimedOut(Exception):
    """The programs outlived their time limit: they were killed and reaped."""


class Child:
    """A started program: its pid, the launcher's ends of its pipes, and what it printed so far."""

    __slots__ = ("pid", "out", "err", "into", "pending", "chunks")

    def __init__(self, pid: int, out: int, err: int, into: int, pending: bytes) -> None:
        self.pid = pid
        self.out = out
        self.err = err
        self.into = into  # its stdin's pipe, or -1
        self.pending = memoryview(pending)
        self.chunks: tuple[list[bytes], list[bytes]] = ([], [])


def start(argv: list[str], env: Mapping[str, str], stdin: bytes | None = None, room: int = 0) -> Child:
    """Start argv (argv[0] an absolute path: FileNotFoundError when nothing is there). room: what its stdout's pipe
    holds, when the program is to write more than 64 KiB before anyone reads (at most the system's pipe-max-size)."""
    ours: list[int] = []
    theirs: list[int] = []
    try:
        out_r, out_w = _pipe(ours, theirs)
        if room:
            import fcntl

            with contextlib.suppress(OSError):  # past pipe-max-size, or the user's pipe quota: the usual 64 KiB
                fcntl.fcntl(out_w, fcntl.F_SETPIPE_SZ, room)
        err_r, err_w = _pipe(ours, theirs)
        actions: list[tuple[int, ...]] = [(os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)]
        in_w = -1
        if stdin is not None:
            in_r, in_w = _pipe(theirs, ours)
            actions.append((os.POSIX_SPAWN_DUP2, in_r, 0))
        actions += [(os.POSIX_SPAWN_CLOSE, fd) for fd in _inheritable()]
        pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setsigdef=(signal.SIGPIPE, signal.SIGXFSZ))
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in theirs:
            os.close(fd)
    if in_w != -1:
        os.set_blocking(in_w, False)
    return Child(pid, out_r, err_r, in_w, stdin or b"")


def collect(children: Mapping[str, Child], timeout: float) -> dict[str, Finished]:
    """Read every pipe as it fills (a program blocks on a full one) and feed each stdin, then reap: each one's exit
    status and output. Past timeout seconds, every one is killed and reaped, and TimedOut raised."""
    deadline = time.monotonic() + timeout
    poller = select.poll()
    owner: dict[int, tuple[Child, int]] = {}
    for child in children.values():
        for which, fd in enumerate((child.out, child.err)):
            poller.register(fd, select.POLLIN)
            owner[fd] = (child, which)
        if child.into != -1:
            poller.register(child.into, select.POLLOUT)
            owner[child.into] = (child, 2)
    try:
        while owner:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimedOut
            for fd, _ in poller.poll(left * 1000):
                child, which = owner[fd]
                if which == 2:
                    try:
                        child.pending = child.pending[os.write(fd, child.pending[: 1 << 16]) :]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # it stopped reading: what it says will tell
                        child.pending = memoryview(b"")
                    if child.pending:
                        continue
                else:
                    data = os.read(fd, 1 << 20)
                    if data:
                        child.chunks[which].append(data)
                        continue
                poller.unregister(fd)
                os.close(fd)
                del owner[fd]
                if which == 2:
                    child.into = -1
    except BaseException:
        for fd in owner:
            os.close(fd)
        for child in children.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGKILL)
            os.waitpid(child.pid, 0)
        raise
    return {
        name: Finished(
            os.waitstatus_to_exitcode(os.waitpid(child.pid, 0)[1]), b"".join(child.chunks[0]), b"".join(child.chunks[1])
        )
        for name, child in children.items()
    }


def run(argv: list[str], env: Mapping[str, str], stdin: bytes | None = None, timeout: float = 60.0) -> Finished:
    """Start argv, feed it stdin, and collect it (TimedOut past timeout seconds)."""
    return collect({"": start(argv, env, stdin)}, timeout)[""]


def _pipe(reads: list[int], writes: list[int]) -> tuple[int, int]:
    """A pipe whose two ends are above 2 (a dup2 onto itself would leave a descriptor closing at the exec), added
    to the lists of descriptors to close."""
    r, w = os.pipe()
    r, w = _above_stdio(r), _above_stdio(w)
    reads.append(r)
    writes.append(w)
    return r, w


def _above_stdio(fd: int) -> int:
    if fd > 2:
        return fd
    import fcntl

    moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.close(fd)
    return moved


def _inheritable() -> list[int]:
    """The launcher's descriptors above 2 that a program it starts would inherit (Python's own are not
    inheritable; one made so for a sandbox is not git's business)."""
    for listing in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(listing)
        except OSError:
            continue
        out = []
        for name in names:
            fd = int(name)
            if fd > 2:
                try:
                    if os.get_inheritable(fd):
                        out.append(fd)
                except OSError:  # the listing's own descriptor, closed by now
                    pass
        return out
    return []
