"""The policy: what the sandbox hides, why, and what stays readable — one value that explain, --dry-run,
the backends and the tests all read, so what is shown is what is enforced.

Pure apart from two filesystem questions (list a directory, resolve a path), passed in so tests can
use a throwaway tree. The backend's limits arrive as a function too: the policy never knows which backend
will run it, only which paths it cannot express.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from enum import StrEnum  # already imported by re: free on the launch path

from ai_sandbox.errors import PolicyError
from ai_sandbox.fs import below, inside
from ai_sandbox.patterns import CODE, OUTPUT, Origin, Pattern, PatternSet
from ai_sandbox.records import factory, record, value


class Layer(StrEnum):
    """Where a hidden path comes from; in this order, the first names a path several layers hide."""

    GLOBAL = "global"  # the user's config.toml
    IGNORED = "ignored"  # git-ignored
    CRYPT = "git-crypt"  # encrypted by git-crypt, or its key directory
    EXPLICIT = "explicit"  # the project's .ai-sandbox.toml


GLOBAL, IGNORED, CRYPT, EXPLICIT = Layer.GLOBAL, Layer.IGNORED, Layer.CRYPT, Layer.EXPLICIT
LAYERS = tuple(Layer)
_RANK = {layer: i for i, layer in enumerate(LAYERS)}


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
UNHIDDEN, CAPPED = Kind.UNHIDDEN, Kind.CAPPED
LOUD = frozenset({CONFIG, NOT_GIT, CWD_HIDDEN, ALLOWED_BUT_HIDDEN, CAPPED})
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
_SHARED = frozenset(SHARED_DIRS)


def _os_content(path: str) -> bool:
    """Inside SYSTEM_DIRS (or `/` itself), /dev/shm excepted: it is where programs share data."""
    if path == "/" or "/" + path.split("/", 2)[1] in _SYSTEM_TOP:
        return not inside(path, "/dev/shm")
    return any(inside(path, d) for d in _SYSTEM_DEEP)


def is_system(path: str) -> bool:
    """Never masked, nor widened to: operating-system content, and the shared data directories themselves
    (what is inside /run or /var/lib may be masked; /run or /var/lib whole would break every program)."""
    return path in _SHARED or _os_content(path)


def check_reachable(cwd: str, backend: str, private: tuple[str, ...]) -> None:
    """Refuse a project inside a directory the backend replaces with an empty one of its own (its
    `private_dirs`): inside the sandbox the project is not there, and firejail starts the agent in $HOME
    instead — silently."""
    for d in private:
        if inside(cwd, d):
            raise PolicyError(
                f"{cwd} is under {d}, which the {backend} sandbox replaces with an empty directory of its own: "
                "the agent would not see the project",
                f"move the project out of {d} (e.g. under your home directory), or use --backend docker",
            )


def _owned(path: str, root: str) -> bool:
    """Strictly inside the project: masking it cannot break the system, even when the project itself
    lives under a system directory (/var/www/app, /usr/local/src/tool)."""
    return root != "/" and below(path, root)


def build(
    root: str,
    entries: Iterable[Entry],
    allow: PatternSet,
    *,
    in_git: bool = True,
    home: str = "",
    cwd: str = "",
    notices: Iterable[Notice] = (),
    config_files: Iterable[str] = (),
    express: Callable[[str], str | None] = lambda p: None,
    listdir: Callable[[str], list[str]] = os.listdir,
    realpath: Callable[[str], str] | None = None,
    limit: int = 0,
    secret: Callable[[str], str | None] | None = None,
    scandir: Callable[[str], list[tuple[str, bool]]] | None = None,
    tracked: Callable[[Policy], list[str]] | None = None,
) -> Policy:
    """The finished policy: the layers' entries merged into the masks a backend enforces, with every notice.

    Order matters: allowlists subtract from the ignored layer only; what remains is resolved through
    symlinks, nested masks fold into their parents, and paths the backend cannot express widen to the
    nearest parent it can — or the launch is refused. Past `limit` masks, directories are hidden whole
    (first those with nothing readable left in them) until the backend can mount them all.

    What the policy asks of the world arrives as functions, so tests can use a throwaway tree: `express`
    (the backend's limits), `listdir`/`scandir`, `realpath` (None: the real filesystem, each directory
    resolved once, and what git walked needs no lookup at all), `secret` (the secret-looking names that stay
    hidden inside the build outputs kept readable) and `tracked` (which hidden files git tracks). `notices`
    come first in the warnings (what was said before the layers ran); `cwd` is where the agent starts.
    """
    policy = Policy(root=root, in_git=in_git, warnings=list(notices), config_files=list(config_files))
    walked: set[str] = set()  # candidates git saw as real directories or files in real directories
    candidates = _subtract_allowed(entries, root, allow, policy, listdir, walked)
    if secret is not None:
        candidates += _secrets_in_outputs(policy, root, allow, secret, scandir or _scandir, walked)
    protected = _protected(root, home)
    resolved = _resolve_all(candidates, root, protected, policy, realpath, walked)
    masks = _fold(resolved, policy)
    widened = _express(masks, root, protected, express, policy)
    if widened is not masks:
        masks = _fold(widened, policy)
        _warn_allowed_but_hidden(policy, masks, How.WIDENED)
    if limit and len(masks) > limit:
        masks = _cap(masks, limit, root, protected, policy, listdir)
        _warn_allowed_but_hidden(policy, masks, How.CAPPED)
    policy.masks = masks
    if cwd and (m := policy.hidden(cwd)) is not None:
        policy.warn(
            CWD_HIDDEN, f"the current directory is hidden ({m.reason}); the agent will start in a masked directory", cwd
        )
    if tracked is not None:
        policy.tracked = tracked(policy)
    return policy


def merge(
    policy: Policy,
    others: Iterable[Policy],
    *,
    home: str = "",
    limit: int = 0,
    listdir: Callable[[str], list[str]] = os.listdir,
) -> None:
    """Add what the policies of the repository's other checkouts hide (their own rules, built by `build` with
    their own root and config) to this launch's: the agent may read a sibling worktree, never what that
    checkout's own launch would hide. This project's own rules alone apply inside it: never a mask that would
    hide it, a directory above it or the home, nor one inside it from a checkout that holds it (a main
    checkout's ignored `.worktrees/` holding this one). A checkout is files in the git directory, which a
    session can write: only masks come from it, never what it keeps readable (which the record exempts).
    Each mask says which checkout it comes from; past the limit, directories are hidden whole as in `build`."""
    protected = _protected(policy.root, home)
    extra: list[Mask] = []
    for other in others:
        policy.checkouts.append(other.root)
        where = f" (in the worktree {other.root})"
        holds_us = below(policy.root, other.root)
        for m in other.masks:
            if m.path in protected or inside(policy.root, m.path) or (holds_us and inside(m.path, policy.root)):
                continue
            extra.append(Mask(m.path, m.is_dir, m.layer, m.reason + where, m.origin, m.how, m.detail))
        policy.covered += other.covered
        policy.capped += other.capped
        policy.tracked += other.tracked
        policy.warnings += other.warnings
        policy.config_files += [f for f in other.config_files if f not in policy.config_files]
    if not extra:
        return
    masks = _fold(policy.masks + extra, policy)
    if limit and len(masks) > limit:
        masks = _cap(masks, limit, policy.root, protected, policy, listdir)
    policy.masks = masks


def _subtract_allowed(
    entries: Iterable[Entry],
    root: str,
    allow: PatternSet,
    policy: Policy,
    listdir: Callable[[str], list[str]],
    walked: set[str],
) -> list[Mask]:
    """The entries as masks, minus the ignored paths an allowlist keeps (policy.kept); a hidden directory
    holding an allowed path is split. Fills `walked` with the ignored paths git listed from a real tree."""
    candidates: list[Mask] = []
    cut = len(root.rstrip("/")) + 1
    match, may_match_below = allow.match, allow.may_match_below
    for e in entries:
        if e.layer != IGNORED:
            candidates.append(Mask(e.path, e.is_dir, e.layer, e.reason))
            continue
        if e.walked:
            walked.add(e.path)
        rel = e.path[cut:]
        if match(rel, e.is_dir) is None and not (e.is_dir and may_match_below(rel)):
            candidates.append(Mask(e.path, e.is_dir, e.layer, e.reason))  # the usual case, without a call
        else:
            _allow_or_split(e, root, allow, policy, candidates, listdir)
    return candidates


def _resolve_all(
    candidates: list[Mask],
    root: str,
    protected: list[str],
    policy: Policy,
    realpath: Callable[[str], str] | None,
    walked: set[str],
) -> list[Mask]:
    """Each candidate where it really lands (see _resolve). With the real filesystem, a path git walked
    strictly inside the project is its own target unless it is a link: no lookup (a monorepo has thousands)."""
    fast = realpath is None and root != "/" and bool(walked)
    real = realpath or _cached_realpath()
    kept_out = set(protected)
    out = []
    for c in candidates:
        if fast and c.path in walked and c.path not in kept_out and (c.is_dir or not os.path.islink(c.path)):
            out.append(c)
        elif (m := _resolve(c, root, protected, policy, real)) is not None:
            out.append(m)
    return out


def _warn_allowed_but_hidden(policy: Policy, masks: list[Mask], how: How) -> None:
    """An allowed path that a widened (or capped) mask hides after all: said, never silently."""
    find = finder(masks)
    for k in policy.kept:
        m = find(k.path)
        if m is not None and m.how == how:
            said = f"was widened ({m.note})" if how == How.WIDENED else f"({m.note})"
            policy.warn(ALLOWED_BUT_HIDDEN, f"{k.path} is allowed but hidden anyway: {m.path} {said}", k.path)


def _rel(path: str, root: str) -> str:
    return path[len(root.rstrip("/")) + 1 :]


def _allow_or_split(
    e: Entry,
    root: str,
    allow: PatternSet,
    policy: Policy,
    out: list[Mask],
    listdir: Callable[[str], list[str]],
    split_from: str = "",
) -> None:
    rel = _rel(e.path, root)
    rule = allow.match(rel, e.is_dir)
    if rule is not None:
        policy.kept.append(Kept(e.path, e.is_dir, e.reason, rule))
        return
    inner = allow.may_match_below(rel) if e.is_dir else None
    if inner is None:
        out.append(
            Mask(e.path, e.is_dir, e.layer, e.reason, how=How.SPLIT if split_from else How.EXACT, detail=split_from)
        )
        return
    try:
        children = sorted(listdir(e.path))
    except OSError:
        children = None
    if children is None:  # cannot look inside: hide it whole rather than guess
        out.append(Mask(e.path, e.is_dir, e.layer, e.reason))
        policy.warn(UNLISTABLE, f"cannot list {e.path} to keep {inner.text} readable inside it; hidden whole", e.path)
        return
    kept_before, out_before = len(policy.kept), len(out)
    for name in children:
        child = os.path.join(e.path, name)
        child_is_dir = os.path.isdir(child) and not os.path.islink(child)
        child_entry = Entry(child, child_is_dir, e.layer, e.reason)
        _allow_or_split(child_entry, root, allow, policy, out, listdir, split_from or e.path)
    if len(policy.kept) == kept_before:  # nothing inside was allowed after all: hide the directory whole
        del out[out_before:]
        out.append(
            Mask(e.path, e.is_dir, e.layer, e.reason, how=How.SPLIT if split_from else How.EXACT, detail=split_from)
        )


def _scandir(path: str) -> list[tuple[str, bool]]:
    with os.scandir(path) as it:
        return [(e.name, e.is_dir(follow_symlinks=False)) for e in it]


def _secrets_in_outputs(
    policy: Policy,
    root: str,
    allow: PatternSet,
    secret: Callable[[str], str | None],
    scandir: Callable[[str], list[tuple[str, bool]]],
    walked: set[str],
) -> list[Mask]:
    """Inside the build outputs kept readable, what has a secret-looking name stays hidden (a build that copied
    `.env` into `dist/`), unless a person's own `allow` names it. A directory that cannot be listed is hidden
    whole: what it holds is unknown. Links are not followed: a link's name is judged, its target resolved later."""
    out: list[Mask] = []
    keep = []
    by_parent: dict[str, str | None] = {}  # a monorepo's 5,000 build outputs share 1,000 parents

    def secret_parent(rel: str) -> str | None:
        if rel not in by_parent:
            head, _, name = rel.rpartition("/")
            by_parent[rel] = secret(name) or (secret_parent(head) if head else None)
        return by_parent[rel]

    for k in policy.kept:
        if k.origin != OUTPUT:
            keep.append(k)
            continue
        top = _rel(k.path, root)
        head, _, name = top.rpartition("/")
        name_rule = secret(name) or (secret_parent(head) if head else None)
        if name_rule is not None:  # `secrets/logs/` is not a build output (a red team read it through that)
            out.append(Mask(k.path, k.is_dir, IGNORED, f"{k.reason}; secret-looking name ({name_rule})"))
            continue
        real_dir = k.is_dir and k.path in walked  # git walked into it: not a link
        if not real_dir and os.path.islink(k.path) and not _owned(os.path.realpath(k.path), root):
            out.append(Mask(k.path, k.is_dir, IGNORED, f"{k.reason}; a link out of the project"))
            continue  # an `app.log` leading to a file elsewhere is not a build output: its target is masked
        pending = [k.path] if k.is_dir else []
        listed = not pending
        while pending:
            d = pending.pop()
            try:
                children = scandir(d)
            except OSError:
                if d == k.path and not os.path.lexists(d):
                    break  # gone since git listed it: nothing to hide, nothing to keep
                out.append(Mask(d, True, IGNORED, f"{k.reason}; cannot be listed inside build output {top}/"))
                policy.warn(UNLISTABLE, f"cannot list {d} inside build output {top}/; hidden whole", d)
                continue
            listed = True
            for name, is_dir in children:
                path = os.path.join(d, name)
                rule = secret(name)
                if rule is None:
                    if is_dir:
                        pending.append(path)
                    continue
                mine = allow.match(_rel(path, root), is_dir)
                if mine is not None and mine.origin not in CODE:
                    continue  # the user's or the project's own allow names it
                out.append(Mask(path, is_dir, IGNORED, f"secret-looking name ({rule}) inside build output {top}/"))
        if listed:
            keep.append(k)
    policy.kept = keep
    return out


def _protected(root: str, home: str) -> list[str]:
    """Paths that must stay visible: the project itself, every directory above it, the home directory and
    every directory above it (masking /home would hide home as surely as masking home)."""
    out = [root]
    for start in (root, home) if home else (root,):
        p = start
        if p != root:
            out.append(p)
        while p != os.path.dirname(p):
            p = os.path.dirname(p)
            if p not in out:
                out.append(p)
    return out


def _cached_realpath() -> Callable[[str], str]:
    """realpath with every directory's answer remembered: thousands of masks share a few hundred
    directories, so each directory is looked at once (one lstat) instead of once per component per mask."""
    known: dict[str, str] = {"/": "/"}

    def real(path: str) -> str:
        if not os.path.isabs(path) or "/./" in path or "/../" in path or path.endswith(("/.", "/..")):
            return os.path.realpath(path)
        pending = []  # ancestors not yet known, nearest first (a loop: paths can be 2,000 levels deep)
        p = path.rstrip("/") or "/"
        while p not in known:
            pending.append(p)
            p = os.path.dirname(p)
        for q in reversed(pending):
            joined = os.path.join(known[os.path.dirname(q)], os.path.basename(q))
            known[q] = os.path.realpath(joined) if os.path.islink(joined) else joined
        return known[path.rstrip("/") or "/"]

    return real


def _resolve(m: Mask, root: str, protected: list[str], policy: Policy, realpath: Callable[[str], str]) -> Mask | None:
    """Backends follow symlinks when they mask, so the policy decides where each mask really lands.

    A target the policy will not mask is either said plainly ("never masked: readable inside", for what is
    public or must stay visible) or refused: a path under /etc (it can hold the machine's secrets) and a
    git-crypt key (it decrypts the history) are never left readable while listed as hidden."""
    target = realpath(m.path)
    mask = m
    if target != m.path:
        if m.layer == IGNORED and inside(target, root):
            # The link is ignored, the content it points at is a project file visible under its own name;
            # masking it would hide source the user chose to share. Another entry may still hide it.
            policy.warn(
                SYMLINK,
                f"{m.path} is an ignored symlink to {target}, which is not ignored: the target stays readable",
                m.path,
            )
            return None
        mask = Mask(target, os.path.isdir(target), m.layer, m.reason, origin=m.path, how=How.SYMLINK_TARGET)
    if inside(root, target):
        if m.layer == GLOBAL:
            raise PolicyError(
                f"your global block {m.path} contains this project ({root})",
                f"the agent cannot work inside a hidden directory; narrow the entry in your config.toml ({m.reason})",
            )
        never: tuple[str, str] | None = (_KEPT, "it holds the project")
    else:
        never = _never_masked(target, protected, root)
    if never is not None:
        kind, why = never
        # a global block is the user's own word: it may hide a file under /etc or /usr (never those whole)
        if not (m.layer == GLOBAL and kind in (_CONFIG, _PUBLIC) and target not in SYSTEM_DIRS):
            if m.layer == CRYPT or (kind == _CONFIG and m.layer != GLOBAL):
                raise _refusal(m, target, why, root)
            said = f" resolves to {target}" if target != m.path else ""
            policy.warn(NEVER_MASKED, f"{m.path}{said} ({why}): never masked, readable inside", m.path)
            return None
    if target != m.path and inside(m.path, root) and not inside(target, root):
        policy.warn(SYMLINK, f"{m.path} is a symlink to {target}, outside the project: that target is hidden", m.path)
    return mask


_KEPT, _SHARED_DIR, _CONFIG, _PUBLIC = "kept", "shared", "config", "public"


def _never_masked(target: str, protected: list[str], root: str) -> tuple[str, str] | None:
    """(kind, why in words) when target cannot be masked; None when it can. Inside the project only the home
    directory is kept: a project under /var/www or /usr/local/src hides its own files."""
    if target in protected:
        return _KEPT, "the sandbox keeps it visible: the home directory, or a directory above it or the project"
    if _owned(target, root):
        return None
    if target in _SHARED:
        return _SHARED_DIR, "every program shares it; only what is inside it can be hidden"
    if not _os_content(target):
        return None
    config = next((d for d in CONFIG_DIRS if inside(target, d)), None)
    if config is not None:  # /usr/local/etc is configuration too, although under /usr
        return _CONFIG, f"under {config}, which can hold the machine's secrets but is never masked"
    top = next((d for d in _SYSTEM_DEEP if inside(target, d)), "/" + target.split("/", 2)[1])
    return _PUBLIC, f"under {top}: system content every program reads"


def _refusal(m: Mask, target: str, why: str, root: str) -> PolicyError:
    """Leaving target readable would break a promise (a git-crypt key decrypts the history; a file under
    /etc a project hides may be a secret): one line, and the way out."""
    if m.layer == CRYPT:
        hint = "move the repository's git directory (or the project) where the key directory can be hidden"
    elif m.layer == IGNORED:
        rel = _rel(m.path, root) if _owned(m.path, root) else m.path
        hint = f'remove the link, or if the agent may read {target}, add "{rel}" to `allow` in .ai-sandbox.toml'
    else:
        hint = f"remove the entry ({m.reason}) or the link"
    what = "the git-crypt key directory " if m.layer == CRYPT and m.is_dir else ""  # files are never directories
    said = f" (it resolves to {target})" if target != m.path else ""
    return PolicyError(f"cannot hide {what}{m.path}{said}: {why}", hint)


def _fold(masks: list[Mask], policy: Policy) -> list[Mask]:
    """Drop masks inside a masked directory; the parent already hides them (and files created later)."""
    by_path: dict[str, Mask] = {}
    for m in sorted(masks, key=lambda m: _RANK[m.layer]):
        if m.path in by_path:
            policy.covered.append(m)
        else:
            by_path[m.path] = m
    out: list[Mask] = []
    open_dir = ""  # the kept directory mask the walk is inside of; component order keeps a tree contiguous
    # component order: "/" as NUL sorts a/b before a.b and a-b, as comparing split lists would
    for path, m in sorted(by_path.items(), key=lambda kv: kv[0].replace("/", "\0")):
        if open_dir and path.startswith(open_dir):
            policy.covered.append(m)
            continue
        out.append(m)
        open_dir = path.rstrip("/") + "/" if m.is_dir else ""
    return out


def _express(
    masks: list[Mask], root: str, protected: list[str], express: Callable[[str], str | None], policy: Policy
) -> list[Mask]:
    """Widen what the backend cannot name exactly to the nearest parent it can; refuse if that is too wide.
    Returns masks itself when nothing had to widen."""
    out = None
    for i, m in enumerate(masks):
        why = express(m.path)
        if why is None:
            if out is not None:
                out.append(m)
            continue
        if out is None:
            out = masks[:i]
        parent = os.path.dirname(m.path)
        while express(parent) is not None and parent != os.path.dirname(parent):
            parent = os.path.dirname(parent)
        if parent in protected or (is_system(parent) and not _owned(parent, root)):
            raise PolicyError(
                f"cannot hide {m.path!r} ({why}), and its nearest expressible parent {parent} must stay visible",
                "rename the file or directory, or move it out of the project",
            )
        detail = f"{os.path.basename(m.path)!r} {why}"
        out.append(Mask(parent, True, m.layer, m.reason, origin=m.origin or m.path, how=How.WIDENED, detail=detail))
        policy.warn(WIDENED, f"{m.path!r} {why}; hiding its parent {parent} instead", m.path)
    return masks if out is None else out


def _widenable(path: str, root: str, protected: list[str]) -> bool:
    return path not in protected and (_owned(path, root) or not is_system(path))


def _cap(
    masks: list[Mask], limit: int, root: str, protected: list[str], policy: Policy, listdir: Callable[[str], list[str]]
) -> list[Mask]:
    """Fit the masks within the backend's limit (firejail: a mount each; the kernel allows ~100,000).

    1. A directory whose every entry is hidden is hidden whole: nothing readable is lost.
    2. Then directories holding the most masks side by side (deepest first among equals) are hidden whole;
    3. then the deepest directories holding several masks at any depth. Steps 2 and 3 hide files the agent
       could have read, so the launch says so. Never less is hidden; with nothing left to widen, refuse.
    """
    fit = _Fit(masks)
    ok = {d for d in fit.below if _widenable(d, root, protected)}
    fit.collapse_full(ok, limit, listdir)
    steps = fit.by_side_by_side(ok), fit.by_depth(ok)  # both ordered by the counts step 1 left
    widened = sum(fit.widen(order, limit) for order in steps)
    if fit.count > limit:
        raise PolicyError(
            f"{len(masks)} paths to hide, more than the backend can mount ({limit}), and hiding their "
            "directories whole would hide the project itself",
            "hide them with fewer entries (a `block` entry for their directory), or raise `max_masks` in your config.toml",
        )
    out = fit.masks(policy)
    if widened:
        policy.warn(
            CAPPED,
            f"{len(masks)} paths to hide are more than the backend can mount ({limit}): {widened} directories are "
            "hidden whole, with what was readable in them (`ai-sandbox --dry-run` lists them; or raise max_masks)",
        )
    return _fold(out, policy)


class _Fit:
    """_cap's bookkeeping: the directories hidden whole so far, and how many masks are left. Paths are
    absolute and normal."""

    def __init__(self, masks: list[Mask]) -> None:
        dirname = os.path.dirname
        self.inside: dict[str, list[Mask]] = {}  # directory -> the masks right in it
        for m in masks:
            self.inside.setdefault(dirname(m.path), []).append(m)
        # directory -> the names of the live masks right in it (a merged directory is one)
        self.direct = {d: {os.path.basename(m.path) for m in group} for d, group in self.inside.items()}
        self.rules = {d: len(group) for d, group in self.inside.items()}  # original masks right in it
        self.below: dict[str, int] = {}  # directory -> live masks at or below it (a merged directory counts once)
        for d, group in self.inside.items():
            for q in _up(d):
                self.below[q] = self.below.get(q, 0) + len(group)
        self.merged: dict[str, tuple[How, str]] = {}  # directory hidden whole -> how, and the detail
        self.count = len(masks)

    def dead(self, d: str) -> bool:
        """Merged already, or inside a merged directory."""
        return any(q in self.merged for q in _up(d))

    def merge(self, d: str, how: How, detail: str = "") -> str:
        """Hide d whole; returns its parent."""
        gone = self.below[d] - 1
        self.count -= gone
        self.merged[d] = (how, detail)
        self.below[d] = 1
        up = os.path.dirname(d)
        self.direct.setdefault(up, set()).add(os.path.basename(d))
        for q in _up(up):
            self.below[q] -= gone
        return up

    def collapse_full(self, ok: set[str], limit: int, listdir: Callable[[str], list[str]]) -> None:
        """Step 1, deepest first: a directory whose every entry is masked is hidden whole (its parent may
        then be full in turn)."""
        import heapq  # only a policy over the limit pays for it

        heap = [(-d.count("/"), d) for d, names in self.direct.items() if len(names) > 1 and d in ok]
        heapq.heapify(heap)
        while heap and self.count > limit:
            _, d = heapq.heappop(heap)
            if self.dead(d):
                continue
            try:
                names = set(listdir(d))
            except OSError:
                continue
            if names and names <= self.direct[d]:
                up = self.merge(d, How.COLLAPSED)
                if up in ok and len(self.direct[up]) > 1:
                    heapq.heappush(heap, (-up.count("/"), up))

    def by_side_by_side(self, ok: set[str]) -> list[str]:
        """Step 2's order: the most masks right in it first, then the deepest."""
        rules = self.rules
        return sorted((d for d, n in rules.items() if n > 1 and d in ok), key=lambda d: (-rules[d], -d.count("/"), d))

    def by_depth(self, ok: set[str]) -> list[str]:
        """Step 3's order: the deepest first, then the most masks below it."""
        return sorted(ok, key=lambda d: (-d.count("/"), -self.below[d], d))

    def widen(self, order: list[str], limit: int) -> int:
        """Hide directories whole in this order until the masks fit; how many were."""
        n = 0
        for d in order:
            if self.count <= limit:
                break
            if self.below[d] > 1 and not self.dead(d):
                self.merge(d, How.CAPPED, str(limit))
                n += 1
        return n

    def masks(self, policy: Policy) -> list[Mask]:
        """The masks left, and one per outermost merged directory (what it stands for is `covered`)."""
        out: list[Mask] = []
        replaced: dict[str, list[Mask]] = {}
        for d, group in self.inside.items():
            top = next((q for q in reversed(list(_up(d))) if q in self.merged), None)
            if top is None:
                out.extend(group)
            else:
                replaced.setdefault(top, []).extend(group)
        for d, group in replaced.items():
            layer = min((m.layer for m in group), key=_RANK.__getitem__)
            how, detail = self.merged[d]
            reason = f"holds {len(group)} hidden paths, e.g. {group[0].path}"
            out.append(Mask(d, True, layer, reason, how=how, detail=detail))
            policy.covered.extend(group)
            policy.capped.extend(group)
        return out


def _up(d: str) -> Iterator[str]:
    """d and every directory above it, nearest first."""
    yield d
    while d != (parent := os.path.dirname(d)):
        yield parent
        d = parent
