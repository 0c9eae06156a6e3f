"""The supervisor's pure parts: which process under firejail is one of its helpers, never the agent; which signals
it waits for."""

from __future__ import annotations

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
