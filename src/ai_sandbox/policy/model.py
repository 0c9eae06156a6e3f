"""The policy's value: what one launch hides, why, and what stays readable (`Policy`), and the parts it is made of
(`Entry`, `Mask`, `Kept`, `Notice`, with the `Layer`, `How` and `Kind` every decision reads). build.py makes
it, resolve.py finds where each path really lands, fit.py fits it to a backend.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from enum import StrEnum  # already imported by re: free on the launch path

from ai_sandbox.fs import below, inside
from ai_sandbox.network import Network
from ai_sandbox.patterns import Origin, Pattern
from ai_sandbox.records import factory, record, value
from ai_sandbox.sockets import Sockets
from ai_sandbox.writes import Writes


class Layer(StrEnum):
    """Where a hidden path comes from; in this order, the first names a path several layers hide."""

    GLOBAL = "global"  # the user's config.toml
    IGNORED = "ignored"  # git-ignored
    CRYPT = "git-crypt"  # encrypted by git-crypt, or its key directory
    EXPLICIT = "explicit"  # the project's .ai-sandbox.toml


GLOBAL, IGNORED, CRYPT, EXPLICIT = Layer.GLOBAL, Layer.IGNORED, Layer.CRYPT, Layer.EXPLICIT
LAYERS = tuple(Layer)
RANK = {layer: i for i, layer in enumerate(LAYERS)}


class How(StrEnum):
    """Why a mask is not exactly the entry that asked for it."""

    EXACT = ""
    SPLIT = "split"  # a child of an ignored directory split to keep an allowed path inside it readable
    SYMLINK_TARGET = "symlink target"  # the entry is a link: its target is masked
    WIDENED = "widened"  # the backend cannot name the entry: its nearest nameable parent is hidden
    CAPPED = "capped"  # hidden whole to stay within the backend's mask limit
    COLLAPSED = "collapsed"  # hidden whole because every entry in it was hidden anyway


class Kind(StrEnum):
    """What a notice is about. The launch prints only the loud ones (the agent owns the terminal)."""

    SYMLINK = "symlink"
    NEVER_MASKED = "never-masked"
    WIDENED = "widened"
    ALLOWED_BUT_HIDDEN = "allowed-but-hidden"
    UNLISTABLE = "unlistable"
    HISTORY = "history"
    HARDLINK = "hardlink"
    CONFIG = "config"
    NOT_GIT = "not-git"
    CWD_HIDDEN = "cwd-hidden"
    UNHIDDEN = "unhidden"
    CAPPED = "capped"
    HIDDEN_EDIT = "hidden-edit"


# Operating-system content: every program in the sandbox reads it and a package manager owns it, so a mask
# there would break or blind the whole sandbox (an ignored `passwd.link -> /etc/passwd` must never hide
# /etc/passwd for every program). A link from the project into it is never masked.
SYSTEM_DIRS = (
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin", "/sys", "/usr",
    "/nix/store", "/gnu/store", "/snap", "/System", "/Library", "/Applications", "/private/etc",
)  # fmt: skip
# System content that also holds the machine's secrets (TLS keys, service credentials): a hidden path that
# resolves there can neither be masked nor called public, so the launch refuses. Elsewhere in SYSTEM_DIRS the
# content is public by design (a nix `result -> /nix/store/…` link is common): not hidden, and explain says so.
CONFIG_DIRS = ("/etc", "/private/etc", "/usr/local/etc", "/usr/etc", "/opt/homebrew/etc")
# Places for data, shared by every program: what a link points at in them is masked (docker secrets live in
# /run/secrets, services' state in /var/lib/…), never one of these directories whole. /dev/shm is data inside
# /dev.
SHARED_DIRS = (
    "/run", "/var", "/tmp", "/srv", "/opt", "/mnt", "/media", "/home", "/root", "/Users", "/Volumes", "/dev/shm",
    "/run/user", "/run/lock", "/var/tmp", "/var/lib", "/var/log", "/var/cache", "/var/spool", "/var/mail",
    "/var/local", "/var/opt", "/var/www", "/private", "/private/var", "/private/tmp",
)  # fmt: skip


@value
class Entry:
    """One thing a layer wants hidden: an absolute path and the reason, before any resolution."""

    path: str
    is_dir: bool
    layer: Layer
    reason: str
    # git listed it while walking a work tree whose root is a real path: no directory above it (nor the
    # entry itself, when is_dir) is a symlink, so resolving it needs no lstat (a monorepo has thousands)
    walked: bool = False


@value
class Mask:
    """One path the backend hides. `origin` is the entry's own path when the mask differs from it."""

    path: str
    is_dir: bool
    layer: Layer
    reason: str
    origin: str = ""
    how: How = How.EXACT  # why the mask is not the entry itself
    detail: str = ""  # for people: what `how` refers to (the split directory, why it widened, the limit)

    @property
    def note(self) -> str:
        """`how` in words, as explain and --dry-run show it."""
        return _NOTES[self.how].format(self.detail)


