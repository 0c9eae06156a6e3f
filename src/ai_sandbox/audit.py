"""What a mask cannot protect, found for explain and --dry-run: content that stays reachable another way.

A hidden tracked file is still in git's object store, which the agent can read (`git show HEAD:path`);
a hidden file with other hard links is readable under its other names. The sandbox cannot fix either,
so the user is told, with the remedy.
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Iterable

from ai_sandbox.policy import CRYPT, HARDLINK, HISTORY, Notice, Policy

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.layers.tree import Tree


def findings(policy: Policy, trees: Iterable[Tree]) -> list[Notice]:
    tracked = sorted(os.path.join(policy.root, t.prefix + rel) for t in trees for rel in t.scan.tracked)
    out = []
    for m in policy.masks:
        if m.layer == CRYPT:
            continue  # the history holds only ciphertext, and the key is hidden
        inside = _tracked_under(tracked, m.path, m.is_dir)
        if inside:
            what = m.path if not m.is_dir else f"{len(inside)} tracked file(s) in {m.path}, e.g. {inside[0]}"
            rel = os.path.relpath(inside[0], policy.root)
            out.append(
                Notice(
                    HISTORY,
                    f"{what} hidden, but the content is in git history (`git show HEAD:{rel}` reads it); "
                    "rewrite history (git filter-repo) or move the secret out of git, and rotate it",
                    m.path,
                )
            )
        if not m.is_dir:
            try:
                links = os.lstat(m.path).st_nlink
            except OSError:
                continue
            if links > 1:
                out.append(
                    Notice(
                        HARDLINK,
                        f"{m.path} has {links - 1} other hard link(s); the content is readable under those names",
                        m.path,
                    )
                )
    return out


def _tracked_under(tracked: list[str], path: str, is_dir: bool) -> list[str]:
    i = bisect.bisect_left(tracked, path)
    if not is_dir:
        return [path] if i < len(tracked) and tracked[i] == path else []
    prefix = path.rstrip("/") + "/"
    j = bisect.bisect_left(tracked, prefix)
    out = []
    while j < len(tracked) and tracked[j].startswith(prefix):
        out.append(tracked[j])
        j += 1
    return out
