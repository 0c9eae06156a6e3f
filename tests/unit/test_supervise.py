"""The supervisor's pure parts: which process under firejail is one of its helpers, never the agent; which signals
it waits for."""

from __future__ import annotations

import os
import signal

import pytest

from ai_sandbox import supervise
from ai_sandbox.supervise import firejail_helper


@pytest.mark.parametrize(
    "program",
    [
        "/usr/lib/x86_64-linux-gnu/firejail/fnet",  # 0.9.72 (Debian 12)
        "/usr/lib/firejail/fseccomp",
        "/usr/libexec/firejail/fnet",
        "/run/firejail/lib/fnet",  # 0.9.74 (Debian 13) runs its helpers from its copy under /run
        "/run/firejail/lib/fseccomp",
    ],
)
def test_firejails_helpers_are_known(program):
    assert firejail_helper(program)


@pytest.mark.parametrize(
    "program", ["/usr/bin/sleep", "/home/me/src/firejail/build/agent", "/bin/sh", "/run/user/1000/agent", "claude"]
)
def test_an_agent_is_no_helper(program):
    assert not firejail_helper(program)


def test_every_signal_that_ends_a_process_by_default_is_waited_for_and_given_back():
    """The launch waits for every one the session's `kill -SIG 0` could end it with, the backend ignores them, and
    the launch check gives the agent each back: the two lists are one (verify.py cannot import signal cheaply)."""
    from ai_sandbox import verify

    left = set(signal.valid_signals()) - set(supervise.TERMINATING)
    stops = {signal.SIGSTOP, signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU}
    ignored_by_default = {signal.SIGCHLD, signal.SIGCONT, signal.SIGURG, signal.SIGWINCH}
    ignored_by_python = {signal.SIGPIPE, signal.SIGXFSZ}
    assert left == {signal.SIGKILL, *stops, *ignored_by_default, *ignored_by_python}
    assert tuple(verify._RESTORED) == supervise.TERMINATING


def test_a_sender_that_is_gone_is_never_taken_for_the_sandboxs(tmp_path):
    """An outside `/bin/kill PID` has exited when the launch looks, and its pid here is no process: the sandbox held a
    process whose own namespace numbers it so, and the user's SIGTERM was dropped (forty-sixth red team, 8 of 8, with
    the outside pid counter wrapped). A process numbered 4000001 in a pid namespace of its own stands for it: no pid
    here is that high (pid_max), and it is no kernel thread's."""
    import subprocess
    import time

    from tests.conftest import root_only

    root_only("makes a pid namespace and sets its next pid")
    script = "echo 4000000 > /proc/sys/kernel/ns_last_pid; sleep 30 & echo $!; wait"
    proc = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount-proc", "sh", "-c", script], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "4000001"
        deadline = time.monotonic() + 5
        while not any(b"4000001" in _status(c) for c in supervise.descendants(proc.pid)):
            assert time.monotonic() < deadline, "no process numbered 4000001 below"
            time.sleep(0.01)
        assert not supervise._inside(4000001, proc.pid)
        assert not supervise._inside(0, proc.pid)  # from an ancestor namespace
    finally:
        for p in supervise.children(proc.pid):  # the namespace's init: all in it die with it
            os.kill(p, signal.SIGKILL)
        proc.kill()
        proc.wait()


def _status(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            return f.read()
    except OSError:
        return b""
