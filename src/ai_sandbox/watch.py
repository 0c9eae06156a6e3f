"""Guarding the masks while the agent runs.

A mask is mounted on the file or directory that was at its path at launch. When something outside the
sandbox replaces it (an editor saving `.env` through a temp file and a rename) or deletes and recreates
it, the kernel detaches the mask inside the sandbox and the new content is readable there. A small
watcher, forked before the exec, notices such a change (inotify on the masks' directories, and a full
re-check every few seconds for what inotify cannot see, such as a renamed ancestor) and ends the session,
or only warns when the user chose `on_hidden_change = "warn"`. It exits as soon as the sandbox does.

A hidden path that vanishes or changes during the session cannot have been deleted from inside (a mask
is a mount point): a directory above it was moved — maybe out of the project, where the next launch would
not look for it — or swapped (`renameat2(RENAME_EXCHANGE)` with a decoy). Each session has a log,
`<moved_log>.<pid>`, written before the sandbox starts as "every hidden path may have moved"; the watcher
narrows it to what really changed when the sandbox ends (or removes it when nothing did). A watcher that
never ran, was killed, or cannot write (a full disk) leaves the conservative "every path": the next
launch refuses for any recorded path it cannot find (state.py). A hidden path gone from a directory that
is still what it was was deleted from outside, and is not noted.

A session also watches what it does not hide but the next launch of another root would: the paths the
records of the enclosing project or the other worktrees hold (a nested clone's launch hides the clone's
files only), noted in that root's log; and at its end it reads the records again, for what a launch
recorded while the session ran.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import struct
import sys
from collections.abc import Callable, Iterable, Mapping

from ai_sandbox.errors import UnavailableError
from ai_sandbox.fs import realpaths, write_atomic
from ai_sandbox.idents import NONE, Snapshot
from ai_sandbox.policy import Policy

RECHECK = 2.0  # seconds between full re-checks
HELD = 256  # other roots' recorded paths held open (O_PATH) from the start: what became of each is known at the end
MAX_WATCHES = 2048  # directories watched with inotify; masks beyond that rely on the full re-check
_IN_CREATE, _IN_DELETE, _IN_MOVED_FROM, _IN_MOVED_TO = 0x100, 0x200, 0x40, 0x80
_IN_DELETE_SELF, _IN_MOVE_SELF, _IN_IGNORED, _IN_Q_OVERFLOW = 0x400, 0x800, 0x8000, 0x4000
_IN_ONLYDIR, _IN_NONBLOCK, _IN_CLOEXEC = 0x01000000, 0o4000, 0o2000000
_EVENT = struct.Struct("iIII")


def start(
    policy: Policy,
    mode: str,
    moved_log: str = "",
    on_end: Callable[[int], None] | None = None,
    background: Callable[[], None] | None = None,
    seen: Snapshot | None = None,
    guarded: Mapping[str, Iterable[str]] | None = None,
    record: str = "",
    always: bool = False,
) -> Told | None:
    """Fork the watcher for this process, which is about to become the sandbox; returns in the parent.
    mode is config's on_hidden_change: "end" the session, or "warn". on_end(pid) runs once the sandbox is gone
    (the index marks of skipworktree.py are cleared there). background runs once, in a process of its own at
    low priority, while the agent starts (the history walk of history.py: seconds on a large repository).
    seen: the launch's one look at the masks (idents.py), what each path must still be; None: a look now.
    guarded: other roots' records -> the paths they hold and their directories, looked at now; the watcher notes
    in that root's log (`<record>.moved.<pid>`) those that moved during the session. record: this root's. At the
    end the watcher reads them all again: what a launch recorded during the session (the user launched meanwhile)
    that is no longer what it recorded is noted too (twelfth red team). always: a watcher with nothing else to do,
    for the backend it is told of (firejail, which a killed launch would leave running: forty-fourth red team).
    Returns the launch's side of a pipe to the watcher (Told): the backend's pid, and that this process ran on_end
    itself (a supervised launch ends the session as soon as the sandbox is gone: done twice, its line came twice);
    a process that dies without saying so leaves on_end to the watcher, which first ends the backend it was told of
    (a launch killed by SIGKILL, or by the watcher: firejail, with no --die-with-parent, would run on alone)."""
    if not policy.masks and on_end is None and not guarded and not always:
        return None
    target = os.getpid()
    paths = [m.path for m in policy.masks]
    if moved_log and paths:
        moved_log = f"{moved_log}.{target}"
        _any(moved_log)
    theirs = {rec: (f"{rec}.moved.{target}", _looks(dirs)) for rec, dirs in (guarded or {}).items()}
    held = _hold(sorted({n for _, look in theirs.values() for n in look}))
    # each mask's directory as the launch saw it (seen, idents.py), before the agent can move it
    dir_ids: dict[str, bytes] = {
        d: (seen.dirs.get(d) if seen is not None else None) or _dir_key(d) for d in {os.path.dirname(p) for p in paths}
    }
    for log, _ in theirs.values():
        _any(log)
    # Blocked across the fork, until the child ignores them: a SIGHUP to the group right after the fork (a
    # terminal closed as the agent starts) killed the watcher before it could ignore it, and the index
    # marks stayed until the next launch (seen under load in CI). The parent gets its pending ones after.
    signal.pthread_sigmask(signal.SIG_BLOCK, _OUTLIVED)
    done_r, done_w = os.pipe()  # not inherited by an exec: the backend's start closes it, unwritten
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _OUTLIVED)
        os.close(done_r)
        os.close(done_w)
        for fd in held.values():
            os.close(fd)
        return None  # no watcher rather than no agent; the gap is documented
    if pid != 0:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _OUTLIVED)
        os.close(done_r)
        for fd in held.values():
            os.close(fd)
        return Told(done_w)
    os.close(done_w)
    code = 0
    launch = _Heard(done_r, target)
    try:
        # out of the agent's process group and session: kill(0, SIGSTOP or SIGKILL) from inside the sandbox
        # reaches the whole group across pid namespaces, and would freeze or end the watcher (red team)
        os.setsid()
        if background is not None:
            _detach(background)
        known = {p: seen.files[p] if seen is not None and p in seen.files else _ident(p) for p in paths}
        # no paths (on_end only): it outlives the sandbox
        _child(paths, known, target, mode, moved_log, theirs, record, dir_ids, held, launch)
    except BaseException:  # a watcher must never print a traceback over the agent's screen
        code = 1
    finally:
        try:
            launch.settle()
            if on_end is not None and not launch.ended:
                on_end(target)
        finally:
            os._exit(code)


def _any(log: str) -> None:
    """A session's log says "any hidden path may have moved" until its watcher says otherwise."""
    try:
        write_atomic(log, b"*\0")
    except OSError as e:
        raise UnavailableError(
            f"cannot write {log}: {e.strerror}",
            "free some space (or fix the permissions of ai-sandbox's state directory): a launch must be able "
            "to note what a session moves",
        ) from None


