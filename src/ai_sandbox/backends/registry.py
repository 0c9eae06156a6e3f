"""Every backend, with what is known of it before its module is imported: the one list the rest reads.

A new backend is its module and one entry here. The config's `backend` values, `--backend`'s choices and help,
auto's order (choose.py), which sandbox a nested launch is in (nested.py), the launch check's kind (verify.py)
and the tests' matrix (tests/conftest.py) are all read from these entries; tests/unit/test_backends.py proves
each entry's plan runs the launch check it names.
"""

from __future__ import annotations

from collections.abc import Callable

from ai_sandbox.records import value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.backends.plan import Settings
    from ai_sandbox.backends.protocol import Backend


def _firejail() -> Callable[[Settings], Backend]:
    from ai_sandbox.backends.firejail import Firejail

    return Firejail


def _bwrap() -> Callable[[Settings], Backend]:
    from ai_sandbox.backends.bwrap import Bwrap

    return Bwrap


def _docker() -> Callable[[Settings], Backend]:
    from ai_sandbox.backends.docker import Docker

    return Docker


@value
class Entry:
    """One backend. platform: where `auto` may choose it, in the order of the registry. inside: the sandbox the
    launch check proves it is in (verify.SANDBOXES), "" when no check runs inside (the docker backend: the agent
    runs in an image)."""

    name: str
    load: Callable[[], Callable[[Settings], Backend]]  # imported when first needed: a launch pays for one
    platform: str  # "linux" or "darwin"
    inside: str
    summary: str  # what it is, for --help and the docs


REGISTRY = {
    e.name: e
    for e in (
        Entry("firejail", _firejail, "linux", "firejail", "firejail with a generated profile (setuid)"),
        Entry("bwrap", _bwrap, "linux", "bwrap", "bubblewrap: user namespaces, no setuid"),
        Entry("docker", _docker, "darwin", "", "docker run (or podman) with selective mounts"),
    )
}


def on(platform: str) -> tuple[str, ...]:
    """The backends `auto` tries on platform, in order."""
    return tuple(name for name, e in REGISTRY.items() if e.platform == platform)


def auto_help() -> str:
    """How `auto` chooses, in a few words (--help, the config reference)."""
    linux = ", else ".join(on("linux"))
    return f"auto: {linux} on Linux, whichever sandboxes here; {' or '.join(on('darwin'))} on macOS"


def make(name: str, settings: Settings) -> Backend:
    """The backend called name (a key of REGISTRY)."""
    return REGISTRY[name].load()(settings)
