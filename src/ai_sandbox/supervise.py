"""Run a backend that forwards no signals (bubblewrap) as a child, this process standing in for it.

bwrap passes nothing on: `kill PID` or a watcher's SIGTERM to it would either kill it (and, with
--die-with-parent, SIGKILL the agent with no chance to save its work) or, ignored, do nothing. So the
launch does not exec bwrap: it forks it and stays as its parent (same pid, same process group), and
  - the terminal's own signals (Ctrl-C, Ctrl-\\, a hang-up) reach the agent directly, since it is in the
    foreground process group; bwrap and its init ignore them (verify.py gives the agent back the caller's
    dispositions), and this process drops them rather than deliver a second Ctrl-C;
  - a signal sent to this process by kill(2) is passed to the agent (bwrap's init's child);
  - bwrap's exit status (the agent's, or 128+N when a signal ended it) becomes this process's; if bwrap
    itself was killed, this process dies of the same signal.
Inherited file descriptors (a shell's `3<dir`) never reach bwrap: inside, /proc/self/fd/3/.env would
read beneath every mask.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time

from ai_sandbox.backends.plan import LaunchPlan

FORWARDED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2)
# What the sandbox's own processes above the agent (bwrap, its init) ignore; the agent gets these directly
# from the terminal or its process group. verify.py restores them.
IGNORED_ABOVE = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM)
SI_KERNEL = 0x80  # si_code of a signal the kernel sent: the terminal's Ctrl-C, Ctrl-\, hang-up


def ignored() -> frozenset[int]:
    """Those of IGNORED_ABOVE the caller ignores (nohup's SIGHUP). Python installs its own SIGINT handler
    only when SIGINT was not ignored, so getsignal tells for every one of them."""
    return frozenset(int(s) for s in IGNORED_ABOVE if signal.getsignal(s) == signal.SIG_IGN)


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
    for sig in IGNORED_ABOVE:
        signal.signal(sig, signal.SIG_IGN)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; bwrap gets the defaults
        signal.signal(sig, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, set())
    try:
        os.execve(plan.argv[0], plan.argv, plan.env)
    except OSError as e:
        os.write(2, f"ai-sandbox: error: cannot start {plan.argv[0]}: {e.strerror}\n".encode())


def run(plan: LaunchPlan, keep: dict[int, int] | None = None) -> int:
    """Start plan under this process's supervision; its exit status, once it is gone."""
    waited = {*FORWARDED, signal.SIGCHLD}
    kept = ignored()
    signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    pid = spawn(plan, keep=keep)
    while True:
        info = signal.sigwaitinfo(waited)
        if info.si_signo == signal.SIGCHLD:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return _become(status)
        elif info.si_code != SI_KERNEL:
            _forward(pid, info.si_signo, kept)


def _forward(bwrap: int, sig: int, kept: frozenset[int]) -> None:
    """Pass sig to the agent: the child of bwrap's init. Until the launch check has given that process the
    caller's dispositions, it ignores what bwrap ignores, and the signal would be lost (a `timeout` or a
    closed terminal during the start left the agent running): so wait until it no longer ignores sig (or
    the caller ignored it too: kept). A sandbox that never gets that far in 30 s is killed."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        init = children(bwrap)
        agent = children(init[0]) if init else []
        if agent and (sig in kept or not _ignores(agent[0], sig)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(agent[0], sig)
            return
        if os.waitid(os.P_PID, bwrap, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return  # gone already: its SIGCHLD is pending, and the loop reaps it
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError):
        os.kill(bwrap, signal.SIGKILL)


def _ignores(pid: int, sig: int) -> bool:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"SigIgn:"):
                    return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except OSError:
        pass
    return False


def children(pid: int) -> list[int]:
    """The pids of pid's children, oldest first."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def _become(status: int) -> int:
    """The exit status to return for bwrap's wait status; killed by a signal, die of it too."""
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    sig = os.WTERMSIG(status)
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
