"""What the last launch hid in a project: a launch never un-hides it silently.

The rules come from files an agent can edit from inside (.gitignore, .ai-sandbox.toml, your config.toml):
without a memory, one session could make the next one reveal a secret. So every launch records the paths
it hid, and the next launch refuses when one of them still exists but would be readable, until the user
runs `ai-sandbox accept`. The record and the user config are read-only inside the sandbox.

One record per project, whatever the agent: a path that this agent's profile or the built-in allowlists
keep readable is not "un-hidden" (those rules are not files a session can edit), so switching agents
does not trip it.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping

from ai_sandbox.errors import PolicyError
from ai_sandbox.policy import Policy


def state_dir(env: Mapping[str, str]) -> str:
    base = env.get("XDG_STATE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "ai-sandbox")


def _prefix(root: str) -> str:
    return hashlib.sha256(os.fsencode(root)).hexdigest()[:24]


def record_path(env: Mapping[str, str], root: str) -> str:
    return os.path.join(state_dir(env), "hidden", _prefix(root))


def load(path: str) -> list[str]:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    except OSError as e:
        raise PolicyError(f"cannot read {path}: {e.strerror}", "check its permissions, or delete it") from None
    return [os.fsdecode(p) for p in data.split(b"\0") if p]


_BUILT_IN = ("(built-in tool allowlist)", "(dependency directory)")


def _kept_by_code(policy: Policy, path: str) -> bool:
    for k in policy.kept:
        if (path == k.path or (k.is_dir and path.startswith(k.path + "/"))) and (
            k.rule.endswith(_BUILT_IN) or "(profile " in k.rule
        ):
            return True
    return False


def unhidden(policy: Policy, previous: list[str]) -> list[str]:
    """Paths the last launch hid that still exist and this policy would leave readable."""
    return [p for p in previous if os.path.lexists(p) and policy.hidden(p) is None and not _kept_by_code(policy, p)]


def check(policy: Policy, env: Mapping[str, str]) -> str:
    """Refuse if this launch would reveal what the last one hid; returns the record's path."""
    path = record_path(env, policy.root)
    lost = unhidden(policy, load(path))
    if lost:
        shown = ", ".join(lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
        raise PolicyError(
            f"{shown} was hidden at the last launch and would be readable now: a rule changed "
            "(.gitignore, .ai-sandbox.toml or your config.toml — possibly from inside the sandbox)",
            "see why with `ai-sandbox explain PATH`; if the change is yours, run `ai-sandbox accept`",
        )
    return path


def record(policy: Policy, path: str) -> None:
    """Remember this launch's masks (rewritten only when they changed)."""
    content = b"".join(os.fsencode(m.path) + b"\0" for m in policy.masks)
    try:
        with open(path, "rb") as f:
            if f.read() == content:
                return
    except OSError:
        pass
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(content)
    os.replace(tmp, path)


def forget(env: Mapping[str, str], root: str) -> int:
    """`ai-sandbox accept`: drop the project's record; returns how many were dropped (0 or 1)."""
    try:
        os.unlink(record_path(env, root))
    except FileNotFoundError:
        return 0
    return 1
