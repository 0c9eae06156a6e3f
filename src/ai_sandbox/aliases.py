"""`ai-sandbox alias`: shell functions so typing `claude` runs `ai-sandbox claude`.

Functions, not aliases: they take arguments in every shell and are invisible to other programs, so
ai-sandbox's own PATH lookup finds the real agent. Inside the sandbox the same functions call a nested
ai-sandbox, which runs the agent directly when the sandbox it is in already hides everything (`nested`).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import sys

from ai_sandbox.errors import UsageError

SHELLS = ("bash", "zsh", "fish")
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


def detect_shell(env: dict[str, str]) -> str:
    name = os.path.basename(env.get("SHELL", ""))
    return name if name in SHELLS else "bash"


def launcher() -> str:
    """How the wrappers call ai-sandbox: by name when PATH finds this very program, else by full path."""
    me = os.path.realpath(sys.argv[0]) if sys.argv and sys.argv[0] else ""
    found = shutil.which("ai-sandbox")
    if found and (not me or os.path.realpath(found) == me):
        return "ai-sandbox"
    return me or "ai-sandbox"


def render(names: list[str], shell: str, program: str) -> str:
    if shell not in SHELLS:
        raise UsageError(f"unknown shell {shell!r}", f"use one of: {', '.join(SHELLS)}")
    for n in names:
        if not _SAFE_NAME.match(n):
            raise UsageError(f"profile name {n!r} cannot be a shell function name", "rename the profile file")
    how = "ai-sandbox alias --shell fish | source" if shell == "fish" else f'eval "$(ai-sandbox alias --shell {shell})"'
    lines = [f"# ai-sandbox wrappers for {shell}; in your rc file: {how}", "# `command NAME` runs an agent unwrapped."]
    if shell == "fish":
        prog = _fish_quote(program)
        for n in names:
            lines.append(f"function {n} --wraps {n} --description 'ai-sandbox {n}'; command {prog} {n} $argv; end")
    else:
        prog = shlex.quote(program)
        for n in names:
            # `function NAME` is never alias-expanded; `command` skips functions, so nothing recurses
            lines.append(f'function {n} {{ command {prog} {n} "$@"; }}')
    return "\n".join(lines) + "\n"


def _fish_quote(s: str) -> str:
    if re.match(r"^[A-Za-z0-9_./-]+$", s):
        return s
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"
