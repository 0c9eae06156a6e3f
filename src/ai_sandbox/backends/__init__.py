"""Sandbox backends: each one module behind the small `Backend` protocol, listed in one registry.

A backend turns the policy (one value) and the agent's argv into the exact command to exec. It also
tells the policy which paths it cannot name, so the policy can widen them before anything runs.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

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
    fds: dict[int, bytes] = factory(dict)  # data readable at these descriptors of the command (bwrap's --args)
    supervised: bool = False  # the launch stays the command's parent and passes signals on (supervise.py)


@record
class Settings:
    """What a backend may need beyond the policy; firejail needs only the cwd (its launch check)."""

    engine: str = "docker"  # the container CLI: docker or podman
    image: str = ""
    home: list[str] = factory(list)  # the agent's home state (its profile's `home`)
    mounts: list[str] = factory(list)  # the user's extra paths for the container
    cwd: str = ""


def descriptor_args(data: bytes) -> list[str] | None:
    """What a command reads at one of its descriptors, as the arguments it holds (bwrap's --args: each one
    NUL-terminated); None for binary data (bwrap's seccomp program)."""
    if data and not data.endswith(b"\0"):
        return None
    return os.fsdecode(data).split("\0")[:-1]


def _firejail(settings: Settings) -> Backend:
    from ai_sandbox.backends.firejail import Firejail

    return Firejail(settings)


def _bwrap(settings: Settings) -> Backend:
    from ai_sandbox.backends.bwrap import Bwrap

    return Bwrap(settings)


def _docker(settings: Settings) -> Backend:
    from ai_sandbox.backends.docker import Docker

    return Docker(settings)


REGISTRY = {"firejail": _firejail, "bwrap": _bwrap, "docker": _docker}


def select(name: str, settings: Settings | None = None, env: Mapping[str, str] | None = None) -> Backend:
    """The backend called name; `auto`: docker on macOS, on Linux the first of firejail and bwrap that
    sandboxes here (choose.py)."""
    if name == "auto":
        if sys.platform.startswith("linux"):
            from ai_sandbox.backends import choose

            return choose.linux(settings or Settings(), os.environ if env is None else env)
        name = "docker"
        if sys.platform != "darwin":
            raise UnavailableError(
                f"no sandbox backend for {sys.platform}",
                "ai-sandbox runs on Linux (firejail, bwrap) and macOS (docker)",
            )
    factory = REGISTRY.get(name)
    if factory is None:
        raise UsageError(f"unknown backend {name!r}", f"use one of: auto, {', '.join(REGISTRY)}")
    return factory(settings or Settings())
