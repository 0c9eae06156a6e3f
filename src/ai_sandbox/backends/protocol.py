"""The one interface every backend module implements (firejail.py, bwrap.py, docker.py), listed in registry.py.
Imported only by type checkers and readers: the launch path does not pay for `typing`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from ai_sandbox.backends.plan import LaunchPlan
from ai_sandbox.errors import UnavailableError
from ai_sandbox.idents import Snapshot
from ai_sandbox.policy import Policy


class Backend(Protocol):
    name: str  # its registry key
    host_commands: bool  # the agent is a program of this machine (firejail), or of an image (docker)
    max_masks: int  # more masks than this and the launch fails or crawls: the policy widens to fit
    # directories the sandbox replaces with empty ones of its own: a project there is not in the sandbox at all
    private_dirs: tuple[str, ...]
    # files whose change can make the backend start or stop working here (firejail.users): auto's cached
    # verdict is keyed by their stat (choose.py)
    state_files: tuple[str, ...]

    def unavailable(self) -> UnavailableError | None:
        """Why this backend cannot run here, with the fix; None when it can."""

    def probe(self, env: Mapping[str, str]) -> UnavailableError | None:
        """unavailable(), and then a real start that proves this backend sandboxes here (for doctor,
        explain and --dry-run: it costs a sandbox start); None when it does."""

    def version(self) -> str | None:
        """The backend's own version line, for doctor; None when it does not answer."""

    def unexpressible(self, path: str) -> str | None:
        """Why this backend cannot hide exactly this path ("contains ','"); None when it can."""

    def plan(self, policy: Policy, argv: list[str], env: Mapping[str, str], seen: Snapshot | None = None) -> LaunchPlan:
        """The command that runs argv under the policy with env passed through, the launch check between the
        two (backends/check.py; or a reason why none runs, plan.Unchecked). seen: the launch's one look at the
        masks (idents.py), which the launch check inside compares them with; None takes one now."""
