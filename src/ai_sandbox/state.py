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

from ai_sandbox import records
from ai_sandbox.errors import PolicyError
from ai_sandbox.policy import CAP_NOTE, COLLAPSE_NOTE, Policy


def state_dir(env: Mapping[str, str]) -> str:
    base = env.get("XDG_STATE_HOME") or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "ai-sandbox")


def _prefix(root: str) -> str:
    return hashlib.sha256(os.fsencode(root)).hexdigest()[:24]


def record_path(env: Mapping[str, str], root: str) -> str:
    return os.path.join(state_dir(env), "hidden", _prefix(root))


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return b""
    except OSError as e:
        raise PolicyError(f"cannot read {path}: {e.strerror}", "check its permissions, or delete it") from None


def load(path: str) -> list[str]:
    return [os.fsdecode(p) for p in _read(path).split(b"\0") if p]


_MERGED = (CAP_NOTE, COLLAPSE_NOTE)
_BUILT_IN = ("(built-in tool allowlist)", "(dependency directory)")


def _kept_by_code(policy: Policy) -> dict[str, bool]:
    """The paths the profile or the built-in allowlists keep readable (path -> is_dir)."""
    return {k.path: k.is_dir for k in policy.kept if k.rule.endswith(_BUILT_IN) or "(profile " in k.rule}


def _under(path: str, kept: dict[str, bool]) -> bool:
    if path in kept:
        return True
    p = os.path.dirname(path)
    while True:
        if kept.get(p):
            return True
        parent = os.path.dirname(p)
        if parent == p:
            return False
        p = parent


def unhidden(policy: Policy, previous: list[str]) -> list[str]:
    """Paths the last launch hid that still exist and this policy would leave readable."""
    kept = _kept_by_code(policy)
    return [p for p in previous if policy.hidden(p) is None and not _under(p, kept) and os.path.lexists(p)]


@records.record
class Record:
    path: str
    content: bytes  # this launch's masks, as the record holds them
    unchanged: bool  # the record already says exactly that


def _content(policy: Policy) -> bytes:
    """The masks the rules asked for: a directory hidden whole only to fit the backend's limit is
    recorded as the paths inside it, or a later launch under the limit would look like an un-hiding."""
    paths = [m.path for m in policy.masks if not m.note.startswith(_MERGED)] + [m.path for m in policy.capped]
    return os.fsencode("\0".join(paths)) + b"\0" if paths else b""


def check(policy: Policy, env: Mapping[str, str]) -> Record:
    """Refuse if this launch would reveal what the last one hid; returns what `record` writes."""
    path = record_path(env, policy.root)
    before, now = _read(path), _content(policy)
    if before == now:  # the usual launch: the same masks as last time, nothing to look at
        return Record(path, now, True)
    lost = unhidden(policy, [os.fsdecode(p) for p in before.split(b"\0") if p])
    if lost:
        shown = ", ".join(lost[:3]) + (f" and {len(lost) - 3} more" if len(lost) > 3 else "")
        raise PolicyError(
            f"{shown} was hidden at the last launch and would be readable now: a rule changed "
            "(.gitignore, .ai-sandbox.toml or your config.toml — possibly from inside the sandbox)",
            "see why with `ai-sandbox explain PATH`; if the change is yours, run `ai-sandbox accept`",
        )
    return Record(path, now, False)


def record(rec: Record) -> None:
    """Remember this launch's masks (rewritten only when they changed)."""
    if rec.unchanged:
        return
    os.makedirs(os.path.dirname(rec.path), mode=0o700, exist_ok=True)
    tmp = f"{rec.path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(rec.content)
    os.replace(tmp, rec.path)


def forget(env: Mapping[str, str], root: str) -> int:
    """`ai-sandbox accept`: drop the project's record; returns how many were dropped (0 or 1)."""
    try:
        os.unlink(record_path(env, root))
    except FileNotFoundError:
        return 0
    return 1