_Look = dict[str, tuple[bytes, str]]  # path -> (its id, where it really is: "" for a recorded path, whose directory
# is looked at too)


def _looks(names: Iterable[str]) -> _Look:
    """What each recorded path and directory is, and where each directory really is, now, before the sandbox starts
    (a link put above one later counts as a move)."""
    names = list(names)
    dirs = {os.path.dirname(n) for n in names}
    return {n: (_dir_key(n), os.path.realpath(n) if n in dirs else "") for n in names}


def _hold(names: list[str]) -> dict[str, int]:
    """A descriptor (O_PATH) of each of the first HELD names, taken with the look, before the agent starts."""
    out: dict[str, int] = {}
    for n in names[:HELD]:
        with contextlib.suppress(OSError):
            out[n] = os.open(n, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    return out


def _moved_dirs(look: _Look, held: Mapping[str, int] | None = None) -> list[str]:
    """The paths and directories that are not what and where they were; not one whose file is gone from every
    directory (held: its link count is 0): it was deleted, or its last name replaced (an editor saving `.env`
    through a rename, which made the project's next launch refuse for good: fourteenth red team), not moved."""
    out = []
    for d, (was, real) in look.items():
        if _dir_key(d) != was or (real and os.path.realpath(d) != real):
            fd = (held or {}).get(d)
            if fd is not None and _links(fd) == 0:
                continue
            out.append(d)
    return out


def _links(fd: int) -> int:
    try:
        return os.fstat(fd).st_nlink
    except OSError:
        return -1


def _late(record: str, looked: Iterable[str]) -> list[str]:
    """What the record holds now, other than what was looked at since the session started, that is not what the
    launch that recorded it saw: a path gone or another file now, or its directory moved (recorded by a launch
    during the session)."""
    if not record:
        return []
    from ai_sandbox import state  # in the watcher only

    try:
        entries = state.recorded(record)
    except Exception:  # an unreadable record: the next launch says so itself
        return []
    skip = set(looked)
    out: set[str] = set()
    for p, was, itself in entries:
        d = os.path.dirname(p)
        if not was or was == NONE or p in skip:
            continue
        if d not in skip and _dir_key(d) != was:
            out.add(d)
        elif not os.path.lexists(p) or (itself and itself != NONE and _dir_key(p) != itself):
            out.add(p)
    return sorted(out)


def _dir_key(d: str) -> bytes:
    now = _ident(d)
    return b"%d:%d" % now if now is not None else NONE


class Told:
    """The launch's side of the pipe to its watcher (not inherited by an exec)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def started(self, pid: int) -> None:
        """The backend's pid, and when it started (a pid reused by then is not the backend's)."""
        with contextlib.suppress(OSError):
            os.write(self.fd, b"B %d %d\n" % (pid, _started_at(pid)))

    def ended(self) -> None:
        """This process ran the session's end itself: the watcher does not."""
        with contextlib.suppress(OSError):
            os.write(self.fd, b"E\n")
            os.close(self.fd)


