"""The supervisor's pure parts: which process under firejail is one of its helpers, never the agent."""

from __future__ import annotations

import pytest

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
