"""Sandbox backends: each one module behind the small `Backend` protocol, listed in one registry.

A backend turns the policy (one value) and the agent's argv into the exact command to exec. It also
tells the policy which paths it cannot name, so the policy can widen them before anything runs.
"""

from __future__ import annotations

import sys

from ai_sandbox.errors import UnavailableError, UsageError
from ai_sandbox.records import factory, record

TYPE_CHECKING = False  # typing costs ~4 ms at every launch; the Protocol is for readers and type checkers
if TYPE_CHECKING:
    from ai_sandbox.backends.protocol import Backend


@record
class LaunchPlan:
    argv: list[str]  # what is exec'd
    env: dict[str, str]  # its environment
    files: dict[str, bytes] = factory(dict)  # written before the exec (generated profiles)
    dirs: dict[str, int] = factory(dict)  # created (with this mode) before the exec
    scratch: list[str] = factory(list)  # hidden directories shown as an empty, writable, per-session directory


@record
class Settings:
    """What a backend may need beyond the policy; firejail needs only the cwd (its launch check)."""

    engine: str = "docker"  # the container CLI: docker or podman
    image: str = ""
    home: list[str] = factory(list)  # the agent's home state (its profile's `home`)
    mounts: list[str] = factory(list)  # the user's extra paths for the container
    cwd: str = ""


def _firejail(settings: Settings) -> Backend:
    from ai_sandbox.backends.firejail import Firejail

    return Firejail(settings)


def _docker(settings: Settings) -> Backend:
    from ai_sandbox.backends.docker import Docker

    return Docker(settings)


REGISTRY = {"firejail": _firejail, "docker": _docker}


def select(name: str, settings: Settings | None = None) -> Backend:
    if name == "auto":
        name = "docker" if sys.platform == "darwin" else "firejail"
        if not sys.platform.startswith(("linux", "darwin")):
            raise UnavailableError(
                f"no sandbox backend for {sys.platform}", "ai-sandbox runs on Linux (firejail) and macOS (docker)"
            )
    factory = REGISTRY.get(name)
    if factory is None:
        raise UsageError(f"unknown backend {name!r}", f"use one of: auto, {', '.join(REGISTRY)}")
    return factory(settings or Settings())