class _Heard:
    """What the watcher heard from its launch (target), read once the launch is gone: all it wrote is in the pipe
    then, and the proxy, forked later, may still hold the pipe's other end (never read to its end)."""

    def __init__(self, fd: int, target: int) -> None:
        self.fd = fd
        self.target = target
        self.ended = False
        self.backend: tuple[int, int] | None = None
        self.settled = False

    def settle(self) -> None:
        """Wait for the launch to be gone and read what it said; a backend it started, and did not say it outlived
        (it was killed), is ended now, and waited for: nothing of the session may run once the watcher settles
        the logs and ends it."""
        if self.settled:
            return
        self.settled = True
        _wait_gone(self.target)
        data = b""
        with contextlib.suppress(OSError):
            os.set_blocking(self.fd, False)
            while chunk := os.read(self.fd, 4096):
                data += chunk
        for line in data.split(b"\n"):
            word = line.split()
            if word == [b"E"]:
                self.ended = True
            elif len(word) == 3 and word[0] == b"B" and word[1].isdigit() and word[2].isdigit():
                self.backend = (int(word[1]), int(word[2]))
        if self.backend is not None and not self.ended:
            _end_backend(*self.backend)


def _wait_gone(pid: int) -> None:
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError) as e:
        if isinstance(e, ProcessLookupError):
            return
        while os.getppid() == pid:  # old kernel: the watcher is the launch's child
            select.select([], [], [], 0.05)
        return
    try:
        select.select([fd], [], [])
    finally:
        os.close(fd)


def _started_at(pid: int) -> int:
    """When pid started (clock ticks since boot, /proc/PID/stat's 22nd field); 0 when it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return int(fields[19])
    except (OSError, IndexError, ValueError):
        return 0


def _end_backend(pid: int, started: int) -> None:
    """SIGKILL the backend, if pid is still that process, and wait for it (5 s at most). Its own init dies with it
    (bwrap's --die-with-parent, firejail's parent-death signal: measured, the agent was gone), and with that init
    every process of the sandbox's pid namespace."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return  # gone already
    try:
        if started == 0 or _started_at(pid) != started:
            return  # another process now: the backend is gone
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        select.select([fd], [], [], 5.0)
    except OSError:
        pass
    finally:
        os.close(fd)


