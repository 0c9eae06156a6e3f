"""Where the programs ai-sandbox runs outside the sandbox come from: the system's directories, never the
caller's PATH.

git and firejail (or the container engine) run with the user's rights before any sandbox exists. A
session can write `~/.local/bin`, which Debian's ~/.profile puts first on PATH: a `firejail` planted
there that runs its command directly, or a `git` that lists nothing, would make the next launch run with
no protection at all. The directories below are root's to write, and read-only inside the sandbox.
"""

from __future__ import annotations

import os
import sys

SYSTEM_PATH = (
    "/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
    "/run/current-system/sw/bin", "/nix/var/nix/profiles/default/bin",  # NixOS: links into the read-only store
    "/opt/homebrew/bin", "/opt/local/bin",  # macOS (the docker backend): Homebrew, MacPorts
)  # fmt: skip
# Where a found program must really be (links resolved): what a root agent cannot write inside the sandbox
# either (/usr is read-only there; /run and /opt are not, so a link found through them must lead here).
_TRUSTED = ("/usr/", "/bin/", "/sbin/", "/nix/store/")
_TRUSTED_MAC = ("/opt/homebrew/", "/opt/local/", "/Applications/")

_found: dict[str, str | None] = {}


def find(name: str) -> str | None:
    """The first executable `name` in SYSTEM_PATH that really lives in a trusted place, or None."""
    if name not in _found:
        trusted = _TRUSTED + (_TRUSTED_MAC if sys.platform == "darwin" else ())
        if not _read_only("/nix/store"):  # NixOS mounts it read-only; elsewhere a root agent could create it
            trusted = tuple(t for t in trusted if t != "/nix/store/")
        _found[name] = None
        for d in SYSTEM_PATH:
            p = os.path.join(d, name)
            if os.path.isfile(p) and os.access(p, os.X_OK) and os.path.realpath(p).startswith(trusted):
                _found[name] = p
                break
    return _found[name]


def _read_only(path: str) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def where() -> str:
    """For messages: where ai-sandbox looks."""
    return ", ".join(SYSTEM_PATH[:6])


def install_hint(package: str, url: str) -> str:
    """How to install package on this distribution (from /etc/os-release)."""
    ids = ""
    try:
        with open("/etc/os-release", encoding="utf-8") as f:
            for line in f:
                if line.startswith(("ID=", "ID_LIKE=")):
                    ids += " " + line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    words = set(ids.split())
    if words & {"debian", "ubuntu"}:
        return f"install it with `sudo apt-get install {package}`"
    if words & {"fedora", "rhel", "centos"}:
        return f"install it with `sudo dnf install {package}`"
    if words & {"arch"}:
        return f"install it with `sudo pacman -S {package}`"
    if words & {"suse", "opensuse"}:
        return f"install it with `sudo zypper install {package}`"
    return f"install {package} from your distribution's packages ({url})"


def version(executable: str | None) -> str | None:
    """The first line `executable --version` prints, for doctor; None when it does not answer."""
    import subprocess

    if executable is None:
        return None
    try:
        proc = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    first = proc.stdout.strip().splitlines()[:1]
    return first[0] if proc.returncode == 0 and first else None
