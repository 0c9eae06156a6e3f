"""The firejail backend's pure parts: which names it can express, the profile, the env restoration."""

from __future__ import annotations

import pytest

from ai_sandbox.backends.firejail import ADDED, Firejail, restore_env
from ai_sandbox.policy import Mask, Policy

fj = Firejail()


@pytest.mark.parametrize("ch", list(',"\\{};&%<>!^#') + ["\t", "\n", "\x7f", "[", "]"])
def test_rejected_characters(ch):
    assert fj.unexpressible(f"/p/a{ch}b") is not None


@pytest.mark.parametrize("path", ["/p/a..b", "/p/trail ", "/p/" + "x" * 4100])
def test_rejected_shapes(path):
    assert fj.unexpressible(path) is not None


@pytest.mark.parametrize("path", ["/p/a b", "/p/a'b", "/p/a*b", "/p/a?b", "/p/é", "/p/a.b", "/p/ lead", "/p/a=b:c@d"])
def test_expressible(path):
    assert fj.unexpressible(path) is None


def test_profile_drops_capabilities_and_lists_masks():
    pol = Policy(
        root="/p", in_git=True, masks=[Mask("/p/.env", False, "ignored", "r"), Mask("/p/d", True, "ignored", "r")]
    )
    text = fj.profile(pol).decode()
    assert "caps.drop all\n" in text and "nonewprivs\n" in text
    assert text.endswith("blacklist /p/.env\nblacklist /p/d\n")


def test_restore_env_puts_back_what_firejail_changes():
    env = {"TMPDIR": "/t", "LD_PRELOAD": "x.so", "MALLOC_ARENA_MAX": "2", "SHELL": "/bin/zsh", "A-B": "1", "HOME": "/h"}
    args = restore_env(env)
    assert "TMPDIR=/t" in args and "LD_PRELOAD=x.so" in args and "MALLOC_ARENA_MAX=2" in args
    assert "SHELL=/bin/zsh" in args and "A-B=1" in args
    assert "HOME=/h" not in args
    unset = {args[i + 1] for i, a in enumerate(args) if a == "-u"}
    assert unset == set(ADDED) - {"SHELL"}
