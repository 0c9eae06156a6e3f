"""The dynamic layer's git-ignored paths, as git collapsed them: one entry for a whole ignored directory."""

from __future__ import annotations

import os

from ai_sandbox import project
from ai_sandbox.policy import IGNORED, Entry


def entries(root: str, prefix: str, scan: project.Scan, *, detail: bool = False) -> list[Entry]:
    where = f" in {prefix.rstrip('/')}" if prefix else ""
    rules = project.ignore_rules(scan.repo, [rel for rel, _ in scan.ignored]) if detail else {}
    out = []
    for rel, is_dir in scan.ignored:
        reason = f"ignored by git{where}"
        if detail:
            why = rules.get(rel) or _inner_rule(scan, rel)
            reason += f" ({why})"
        out.append(Entry(os.path.join(root, prefix + rel), is_dir, IGNORED, reason))
    return out


def _inner_rule(scan: project.Scan, rel: str) -> str:
    """git collapsed a directory whose every file is ignored; name the rule of one of them."""
    base = os.path.join(scan.repo.root, rel)
    for i, (dirpath, dirnames, filenames) in enumerate(os.walk(base)):
        dirnames.sort()
        if filenames:
            sample = os.path.relpath(os.path.join(dirpath, min(filenames)), scan.repo.root)
            rule = project.ignore_rules(scan.repo, [sample]).get(sample)
            return f"everything in it is ignored, e.g. {sample} by {rule}" if rule else "everything in it is ignored"
        if i > 200:
            break
    return "everything in it is ignored"
