"""Where ai-sandbox keeps its own files. Each directory is read-only (or hidden) inside the sandbox
(backends/host.py `own_files`), so a session cannot change what the next launch reads.

- config: `$XDG_CONFIG_HOME/ai-sandbox` — the user's config.toml and profiles;
- state:  `$XDG_STATE_HOME/ai-sandbox` — what earlier launches hid, the index marks' journal, parsed configs;
- cache:  `$XDG_CACHE_HOME/ai-sandbox` — generated profiles and checks, remembered directory listings.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

TYPE_CHECKING = False
if TYPE_CHECKING:
    from hashlib import sha256 as sha256
else:  # the interpreter's own SHA-256 (3.12+: _sha2, before: _sha256): hashlib loads OpenSSL, ~3.5 ms a launch.
    # Chosen by version, never by a failing import: one that fails searches every entry of sys.path, where a
    # module planted in a writable one would run (thirtieth red team: `_sha2.py` beside an editable install)
    import sys

    try:
        if sys.version_info >= (3, 12):
            from _sha2 import sha256
        else:
            from _sha256 import sha256
    except ImportError:  # pragma: no cover - a Python built without its own hashes
        from hashlib import sha256


def _home(env: Mapping[str, str]) -> str:
    return env.get("HOME") or os.path.expanduser("~")


def config_home(env: Mapping[str, str] = os.environ) -> str:
    base = env.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return os.path.join(base, "ai-sandbox")


def state_dir(env: Mapping[str, str]) -> str:
    base = env.get("XDG_STATE_HOME") or os.path.join(_home(env), ".local", "state")
    return os.path.join(base, "ai-sandbox")


def cache_dir(env: Mapping[str, str]) -> str:
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "ai-sandbox")


def shipped_dir() -> str:
    """The agent profiles (and the docker backend's Dockerfile) that come with ai-sandbox."""
    here = os.path.dirname(os.path.abspath(__file__))
    inside = os.path.join(here, "profiles")  # in the wheel
    if os.path.isdir(inside):
        return inside
    return os.path.join(os.path.dirname(os.path.dirname(here)), "profiles")  # a source checkout


def project_key(root: str) -> str:
    """A project's file name in the state and cache directories."""
    return sha256(os.fsencode(root)).hexdigest()[:24]


def project_cache(env: Mapping[str, str], root: str, kind: str) -> str:
    """Where listings of this project are remembered (`listings`, `outputs`): in the cache, read-only inside,
    so a session cannot hide a FIFO, or a secret it wrote into a build output, from the next launch."""
    return os.path.join(cache_dir(env), kind, project_key(root))