@value
class Kept:
    """An ignored path an allowlist keeps readable."""

    path: str
    is_dir: bool
    reason: str  # why it would have been hidden
    rule: Pattern  # the allow pattern that keeps it

    @property
    def origin(self) -> Origin:
        """Who wrote the rule: what decisions read."""
        return self.rule.origin


@value
class Notice:
    """Something the user should know about the policy; `kind` lets scripts and the launch filter them."""

    kind: Kind
    message: str
    path: str = ""

    def __str__(self) -> str:
        return self.message


SYMLINK, NEVER_MASKED, WIDENED, ALLOWED_BUT_HIDDEN, UNLISTABLE = (
    Kind.SYMLINK, Kind.NEVER_MASKED, Kind.WIDENED, Kind.ALLOWED_BUT_HIDDEN, Kind.UNLISTABLE
)  # fmt: skip
HISTORY, HARDLINK, CONFIG, NOT_GIT, CWD_HIDDEN = Kind.HISTORY, Kind.HARDLINK, Kind.CONFIG, Kind.NOT_GIT, Kind.CWD_HIDDEN
UNHIDDEN, CAPPED, HIDDEN_EDIT = Kind.UNHIDDEN, Kind.CAPPED, Kind.HIDDEN_EDIT
LOUD = frozenset({CONFIG, NOT_GIT, CWD_HIDDEN, ALLOWED_BUT_HIDDEN, CAPPED, HIDDEN_EDIT})
_NOTES = {
    How.EXACT: "",
    How.SPLIT: "split from {}",
    How.SYMLINK_TARGET: "symlink target",
    How.WIDENED: "widened: {}",
    How.CAPPED: "widened: over the mask limit of {}",
    How.COLLAPSED: "collapsed: every entry in it is hidden",
}
MERGED = frozenset({How.CAPPED, How.COLLAPSED})  # hidden whole for the limit: the record names what is inside


@record
class Policy:
    """What one launch enforces, finished by `build` and only read after it: the backends, the launch
    check, explain and --dry-run all read this value."""

    root: str
    in_git: bool
    masks: list[Mask] = factory(list)
    kept: list[Kept] = factory(list)
    covered: list[Mask] = factory(list)  # hidden already by an enclosing mask
    warnings: list[Notice] = factory(list)
    config_files: list[str] = factory(list)
    capped: list[Mask] = factory(list)  # masks merged into a parent only to stay within the backend's limit
    tracked: list[str] = factory(list)  # hidden files git tracks (skipworktree.py marks them for the session)
    checkouts: list[str] = factory(list)  # the roots of the repository's other worktrees, whose masks `merge` added
    writes: Writes = factory(Writes)  # where the agent may write (writes.py); set by the launch
    network: Network = factory(Network)  # where its connections may go (network.py); set by the launch
    sockets: Sockets = factory(Sockets)  # the host's unix sockets out of its reach (sockets.py); set by the launch

    def hidden(self, path: str) -> Mask | None:
        """The mask that hides path (itself or an enclosing directory), if any. The masks are indexed at
        the first question (a finished policy does not change; a new list of masks is indexed anew)."""
        indexed = self.__dict__.get("_find")
        if indexed is None or indexed[0] is not self.masks:
            indexed = self.__dict__["_find"] = (self.masks, finder(self.masks))
        return indexed[1](path)

    def warn(self, kind: Kind, message: str, path: str = "") -> None:
        self.warnings.append(Notice(kind, message, path))


def finder(masks: Iterable[Mask]) -> Callable[[str], Mask | None]:
    """path -> the mask that hides it (itself or an enclosing directory), or None."""
    index = {m.path: m for m in masks}
    dirname = os.path.dirname

    def find(path: str) -> Mask | None:
        p = path
        while True:
            m = index.get(p)
            if m is not None and (p == path or m.is_dir):
                return m
            parent = dirname(p)
            if parent == p:
                return None
            p = parent

    return find


_SYSTEM_TOP = frozenset(d for d in SYSTEM_DIRS if d.count("/") == 1)
_SYSTEM_DEEP = tuple(d for d in SYSTEM_DIRS if d.count("/") > 1)
SHARED = frozenset(SHARED_DIRS)


def os_content(path: str) -> bool:
    """Inside SYSTEM_DIRS (or `/` itself), /dev/shm excepted: it is where programs share data."""
    if path == "/" or "/" + path.split("/", 2)[1] in _SYSTEM_TOP:
        return not inside(path, "/dev/shm")
    return any(inside(path, d) for d in _SYSTEM_DEEP)


def is_system(path: str) -> bool:
    """Never masked, nor widened to: operating-system content, and the shared data directories themselves
    (what is inside /run or /var/lib may be masked; /run or /var/lib whole would break every program)."""
    return path in SHARED or os_content(path)


def owned(path: str, root: str) -> bool:
    """Strictly inside the project: masking it cannot break the system, even when the project itself
    lives under a system directory (/var/www/app, /usr/local/src/tool)."""
    return root != "/" and below(path, root)


def relative(path: str, root: str) -> str:
    return path[len(root.rstrip("/")) + 1 :]
