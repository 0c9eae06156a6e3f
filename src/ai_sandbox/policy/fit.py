"""Fitting the masks to a backend: nested ones folded into their parent, names the backend cannot express
widened to their nearest expressible parent, and past its mask limit whole directories hidden."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from ai_sandbox.errors import PolicyError
from ai_sandbox.policy.model import CAPPED, RANK, WIDENED, How, Mask, Policy, is_system, owned


def fold(masks: list[Mask], policy: Policy) -> list[Mask]:
    """Drop masks inside a masked directory; the parent already hides them (and files created later)."""
    by_path: dict[str, Mask] = {}
    for m in sorted(masks, key=lambda m: RANK[m.layer]):
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


def widen(
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
        if parent in protected or (is_system(parent) and not owned(parent, root)):
            raise PolicyError(
                f"cannot hide {m.path!r} ({why}), and its nearest expressible parent {parent} must stay visible",
                "rename the file or directory, or move it out of the project",
            )
        detail = f"{os.path.basename(m.path)!r} {why}"
        out.append(Mask(parent, True, m.layer, m.reason, origin=m.origin or m.path, how=How.WIDENED, detail=detail))
        policy.warn(WIDENED, f"{m.path!r} {why}; hiding its parent {parent} instead", m.path)
    return masks if out is None else out


def _widenable(path: str, root: str, protected: list[str]) -> bool:
    return path not in protected and (owned(path, root) or not is_system(path))


def cap_masks(
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
    return fold(out, policy)


class _Fit:
    """cap's bookkeeping: the directories hidden whole so far, and how many masks are left. Paths are
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
            layer = min((m.layer for m in group), key=RANK.__getitem__)
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
