"""Sandbox backends: each one module behind the small `Backend` protocol, listed in one registry.

A backend turns the policy (one value) and the agent's argv into the exact command to exec. It also
tells the policy which paths it cannot name, so the policy can widen them before anything runs.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ai_sandbox.errors import UnavailableError, UsageError
from ai_sandbox.policy import Policy


@dataclass
class LaunchPlan:
    argv: list[str]  # what is exec'd
    env: dict[str, str]  # its environment
    files: dict[str, bytes] = field(default_factory=dict)  # written before the exec (generated profiles)
    dirs: dict[str, int] = field(default_factory=dict)  # created (with this mode) before the exec


@dataclass
class Settings:
    """What a backend may need beyond the policy; firejail needs none of it."""

    engine: str = "docker"  # the container CLI: docker or podman
    image: str = ""
    home: list[str] = field(default_factory=list)  # the agent's home state (its profile's `home`)
    mounts: list[str] = field(default_factory=list)  # the user's extra paths for the container
    cwd: str = ""


class Backend(Protocol):
    name: str
    host_commands: bool  # the agent is a program of this machine (firejail), or of an image (docker)

    def unavailable(self) -> UnavailableError | None:
        """Why this backend cannot run here, with the fix; None when it can."""

    def version(self) -> str | None:
        """The backend's own version line, for doctor; None when it does not answer."""

    def unexpressible(self, path: str) -> str | None:
        """Why this backend cannot hide exactly this path ("contains ','"); None when it can."""

    def plan(self, policy: Policy, argv: list[str], env: Mapping[str, str]) -> LaunchPlan:
        """The command that runs argv under the policy with env passed through."""


def _firejail(settings: Settings) -> Backend:
    from ai_sandbox.backends.firejail import Firejail  # noqa: PLC0415

    return Firejail()


def _docker(settings: Settings) -> Backend:
    from ai_sandbox.backends.docker import Docker  # noqa: PLC0415

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
