"""The sources of hidden paths, one module each; `collect` asks them all for one launch.

Every layer returns plain `Entry` values; merging, allowlists and resolution belong to `policy`.
"""

from __future__ import annotations

from collections.abc import Iterator

from ai_sandbox import git
from ai_sandbox.config import ProjectConfig, UserConfig
from ai_sandbox.layers import explicit, gitcrypt, ignored, unlisted
from ai_sandbox.patterns import PatternSet
from ai_sandbox.policy import EXPLICIT, GLOBAL, Entry
from ai_sandbox.records import factory, record


@record
class Tree:
    """One work tree in the project: the root repository or a nested one, with its path from the root."""

    prefix: str  # "" for the root, "sub/dir/" for a nested repository
    scan: git.Scan
    walk: unlisted.Walk  # what git does not list: FIFOs, sockets, .gitattributes files


@record
class Collected:
    entries: list[Entry] = factory(list)
    trees: list[Tree] = factory(list)  # what git listed, for the audit


def trees(repo: git.Repo, prefix: str = "", memo: unlisted.Memo | None = None) -> Iterator[Tree]:
    """The root work tree and, recursively, every submodule and nested clone checked out inside it."""
    walk = unlisted.Walk(repo.root, memo)
    scan = git.scan(repo)
    yield Tree(prefix, scan, walk)
    for rel in scan.gitlinks:
        sub = git.nested_repo(repo.root, rel)
        if sub is not None:
            yield from trees(sub, f"{prefix}{rel}/", memo)
    for rel in (p for p, is_dir in scan.untracked if is_dir):
        sub = git.nested_repo(repo.root, rel)
        # git collapses an untracked directory: a clone may sit anywhere inside it (vendor/lib/)
        found = (
            [(sub, rel)]
            if sub is not None
            else [(git.nested_repo(repo.root, r), r) for r in git.repos_below(repo, rel)]
        )
        for nested, r in found:
            if nested is not None:
                yield from trees(nested, f"{prefix}{r}/", memo)


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
) -> Collected:
    """Every layer's entries. memo: the file remembering directory listings (unlisted.Memo), if any."""
    out = Collected()
    out.entries += explicit.literal_paths(user_cfg.block_paths, GLOBAL)
    out.entries += explicit.literal_paths(project_cfg.block_paths, EXPLICIT)
    if repo is None:
        return out
    listings = unlisted.Memo(memo)
    all_trees = out.trees = list(trees(repo, memo=listings))
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
