"""Run the sandbox (bubblewrap, firejail) as a child, this process standing in for it until the session has ended.

The launch does not exec the backend: it forks it and stays as its parent (same pid, same process group), so that
the session's end (skipworktree's marks, gitsettings' restore, the hooks) is done before the shell gets its
prompt back. Under firejail the launch once became firejail and left the end to the watcher, which ran it ~20 ms
after the shell had moved on: a script's next `git status` ran a core.fsmonitor the session had planted (forty-third
red team). Neither backend passes signals on as the agent needs: bwrap passes nothing (`kill PID` either killed
it, and with --die-with-parent SIGKILLed the agent, or did nothing), and firejail ends the agent without its
handler running on a SIGHUP. So
  - the terminal's own signals (Ctrl-C, Ctrl-\\, a hang-up) reach the agent directly, since it is in the
    foreground process group; the backend and its init ignore them (verify.py gives the agent back the caller's
    dispositions; firejail still catches Ctrl-C itself, and passes a SIGTERM on), and this process drops them
    rather than deliver a second one;
  - a signal sent to this process by kill(2) is passed to the agent (the child of the backend's init), unless it
    surely came from inside the sandbox (_inside): the session's `kill -SIG 0` reaches this process too (the agent
    runs in its process group), and the agent's group has it already;
  - no signal but SIGKILL and SIGSTOP ends or stops this process before the session's end has run (TERMINATING;
    during the end, everything is blocked);
  - the backend's exit status (the agent's, or 128+N when a signal ended it) becomes this process's; if the
    backend itself was killed, this process dies of the same signal.
Inherited file descriptors (a shell's `3<dir`) never reach the backend: inside, /proc/self/fd/3/.env would
read beneath every mask.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator

from ai_sandbox.backends.plan import Checked, LaunchPlan

# Every signal that ends a process by default, but SIGKILL and glibc's own two (32, 33), which libc lets nobody block
# or ignore, and SIGPIPE and SIGXFSZ, which Python ignores. The session runs in the launch's process group, so its
# `kill -SIG 0` reaches the launch and the backend as well as the agent: a launch that died of one left the end to
# the watcher, after the shell had moved on (forty-fifth red team: ALRM, PWR, SYS, RT…), and a backend that died of
# one (USR1) ended the session. The launch waits for them all and passes one on only when it came from outside the
# sandbox; the sandbox's own processes above the agent (the backend, its init) ignore them all, and the agent gets
# the caller's dispositions back (verify.py's _RESTORED is this list).
TERMINATING: tuple[int, ...] = (1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 14, 15, 16, 24, 26, 27, 29, 30, 31, *range(34, 65))
CATCHABLE = frozenset(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP}
SI_KERNEL = 0x80  # si_code of a signal the kernel sent: the terminal's Ctrl-C, Ctrl-\, hang-up


def ignored() -> frozenset[int]:
    """Those of TERMINATING the caller ignores (nohup's SIGHUP). Python installs its own SIGINT handler
    only when SIGINT was not ignored, so getsignal tells for every one of them."""
    return frozenset(s for s in TERMINATING if signal.getsignal(s) == signal.SIG_IGN)


def caller_ignored() -> str:
    """ignored(), as verify.py reads it."""
    return ",".join(str(s) for s in sorted(ignored()))


def spawn(
    plan: LaunchPlan,
    stdio: tuple[int, int, int] | None = None,
    cwd: str | None = None,
    keep: dict[int, int] | None = None,
) -> int:
    """Fork and exec plan.argv with plan.fds' data readable at those descriptors, and keep's descriptors (target:
    source, the proxy's channel: network.py) inherited at their targets; the child's pid."""
    memfds = {}
    for number, data in plan.fds.items():
        fd = os.memfd_create(f"ai-sandbox-{number}", os.MFD_CLOEXEC)
        _write_all(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
        memfds[number] = fd
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child only execs
        try:
            if cwd is not None:
                os.chdir(cwd)
            _child(plan, {**memfds, **(keep or {})}, stdio)
        finally:
            os._exit(127)
    for fd in memfds.values():
        os.close(fd)
    return pid


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _child(plan: LaunchPlan, moves: dict[int, int], stdio: tuple[int, int, int] | None) -> None:
    """moves: target descriptor -> the one to put there (the plan's memory files, the proxy's channel)."""
    import fcntl

    if stdio is not None:
        for target, fd in enumerate(stdio):
            os.dup2(fd, target)
    # every source out of the targets' way first (a source may sit where another's target is), then in place
    high = {number: fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 1000) for number, fd in moves.items()}
    for number, fd in high.items():
        os.dup2(fd, number)  # the copy is inheritable; the high one closes at the exec
    # every other inherited descriptor closes at the exec (Python's own are not inheritable)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in moves:
            with contextlib.suppress(OSError):
                os.set_inheritable(fd, False)
    for sig in TERMINATING:
        signal.signal(sig, signal.SIG_IGN)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; the backend gets the defaults
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    try:
        os.execve(plan.argv[0], plan.argv, plan.env)
    except OSError as e:
        os.write(2, f"ai-sandbox: error: cannot start {plan.argv[0]}: {e.strerror}\n".encode())


def run(plan: LaunchPlan, keep: dict[int, int] | None = None, started: Callable[[int], None] | None = None) -> int:
    """Start plan under this process's supervision; its wait status, once it is gone (become() ends this process
    with it, once the session's end has run). started(pid) is told the backend's pid at once (the watcher: should
    this process be killed, it ends the backend)."""
    waited = {*TERMINATING, signal.SIGCHLD}
    kept = ignored()
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    pid = spawn(plan, keep=keep)
    if started is not None:
        started(pid)
    marker = plan.check.path if isinstance(plan.check, Checked) else ""
    pending: dict[int, float] = {}  # signal -> when it came, until the agent can be given it
    while True:
        info = signal.sigtimedwait(waited, 0.01) if pending else signal.sigwaitinfo(waited)
        if info is None:
            pass
        elif info.si_signo == signal.SIGCHLD:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                # Nothing stops or ends the session's end now: a session that took the terminal's foreground and
                # set `tostop` stopped the launch with SIGTTOU at its closing line, marks still set, until `fg`
                # (forty-fifth red team). With SIGTTOU blocked the line is written (or fails, and is dropped).
                signal.pthread_sigmask(signal.SIG_BLOCK, CATCHABLE)
                return status
        elif info.si_code == SI_KERNEL:
            pass  # the terminal's: the agent got it too
        elif _inside(info.si_pid, pid):
            pass  # the session's own `kill -SIG 0`: its process group, the agent's, got it too
        elif info.si_signo in plan.to_backend:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, info.si_signo)
        else:
            pending.setdefault(info.si_signo, time.monotonic())
        if pending:
            _forward(pid, marker, pending, kept)


def _inside(sender: int, backend: int) -> bool:
    """Whether sender (a signal's si_pid) is surely a process of the sandbox. The kernel gives the pid as the sender's
    own pid namespace numbers it, not as this process's (measured: the session's shell, pid 2 inside bwrap, came as 2,
    which here is kthreadd). So it is one when a process below the backend has that pid as its innermost (NSpid) and
    the process of that pid here is a kernel thread, which sends no kill(2). Where no process here has that pid the
    sender cannot be told: an outside `/bin/kill` that has exited already (forty-sixth red team: a sandbox that held
    the pids the outside counter wrapped to had the user's SIGTERM dropped, 8 of 8), so its signal is passed on, and
    one the session sent reaches the agent twice."""
    if sender <= 0 or not _kernel_thread(sender):
        return False
    return any(_innermost_pid(p) == str(sender).encode() for p in descendants(backend))


def descendants(pid: int, limit: int = 100_000) -> Iterator[int]:
    """pid's children, theirs, and so on (at most limit of them: a sandbox can fork without end)."""
    todo = children(pid)
    for _ in range(limit):
        if not todo:
            return
        p = todo.pop()
        yield p
        todo.extend(children(p))


def _innermost_pid(pid: int) -> bytes:
    """pid as its own pid namespace numbers it (the last of NSpid); b"" when it is gone."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            return next((line.split()[-1] for line in f if line.startswith(b"NSpid:")), b"")
    except OSError:
        return b""


def _kernel_thread(pid: int) -> bool:
    """Whether this namespace's process pid is a kernel thread (PF_KTHREAD)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    flags = int(stat[stat.rindex(b")") + 2 :].split()[6])  # after the command, which may hold any byte
    return bool(flags & 0x00200000)


def _forward(backend: int, marker: str, pending: dict[int, float], kept: frozenset[int]) -> None:
    """Pass the pending signals to the agent (agent()). Until the launch check has given it the caller's dispositions
    and exec'd it, the process that will be the agent ignores all that the backend ignores, and a signal would be lost
    (a `timeout` or a closed terminal during the start left the agent running): a signal stays pending until then.
    One the agent ignores is dropped, as the kernel would drop it (a signal waited for here held every later one: the
    watcher's SIGTERM ending a session waited for an ignored Ctrl-C). A sandbox that has not got that far 30 s after
    a signal came is killed."""
    agent = _agent(backend, marker) if marker else _first_grandchild(backend)
    ignoring = _ignored(agent) if agent else None
    for sig, since in list(pending.items()):
        if agent and ignoring is not None:
            if sig in kept or sig not in ignoring:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(agent, sig)
            del pending[sig]
        elif time.monotonic() - since > 30:
            with contextlib.suppress(ProcessLookupError):
                os.kill(backend, signal.SIGKILL)
            pending.clear()


def _agent(backend: int, marker: str) -> int | None:
    """The agent's pid once the launch check has exec'd it; None before. Below the backend's init, each process down
    to the agent names the launch check's spec (marker) in its command line: the backend before its exec, a shell
    firejail puts before the command as a user (measured: `/bin/sh -c -- '…'`, which stays), the check itself; the
    agent's does not (forty-fourth red team: under firejail as a user the shell was taken for the agent, and the
    signals went to it). A firejail helper run before the command (fnet) is none of them."""
    init = children(backend)
    p = init[0] if init else 0
    for _ in range(8):
        # not a zombie (no command line: a helper not yet reaped, where a signal would be lost), not a gone one
        alive = [(c, cmd) for c in (children(p) if p else []) if (cmd := _cmdline(c)) not in (None, [""])]
        if not alive:
            return None
        p, cmd = alive[0]
        if firejail_helper(cmd[0]):
            return None  # a helper firejail runs before the command
        if not any(marker in a for a in cmd):
            return p
    return None


def firejail_helper(program: str) -> bool:
    """Whether program is one of firejail's helpers (fnet, fseccomp, …), which it runs in the sandbox before the
    command: from its library directory (0.9.72), or from the copy it makes under /run/firejail/lib (0.9.74, where
    fnet was taken for the agent and a SIGHUP during the start went to it: stock Debian 13)."""
    if program.startswith("/run/firejail/lib/"):
        return True
    return program.startswith(("/usr/lib/", "/usr/libexec/")) and "/firejail/" in program


def _first_grandchild(backend: int) -> int | None:
    init = children(backend)
    agent = children(init[0]) if init else []
    return agent[0] if agent else None


def _cmdline(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [os.fsdecode(a) for a in f.read().split(b"\0")]
    except OSError:
        return None


def _ignored(pid: int) -> frozenset[int] | None:
    """The signals pid ignores; None when it cannot be read (gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"SigIgn:"):
                    mask = int(line.split()[1], 16)
                    return frozenset(n for n in range(1, 65) if mask >> (n - 1) & 1)
    except (OSError, ValueError):
        pass
    return None


def children(pid: int) -> list[int]:
    """The pids of pid's children, oldest first."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def become(status: int) -> int:
    """The exit status for the backend's wait status; killed by a signal, this process dies of it too (SIGKILL, which
    has no disposition to set: signal() of it raised, and the launch exited 70 without the session's end: red team)."""
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    sig = os.WTERMSIG(status)
    if sig != signal.SIGKILL:
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})
    os.kill(os.getpid(), sig)
    return 128 + sig


def captured(plan: LaunchPlan, cwd: str, timeout: float = 60) -> tuple[int, bytes, bytes]:
    """Run plan to its end with no terminal (doctor, probes): (exit status, stdout, stderr)."""
    import tempfile

    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        open(os.devnull, "rb") as null,
    ):
        pid = spawn(plan, (null.fileno(), out.fileno(), err.fileno()), cwd=cwd)
        deadline = time.monotonic() + timeout
        while not (done := os.waitpid(pid, os.WNOHANG))[0]:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise TimeoutError(f"no answer in {timeout:.0f} s")
            time.sleep(0.01)
        out.seek(0)
        err.seek(0)
        return os.waitstatus_to_exitcode(done[1]), out.read(), err.read()