_OUTLIVED = (signal.SIGINT, signal.SIGQUIT, signal.SIGTSTP, signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE)


def _outlive_signals() -> None:
    """Ctrl-C is for the agent, and a closed terminal (SIGHUP) or `timeout` (SIGTERM to the process group) end
    the sandbox, not the watcher: it must outlive it to settle the log and clear the index marks. SIGKILL
    still ends it; the next launch then does what it could not."""
    for sig in _OUTLIVED:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _OUTLIVED)  # blocked by start() across the fork


def _detach(job: Callable[[], None]) -> None:
    """Run job in a grandchild of the watcher, reparented at once (nobody waits for it), silent, niced, and in
    a session of its own, away from the terminal's signals (its git calls have time limits: history.py)."""
    try:
        pid = os.fork()
    except OSError:
        return
    if pid != 0:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        return
    code = 0
    try:
        if os.fork() == 0:
            os.setsid()  # no terminal: no SIGHUP or Ctrl-C reaches it, and none is ignored for the git it runs
            for sig in _OUTLIVED:
                signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _OUTLIVED)
            devnull = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(devnull, fd)
            os.nice(10)
            job()
    except BaseException:
        code = 1
    finally:
        os._exit(code)


def _ident(path: str) -> tuple[int, int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _child(
    paths: list[str],
    known: dict[str, tuple[int, int] | None],
    target: int,
    mode: str,
    moved_log: str = "",
    theirs: Mapping[str, tuple[str, _Look]] | None = None,
    record: str = "",
    dir_ids: Mapping[str, bytes] | None = None,
    held: Mapping[str, int] | None = None,
    launch: _Heard | None = None,
) -> None:
    _outlive_signals()
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)  # hold no pipe the caller waits on, except stderr for the message
    parents = _parents(paths)  # before the agent runs: the directories as they are reached now
    alive = _liveness(target)
    ifd, by_wd = _inotify(paths)
    fds = [f for f in (alive, ifd) if f is not None]
    try:
        _watch(paths, known, target, mode, alive, ifd, by_wd, fds)
    finally:  # the sandbox ended, or this session is being ended: a last look for what moved
        if launch is not None:
            launch.settle()  # a killed launch's backend first: it could still move what the logs say did not
        _settle_log(moved_log, _changed(paths, parents, dir_ids) + _late(record, [*parents, *paths]))
        for rec, (log, look) in (theirs or {}).items():
            _settle_log(log, _moved_dirs(look, held) + _late(rec, [*look, *paths]))


def _parents(paths: list[str]) -> dict[str, str]:
    """Each hidden path's directory, resolved: where it really is (each ancestor looked at once: a monorepo's
    1,000 directories took 22 ms one realpath each, in a process that starts beside the sandbox)."""
    real = realpaths()
    return {d: real(d) for d in {os.path.dirname(p) for p in paths}}


def _changed(
    paths: list[str],
    parents: dict[str, str],
    dir_ids: Mapping[str, bytes] | None = None,
) -> list[str]:
    """The hidden paths whose directory is not what and where it was: another directory at its path, or the same
    one reached now through a link a session put above it. A link may resolve per process (red team: `svc` swapped
    for a link to `/proc/self/fd/3/../far/svc`, which for this process alone, holding the project on fd 3, led back
    to the moved directory); the next launch then finds the directory gone and must know it moved. A mask cannot be
    renamed or deleted from inside (a mount point), only a directory above it: a path gone, or another file at it,
    in a directory still what it was, was deleted or replaced from outside, and is not noted (the next launch would
    refuse for a file you deleted, or an editor saved, while the session ran: red team)."""
    ids, now = dir_ids or {}, realpaths()
    moved = {d for d, real in parents.items() if now(d) != real or _dir_key(d) != ids.get(d, _dir_key(d))}
    return [p for p in paths if os.path.dirname(p) in moved]


