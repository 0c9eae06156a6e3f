"""Where the programs ai-sandbox runs outside the sandbox come from: the system's directories, never the
caller's PATH.

git and firejail (or the container engine) run with the user's rights before any sandbox exists. A
session can write `~/.local/bin`, which Debian's ~/.profile puts first on PATH: a `firejail` planted
there that runs its command directly, or a `git` that lists nothing, would make the next launch run with
no protection at all. The directories below are root's to write, and read-only inside the sandbox.
"""

from __future__ import annotations

import os

SYSTEM_PATH = (
    "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
    "/run/current-system/sw/bin", "/nix/var/nix/profiles/default/bin",  # NixOS: links into the read-only store
    "/opt/homebrew/bin", "/opt/local/bin",  # macOS (the docker backend): Homebrew, MacPorts
)  # fmt: skip

_found: dict[str, str | None] = {}


def find(name: str) -> str | None:
    """The first executable `name` in SYSTEM_PATH, or None."""
    if name not in _found:
        _found[name] = next(
            (p for d in SYSTEM_PATH if os.access(p := os.path.join(d, name), os.X_OK) and os.path.isfile(p)), None
        )
    return _found[name]


def where() -> str:
    """For messages: where ai-sandbox looks."""
    return ", ".join(SYSTEM_PATH[:6])
