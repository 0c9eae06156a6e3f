"""One work tree of the project as git listed it (the root repository, a submodule or a nested clone): what every
layer reads, and what the audit, the marks and the history walk look at after."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from ai_sandbox import git
from ai_sandbox.layers import unlisted
from ai_sandbox.records import record


@record
class Tree:
    """One work tree in the project: the root repository or a nested one, with its path from the root."""

    prefix: str  # "" for the root, "sub/dir/" for a nested repository
    scan: git.Scan
    walk: unlisted.Walk  # what git does not list: FIFOs, sockets, .gitattributes files


def trees(
    repo: git.Repo, prefix: str = "", memo: unlisted.Memo | None = None, meanwhile: Callable[[], None] | None = None
) -> Iterator[Tree]:
    """The root work tree and, recursively, every submodule and nested clone checked out inside it. meanwhile runs
    while git walks the root tree."""
    walk = unlisted.Walk(repo.root, memo)
    scan = git.scan(repo, meanwhile)
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