def _watch(
    paths: list[str],
    known: dict[str, tuple[int, int] | None],
    target: int,
    mode: str,
    alive: int | None,
    ifd: int | None,
    by_wd: dict[int, str],
    fds: list[int],
) -> None:
    reported: set[str] = set()
    suspects = paths  # first everything: what changed since the launch looked, before inotify watched
    while True:
        for path in suspects:
            now = _ident(path)
            if now is not None and now != known[path] and path not in reported:
                reported.add(path)
                _act(path, target, mode, alive)
                if mode != "warn":
                    return
        ready, _, _ = select.select(fds, [], [], RECHECK if alive is not None else 0.5)
        if (alive is None and os.getppid() != target) or alive in ready:
            return
        suspects = paths
        if ifd in ready:
            touched = _events(ifd, by_wd, known)
            suspects = paths if touched is None else touched


def _settle_log(moved_log: str, changed: list[str]) -> None:
    """The session's log says exactly which hidden paths vanished or changed; none: no log. If it cannot be
    written, it keeps saying "any" (the next launch then refuses for every recorded path it cannot find)."""
    if not moved_log:
        return
    with contextlib.suppress(OSError):
        if changed:
            write_atomic(moved_log, b"".join(os.fsencode(p) + b"\0" for p in changed))
        else:
            os.unlink(moved_log)


def _liveness(target: int) -> int | None:
    try:
        return os.pidfd_open(target)
    except (AttributeError, OSError):
        return None  # old kernel: poll the parent pid instead


def _inotify(paths: list[str]) -> tuple[int | None, dict[int, str]]:
    from ai_sandbox.verify import Libc  # not ctypes: ~4 ms of imports in a process beside the sandbox's start

    try:
        libc = Libc()
        fd = libc.function("inotify_init1")(_IN_NONBLOCK | _IN_CLOEXEC)
        add_watch = libc.function("inotify_add_watch")
    except (OSError, AttributeError):
        return None, {}
    if fd < 0:
        return None, {}
    mask = _IN_CREATE | _IN_DELETE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR
    by_wd: dict[int, str] = {}
    for d in sorted({os.path.dirname(p) for p in paths})[:MAX_WATCHES]:
        wd = add_watch(fd, os.fsencode(d), mask)
        if wd >= 0:
            by_wd[wd] = d
    return fd, by_wd


def _events(fd: int, by_wd: dict[int, str], known: dict[str, tuple[int, int] | None]) -> list[str] | None:
    """The masked paths an inotify batch may have touched; None means re-check everything."""
    try:
        data = os.read(fd, 65536)
    except BlockingIOError:
        return []
    out: list[str] = []
    i = 0
    while i + _EVENT.size <= len(data):
        wd, mask, _cookie, length = _EVENT.unpack_from(data, i)
        name = data[i + _EVENT.size : i + _EVENT.size + length].rstrip(b"\0")
        i += _EVENT.size + length
        if mask & (_IN_DELETE_SELF | _IN_MOVE_SELF | _IN_IGNORED | _IN_Q_OVERFLOW):
            return None
        d = by_wd.get(wd)
        if d is not None and name:
            path = os.path.join(d, os.fsdecode(name))
            if path in known:
                out.append(path)
    return out


def _act(path: str, target: int, mode: str, alive: int | None) -> None:
    from ai_sandbox.fs import printable

    path = printable(path)  # a name's escape codes never reach the terminal (red team)
    if mode == "warn":
        msg = (
            f"ai-sandbox: warning: {path} was replaced (outside the sandbox, or by moving a directory above it "
            "inside); its new content is readable inside"
        )
    else:
        msg = (
            f"ai-sandbox: {path} was replaced (outside the sandbox, or by moving a directory above it inside), "
            'which would make its new content readable inside: ending the session (on_hidden_change = "warn" '
            "in config.toml keeps it running)"
        )
    with contextlib.suppress(OSError):
        sys.stderr.write("\r\n" + msg + "\r\n")
        sys.stderr.flush()
    if mode == "warn":
        return
    with contextlib.suppress(OSError):
        os.kill(target, signal.SIGTERM)  # the launch passes it to the agent (supervise.py)
        if alive is not None and not select.select([alive], [], [], 3.0)[0]:
            os.kill(target, signal.SIGKILL)  # an agent that ignores SIGTERM
