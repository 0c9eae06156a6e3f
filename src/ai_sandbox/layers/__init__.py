"""The sources of hidden paths, one module each; `collect` asks them all for one launch.

Every layer returns plain `Entry` values; merging, allowlists and resolution belong to `policy`.
"""

from __future__ import annotations

from collections.abc import Callable

from ai_sandbox import git
from ai_sandbox.config import ProjectConfig, UserConfig
from ai_sandbox.layers import explicit, gitcrypt, ignored, unlisted
from ai_sandbox.layers.tree import Tree, trees
from ai_sandbox.patterns import PatternSet
from ai_sandbox.policy import EXPLICIT, GLOBAL, Entry
from ai_sandbox.records import factory, record


@record
class Collected:
    entries: list[Entry] = factory(list)
    trees: list[Tree] = factory(list)  # what git listed, for the audit


def _nested(prefix: str, all_trees: list[Tree]) -> list[str]:
    """The paths of the repositories inside the tree at prefix, relative to it: its walk skips them."""
    return [
        t.prefix[len(prefix) :].rstrip("/") for t in all_trees if t.prefix.startswith(prefix) and t.prefix != prefix
    ]


def collect(
    root: str,
    repo: git.Repo | None,
    user_cfg: UserConfig,
    project_cfg: ProjectConfig,
    *,
    detail: bool = False,
    memo: str = "",
    meanwhile: Callable[[], None] | None = None,
) -> Collected:
    """Every layer's entries. memo: the file remembering directory listings (unlisted.Memo), if any; it is read
    while git walks the tree, and so is whatever meanwhile reads."""
    out = Collected()
    out.entries += explicit.literal_paths(user_cfg.block_paths, GLOBAL)
    out.entries += explicit.literal_paths(project_cfg.block_paths, EXPLICIT)
    if repo is None:
        return out
    listings = unlisted.Memo(memo)

    def read_memos() -> None:
        listings.load()
        if meanwhile is not None:
            meanwhile()

    all_trees = out.trees = list(trees(repo, memo=listings, meanwhile=read_memos))
    for tree in all_trees:
        p = tree.prefix
        tree.walk.finish(tree.scan, _nested(p, all_trees))
    listings.save([t.walk.root for t in all_trees])
    for tree in all_trees:
        p = tree.prefix
        out.entries += ignored.entries(root, p, tree.scan, detail=detail)
        out.entries += unlisted.entries(root, p, tree.scan, tree.walk, detail=detail)
        out.entries += gitcrypt.entries(root, p, tree.scan, tree.walk)
    global_patterns = PatternSet(user_cfg.block_patterns)
    project_patterns = PatternSet(project_cfg.block)
    if global_patterns or project_patterns:
        candidates = list(explicit.candidates(all_trees))
        out.entries += explicit.match(root, global_patterns, GLOBAL, candidates)
        out.entries += explicit.match(root, project_patterns, EXPLICIT, candidates)
    return out
