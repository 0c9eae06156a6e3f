"""git's answers for a launch, asked before the `ai-sandbox` command imports the rest of itself.

Every launch asks git which work tree it is in, then lists it (three `ls-files` side by side: ~15 ms on a
100,000-file repository), after ~15 ms of imports that do not need git. Started first (entry.py), git walks the
tree on one core while the interpreter imports on the other. Nothing here decides anything: git/repo.py and
git/listing.py take over a started call only when its command line and environment are exactly the ones they
would start themselves (`adopt`), and start their own otherwise; what is never taken over is killed and reaped
when the launch has its policy (`discard`, at the end of launch.prepare), before any sandbox exists to hold it.
Until then SIGTERM ends the command through Python (`Terminated`), which kills and reaps the git it started: by
default a `timeout` or `kill` left git waiting forever on a FIFO a session made of an ignore file (red team).
Imports only what starting git needs (os, spawn, gitcommand).
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # loaded at start; signal.py would import enum (~3 ms)
import contextlib
import os
from collections.abc import Mapping

from ai_sandbox import gitcommand, spawn

# The launch's options that take a value (options.OPTIONS with a metavar) and the subcommands, none of which is a
# launch: a test holds them to options.py, which this module does not import (it imports config: ~10 ms).
VALUED = frozenset({"--backend", "--network", "--engine", "--image"})
SUBCOMMANDS = frozenset({"explain", "init", "doctor", "alias", "profiles", "accept"})
_NOT_LAUNCHES = frozenset({"-h", "--help", "--version", "--install-completion", "--show-completion"})


class Terminated(BaseException):
    """SIGTERM arrived while the launch asked git (entry.py ends the command by that signal once git is reaped)."""


_Key = tuple[tuple[str, ...], tuple[tuple[str, str], ...]]  # a command line and its environment
_started: dict[_Key, spawn.Child] = {}
_answered: dict[_Key, spawn.Finished | spawn.TimedOut] = {}
_terminating: list[object] = []  # SIGTERM's disposition before start() set its own, while it is set (one at most)


def launching(words: list[str]) -> bool:
    """Whether these command-line words are a launch (`ai-sandbox [OPTIONS] AGENT …` or `… -- CMD`), read as
    main.parse reads them; a guess that is wrong costs only a git call that nobody takes over."""
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return i + 1 < len(words)
        if not word.startswith("-") or word == "-":
            return word not in SUBCOMMANDS
        if word in _NOT_LAUNCHES:
            return False
        i += 2 if word in VALUED else 1
    return False


def start(words: list[str]) -> None:
    """For a launch: ask git for the work tree of the current directory, and start the scan of it. Any failure
    leaves the asking to the launch (which says what went wrong)."""
    if not launching(words) or any(name in os.environ for name in gitcommand.REPO_VARIABLES):
        return
    discard()  # a start before: its calls ended and SIGTERM given back, so that the disposition saved is the caller's
    _terminating.append(_signal.signal(_signal.SIGTERM, _terminated))
    try:
        cwd = os.path.realpath(os.getcwd())
        where = gitcommand.argv(gitcommand.WHERE, cwd)
        env = gitcommand.hardened()
        try:
            answer = spawn.run(where, env, timeout=gitcommand.QUICK)
        except spawn.TimedOut as e:  # the launch says so, without waiting as long again
            _answered[_key(where, env)] = e
            return
        _answered[_key(where, env)] = answer
        lines = answer.stdout.split(b"\n")
        if answer.returncode != 0 or len(lines) != 3:
            return
        root = os.fsdecode(lines[0])
        env = gitcommand.scan_env()
        for args in gitcommand.SCAN.values():
            argv = gitcommand.argv(args, root)
            # room for a listing of ~10,000 paths: git walks on while the command imports, rather than wait for a reader
            _started[_key(argv, env)] = spawn.start(argv, env, room=1 << 20)
    except Exception:
        discard()


def answered(argv: list[str], env: Mapping[str, str]) -> spawn.Finished | spawn.TimedOut | None:
    """git's answer to argv in env (or that it took too long), if it was asked already; once: a later question
    asks git again."""
    return _answered.pop(_key(argv, env), None) if _answered else None


def adopt(argv: list[str], env: Mapping[str, str]) -> spawn.Child | None:
    """The started call of argv in env, which the caller now owns (collects and reaps), if there is one."""
    return _started.pop(_key(argv, env), None) if _started else None


def discard() -> None:
    """Every started call nobody took over: killed and reaped; SIGTERM's disposition as it was."""
    if _terminating:
        _signal.signal(_signal.SIGTERM, _terminating.pop())
    _answered.clear()
    children = list(_started.values())
    _started.clear()
    if children:
        with contextlib.suppress(spawn.TimedOut):  # collect's way of killing them at once
            spawn.collect({str(i): c for i, c in enumerate(children)}, 0)


def _terminated(signum: int, frame: object) -> None:
    raise Terminated


def _key(argv: list[str], env: Mapping[str, str]) -> _Key:
    return tuple(argv), tuple(sorted(env.items()))
