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


class Backend(Protocol):
    name: str

    def unavailable(self) -> UnavailableError | None:
        """Why this backend cannot run here, with the fix; None when it can."""

    def version(self) -> str | None:
        """The backend's own version line, for doctor; None when it does not answer."""

    def unexpressible(self, path: str) -> str | None:
        """Why this backend cannot hide exactly this path ("contains ','"); None when it can."""

    def plan(self, policy: Policy, argv: list[str], env: Mapping[str, str]) -> LaunchPlan:
        """The command that runs argv under the policy with env passed through."""


def _firejail() -> Backend:
    from ai_sandbox.backends.firejail import Firejail  # noqa: PLC0415

    return Firejail()


REGISTRY = {"firejail": _firejail}


def select(name: str) -> Backend:
    if name == "auto":
        if sys.platform.startswith("linux"):
            name = "firejail"
        else:
            raise UnavailableError(
                f"no sandbox backend for {sys.platform} yet",
                "ai-sandbox runs on Linux with firejail; the container backend for macOS is planned",
            )
    factory = REGISTRY.get(name)
    if factory is None:
        raise UsageError(f"unknown backend {name!r}", f"use one of: auto, {', '.join(REGISTRY)}")
    return factory()
