"""Building the policy from the layers' entries: the allowlists subtract, what is allowed inside a hidden directory
splits it, what the paths resolve to is masked, and the masks fit the backend's limit. Pure apart from two
filesystem questions (list a directory, resolve a path), passed in so tests can use a throwaway tree. The
backend's limits arrive as a function too: the policy never knows which backend will run it, only which paths
it cannot express.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence

from ai_sandbox.errors import PolicyError
from ai_sandbox.fs import below, inside
from ai_sandbox.patterns import CODE, OUTPUT, PatternSet
from ai_sandbox.policy.fit import cap_masks, fold, widen
from ai_sandbox.policy.model import (
    ALLOWED_BUT_HIDDEN,
    CWD_HIDDEN,
    IGNORED,
    UNLISTABLE,
    Entry,
    How,
    Kept,
    Mask,
    Notice,
    Policy,
    finder,
    owned,
    relative,
)
from ai_sandbox.policy.resolve import resolve_all, visible


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
    scandir: Callable[[str], Sequence[tuple[str, bool]]] | None = None,
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
    protected = visible(root, home)
    resolved = resolve_all(candidates, root, protected, policy, realpath, walked)
    masks = fold(resolved, policy)
    widened = widen(masks, root, protected, express, policy)
    if widened is not masks:
        masks = fold(widened, policy)
        _warn_allowed_but_hidden(policy, masks, How.WIDENED)
    if limit and len(masks) > limit:
        masks = cap_masks(masks, limit, root, protected, policy, listdir)
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
    protected = visible(policy.root, home)
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
    masks = fold(policy.masks + extra, policy)
    if limit and len(masks) > limit:
        masks = cap_masks(masks, limit, policy.root, protected, policy, listdir)
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
        rule = match(rel, e.is_dir)
        if rule is not None:  # a monorepo's 6,000 build outputs and dependency directories: kept whole
            policy.kept.append(Kept(e.path, e.is_dir, e.reason, rule))
        elif not (e.is_dir and may_match_below(rel)):
            candidates.append(Mask(e.path, e.is_dir, e.layer, e.reason))  # the usual case, without a call
        else:
            _allow_or_split(e, root, allow, policy, candidates, listdir)
    return candidates


def _warn_allowed_but_hidden(policy: Policy, masks: list[Mask], how: How) -> None:
    """An allowed path that a widened (or capped) mask hides after all: said, never silently."""
    find = finder(masks)
    for k in policy.kept:
        m = find(k.path)
        if m is not None and m.how == how:
            said = f"was widened ({m.note})" if how == How.WIDENED else f"({m.note})"
            policy.warn(ALLOWED_BUT_HIDDEN, f"{k.path} is allowed but hidden anyway: {m.path} {said}", k.path)


def _allow_or_split(
    e: Entry,
    root: str,
    allow: PatternSet,
    policy: Policy,
    out: list[Mask],
    listdir: Callable[[str], list[str]],
    split_from: str = "",
) -> None:
    rel = relative(e.path, root)
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
    scandir: Callable[[str], Sequence[tuple[str, bool]]],
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

    cut = len(root.rstrip("/")) + 1
    for k in policy.kept:
        if k.origin != OUTPUT:
            keep.append(k)
            continue
        top = k.path[cut:]  # relative(k.path, root), without a call per build output
        head, _, name = top.rpartition("/")
        name_rule = secret(name) or (secret_parent(head) if head else None)
        if name_rule is not None:  # `secrets/logs/` is not a build output (a red team read it through that)
            out.append(Mask(k.path, k.is_dir, IGNORED, f"{k.reason}; secret-looking name ({name_rule})"))
            continue
        real_dir = k.is_dir and k.path in walked  # git walked into it: not a link
        if not real_dir and os.path.islink(k.path) and not owned(os.path.realpath(k.path), root):
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
                rule = secret(name)
                if rule is None:
                    if is_dir:
                        pending.append(f"{d}/{name}")  # absolute and normal, never "/": no posixpath checks
                    continue
                path = f"{d}/{name}"
                mine = allow.match(path[cut:], is_dir)
                if mine is not None and mine.origin not in CODE:
                    continue  # the user's or the project's own allow names it
                out.append(Mask(path, is_dir, IGNORED, f"secret-looking name ({rule}) inside build output {top}/"))
        if listed:
            keep.append(k)
    policy.kept = keep
    return out
