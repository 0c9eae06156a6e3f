"""What a backend hands the launch: the command to exec, with the launch check in it, and what to prepare.

A plan cannot put the agent in a sandbox without saying what proves the sandbox: the command is assembled
here, `sandbox + check + agent`, from a `Checked` (the launch check, verify.py, made by
`backends.check.checked()`) or an `Unchecked` with its reason (docker: the agent runs in an image, where
nothing of ours runs), which `--dry-run` shows. tests/unit/test_backends.py proves, for every backend in the
registry, that its plan runs the check its registry entry names.
"""

from __future__ import annotations

import os

from ai_sandbox.records import factory, record, value


@record
class Settings:
    """What a backend may need beyond the policy; firejail needs only the cwd (its launch check)."""

    engine: str = "docker"  # the container CLI: docker or podman
    image: str = ""
    home: list[str] = factory(list)  # the agent's home state (its profile's `home`)
    mounts: list[str] = factory(list)  # the user's extra paths for the container: `mounts` and `writable`
    cwd: str = ""


@value
class Checked:
    """The launch check the sandbox runs before the agent: its command and the spec it reads."""

    argv: tuple[str, ...]  # python -I -S verify.py SPEC (or verify's bytecode, copied into the cache)
    path: str  # where the spec is written before the exec
    spec: bytes
    compiled: tuple[str, bytes] | None = None  # the copy of verify's bytecode the check runs, written beside it


@value
class Unchecked:
    """A backend that runs no launch check inside, and why (shown by --dry-run and explain)."""

    reason: str


@record
class LaunchPlan:
    sandbox: list[str]  # the backend's command, up to the command it runs
    agent: list[str]  # the agent's argv, verbatim
    check: Checked | Unchecked  # run between the two: the sandbox proves itself before the agent starts
    env: dict[str, str]  # the command's environment
    extra_files: dict[str, bytes] = factory(dict)  # written before the exec (generated profiles)
    dirs: dict[str, int] = factory(dict)  # created (with this mode) before the exec
    scratch: list[str] = factory(list)  # hidden directories shown as an empty, writable, per-session directory
    fds: dict[int, bytes] = factory(dict)  # data readable at these descriptors of the command (bwrap's --args)
    supervised: bool = False  # the launch stays the command's parent and passes signals on (supervise.py)
    # signals the launch passes to the backend itself, not the agent: it passes them on and ends the whole sandbox
    # (firejail's SIGINT and SIGTERM: its sandbox otherwise lives on while any process in it runs)
    to_backend: tuple[int, ...] = ()
    outlives: bool = False  # the backend runs on when the launch is killed (no --die-with-parent): a watcher ends it

    @property
    def argv(self) -> list[str]:
        """What is exec'd: the sandbox, the launch check, the agent."""
        if isinstance(self.check, Unchecked):
            return [*self.sandbox, *self.agent]
        return [*self.sandbox, *self.check.argv, *self.agent]

    @property
    def files(self) -> dict[str, bytes]:
        """Everything written before the exec: the backend's own files and the launch check's spec."""
        if isinstance(self.check, Unchecked):
            return dict(self.extra_files)
        compiled = dict([self.check.compiled] if self.check.compiled else [])
        return {**self.extra_files, **compiled, self.check.path: self.check.spec}


def descriptor_args(data: bytes) -> list[str] | None:
    """What a command reads at one of its descriptors, as the arguments it holds (bwrap's --args: each one
    NUL-terminated); None for binary data (bwrap's seccomp program)."""
    if data and not data.endswith(b"\0"):
        return None
    return os.fsdecode(data).split("\0")[:-1]
