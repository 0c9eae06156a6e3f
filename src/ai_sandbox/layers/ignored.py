"""The dynamic layer's git-ignored paths, as git collapsed them: one entry for a whole ignored directory."""

from __future__ import annotations

import os

from ai_sandbox import git
from ai_sandbox.policy import IGNORED, Entry

MAX_NAMED = 2000


def entries(root: str, prefix: str, scan: git.Scan, *, detail: bool = False) -> list[Entry]:
    where = f" in {prefix.rstrip('/')}" if prefix else ""
    # git check-ignore needs ~1 ms per path: beyond a few thousand entries, point at it instead
    named = detail and len(scan.ignored) <= MAX_NAMED
    why = _rules(scan) if named else {}
    base = os.path.join(root, prefix)
    # git walks real directories only: below a tree root that is no symlink, nothing it lists needs resolving
    walked = os.path.realpath(base) == base.rstrip("/")
    reason = f"ignored by git{where}"
    if detail and not named:
        reason += " (`git check-ignore -v PATH` names the rule)"
    if not named:
        return [Entry(base + rel, is_dir, IGNORED, reason, walked) for rel, is_dir in scan.ignored]
    return [
        Entry(base + rel, is_dir, IGNORED, f"{reason} ({why.get(rel, 'everything in it is ignored')})", walked)
        for rel, is_dir in scan.ignored
    ]


def _rules(scan: git.Scan) -> dict[str, str]:
    """For explain: the ignore rule of each entry, two git calls in all. A directory git collapsed
    because everything in it is ignored has no rule of its own: name the rule of one file in it."""
    rules = git.ignore_rules(scan.repo, [rel for rel, _ in scan.ignored])
    samples = {}
    for rel, is_dir in scan.ignored:
        if is_dir and rel not in rules and (sample := _sample(scan.repo.root, rel)) is not None:
            samples[sample] = rel
    for sample, rule in git.ignore_rules(scan.repo, list(samples)).items():
        rules[samples[sample]] = f"everything in it is ignored, e.g. {sample} by {rule}"
    return rules


def _sample(repo_root: str, rel: str) -> str | None:
    base = os.path.join(repo_root, rel)
    for i, (dirpath, dirnames, filenames) in enumerate(os.walk(base)):
        dirnames.sort()
        if filenames:
            return os.path.relpath(os.path.join(dirpath, min(filenames)), repo_root)
        if i > 50:
            break
    return None
