"""Is this process already inside a sandbox that enforces a policy? Asked so a nested `ai-sandbox` (an
agent running `claude` through the shell wrappers of `ai-sandbox alias`) does not stack sandboxes.

The answer comes from the kernel's mount table, never from an environment variable: a variable can be
inherited or forged, and trusting one would run the agent unsandboxed. A nested launch runs the command
directly only when every mask of the policy it computed is already a mask mount here.
"""

from __future__ import annotations

import os
import re

from ai_sandbox.errors import UnavailableError
from ai_sandbox.policy import Mask, Policy

_OCTAL = re.compile(rb"\\([0-7]{3})")


def _unescape(field: bytes) -> str:
    """mountinfo escapes space, tab, newline and backslash as \\ooo."""
    return os.fsdecode(_OCTAL.sub(lambda m: bytes([int(m.group(1), 8)]), field))


def mounts(path: str = "/proc/self/mountinfo") -> list[tuple[str, str]]:
    """(root within its filesystem, mount point) of every mount this process sees."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return []
    out = []
    for line in data.split(b"\n"):  # not splitlines(): a path's \r is not escaped
        fields = line.split(b" ")
        if len(fields) >= 5:
            out.append((_unescape(fields[3]), _unescape(fields[4])))
    return out


CHROOT_HINT = (
    "run ai-sandbox on the host, or in a container or VM whose / is a mount of its own "
    "(podman, systemd-nspawn, or unshare --mount with pivot_root), not in a chroot"
)


def chrooted(table: list[tuple[str, str]]) -> bool:
    """In a chroot: no mount of this namespace is at / as this process sees it (its root is a directory of
    a mount whose own mount point lies outside). Neither backend sandboxes there: bwrap cannot make / a
    slave mount ("Invalid argument"), firejail leaves the system directories writable."""
    return bool(table) and not any(point == "/" for _, point in table)


def chroot_error(backend: str) -> UnavailableError | None:
    """The refusal of backend in a chroot, or None when this is no chroot."""
    if not chrooted(mounts()):
        return None
    return UnavailableError(f"{backend} cannot sandbox in a chroot (/ is not a mount point here)", CHROOT_HINT)


def inside_sandbox(table: list[tuple[str, str]]) -> bool:
    """Inside firejail or bwrap. Forging either only changes which refusal a launch gives: it still runs
    nothing unless every mask is in force."""
    return which(table) is not None


def which(table: list[tuple[str, str]]) -> str | None:
    """The kind of sandbox this process is in (verify.SANDBOXES), asked of the kernel's mount table."""
    from ai_sandbox import verify

    return verify.which_sandbox({point for _, point in table})


def unenforced(policy: Policy, table: list[tuple[str, str]]) -> list[Mask]:
    """The masks of policy that are readable here: neither firejail's mask at their path nor absent (a
    path under a masked directory does not exist inside). Asked of the files themselves, as the launch
    check asks (verify.py), not of the mount table's text, whose root field differs between hosts."""
    from ai_sandbox import verify

    unmasked = [path for path, _ in verify.unmasked([m.path for m in policy.masks])]
    tops = verify.mount_tops() if unmasked else {}
    # a scratch directory of the outer sandbox holds only what the session wrote there
    readable = {path for path in unmasked if verify.scratch_problem(path, False, tops)}
    return [m for m in policy.masks if m.path in readable]
