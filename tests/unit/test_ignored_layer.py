"""The ignored layer's entries: git's listing joined to the tree's path, marked `walked` only when that
path is real (policy then skips resolving them)."""

from __future__ import annotations

import os

from ai_sandbox.git import Repo, Scan
from ai_sandbox.layers import ignored


def scan_of(root: str, listed: list[tuple[str, bool]]) -> Scan:
    scan = Scan(Repo(root=root, common_dir=os.path.join(root, ".git")))
    scan.ignored = listed
    return scan


def test_entries_of_a_real_tree_are_walked(tmp_path):
    root = str(tmp_path)
    out = ignored.entries(root, "", scan_of(root, [(".env", False), ("dist", True)]))
    assert [(e.path, e.is_dir, e.walked) for e in out] == [(f"{root}/.env", False, True), (f"{root}/dist", True, True)]
    assert all(e.reason == "ignored by git" for e in out)


def test_entries_below_a_symlinked_tree_are_resolved_by_the_policy(tmp_path):
    """A submodule path that is a symlink: git walked the target, so the listed paths are not their own."""
    (tmp_path / "real").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "sub")
    out = ignored.entries(str(tmp_path), "sub/", scan_of(str(tmp_path / "sub"), [("dist", True)]))
    assert [(e.path, e.walked) for e in out] == [(f"{tmp_path}/sub/dist", False)]
    assert out[0].reason == "ignored by git in sub"
