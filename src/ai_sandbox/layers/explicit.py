"""Pattern blocks: the project's `block` list and the user's global patterns, matched against the project.

Patterns are matched against what git lists (tracked files, untracked and ignored entries), so a glob
does not walk inside ignored directories that an allowlist opened; a literal path is checked directly.
A pattern that matches a directory hides the directory, covering files created in it later.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

from ai_sandbox import git
from ai_sandbox.patterns import PatternSet, Source
from ai_sandbox.policy import Entry, Layer

TYPE_CHECKING = False
if TYPE_CHECKING:
    from ai_sandbox.layers.tree import Tree


def candidates(trees: Iterable[Tree]) -> Iterator[tuple[str, bool]]:
    """(root-relative path, is_dir) for everything git knows about in every work tree, the files inside
    untracked directories (git lists `svc/` alone: a `.env` pattern must still find `svc/.env`), and the
    special files found beside it all."""
    for tree in trees:
        p, scan = tree.prefix, tree.scan
        for rel in scan.tracked:
            yield p + rel, False
        for rel in scan.gitlinks:
            yield p + rel, True
        for rel, is_dir in scan.untracked:
            yield p + rel, is_dir
        if untracked_dirs := [rel for rel, is_dir in scan.untracked if is_dir]:
            for rel in git.untracked_below(scan.repo, untracked_dirs):
                if not rel.endswith("/"):  # a nested repository is a tree of its own
                    yield p + rel, False
        for rel, is_dir in scan.ignored:
            yield p + rel, is_dir
        for rel in tree.walk.special:  # FIFOs and sockets: git lists none, ignored or not
            yield p + rel, False


def match(root: str, patterns: PatternSet, layer: Layer, items: list[tuple[str, bool]]) -> list[Entry]:
    if not patterns:
        return []
    out: list[Entry] = []
    seen: set[str] = set()
    # directory -> the highest directory at or above it that a pattern hides ("" when none), asked once per
    # directory: building every ancestor of every item in turn was ~150 ms of a monorepo launch (57,000 items)
    covered: dict[str, str] = {"": ""}
    reasons: dict[str, str] = {}

    def cover(d: str) -> str:
        pending = []
        while d not in covered:
            pending.append(d)
            d = d.rpartition("/")[0]
        top = covered[d]
        for q in reversed(pending):  # from the highest down: the highest matching directory wins
            if not top:
                pat = patterns.match(q, True)
                if pat is not None:
                    top = q
                    reasons[q] = f"matches {pat.text!r} ({pat.source})"
            covered[q] = top
        return top

    for rel, is_dir in items:
        parent = rel.rpartition("/")[0]
        top = covered.get(parent)
        if top is None:
            top = cover(parent)
        if top:  # one entry covers its tree
            if top not in seen:
                seen.add(top)
                out.append(Entry(os.path.join(root, top), True, layer, reasons[top]))
            continue
        pat = patterns.match(rel, is_dir)
        if pat is not None and rel not in seen:
            seen.add(rel)
            out.append(Entry(os.path.join(root, rel), is_dir, layer, f"matches {pat.text!r} ({pat.source})"))
    out += _literal_inside(root, patterns, layer, seen)
    return out


def _literal_inside(root: str, patterns: PatternSet, layer: Layer, seen: set[str]) -> list[Entry]:
    """Patterns without wildcards name one path; check it directly so it is hidden wherever it lies."""
    out = []
    for pat in patterns.patterns:
        text = pat.text
        if text.startswith("!") or any(c in text for c in "*?[\\"):
            continue
        written = text.strip("/")
        if "/" not in text.rstrip("/"):
            continue  # an unanchored name can be anywhere; only git's listing finds those
        # normalized as the config's absolute paths are (config.py refuses `..`): `a//b` and `a/./b` name `a/b` (kept
        # as written, bwrap's launch check looked for a mount at `a//b` and refused every launch: thirty-sixth red team)
        body = os.path.normpath(written)
        path = os.path.join(root, body)
        if body == "." or body in seen or not os.path.lexists(path):
            continue
        is_dir = os.path.isdir(path)
        if patterns.match(written, is_dir) is not pat:
            continue  # a later negation wins
        seen.add(body)
        out.append(Entry(path, is_dir, layer, f"matches {pat.text!r} ({pat.source})"))
    return out


def literal_paths(paths: list[tuple[str, Source]], layer: Layer) -> list[Entry]:
    """Absolute or ~/ paths written in a config file, hidden when they exist."""
    return [
        Entry(path, os.path.isdir(path), layer, f"block ({source})") for path, source in paths if os.path.lexists(path)
    ]
