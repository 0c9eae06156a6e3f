"""The dynamic layer's git-ignored paths, as git collapsed them: one entry for a whole ignored directory."""

from __future__ import annotations

import os

from ai_sandbox.policy import IGNORED, Entry
from ai_sandbox.project import Scan


def entries(root: str, prefix: str, scan: Scan) -> list[Entry]:
    where = f" in {prefix.rstrip('/')}" if prefix else ""
    return [
        Entry(os.path.join(root, prefix + rel), is_dir, IGNORED, f"ignored by git{where}")
        for rel, is_dir in scan.ignored
    ]
