"""layers/explicit.match: each item's directories asked once between them, with the same entries as asking every
item's ancestors in turn (the monorepo's 57,000 items with one `block` pattern: ~150 ms of the launch)."""

from __future__ import annotations

import os

from hypothesis import given, settings
from hypothesis import strategies as st

from ai_sandbox.layers import explicit
from ai_sandbox.patterns import Pattern, PatternSet
from ai_sandbox.policy import EXPLICIT, Entry

ROOT = "/nonexistent-ai-sandbox-test-root"  # no literal pattern names a path here: only git's listing is matched


def reference(root: str, patterns: PatternSet, items: list[tuple[str, bool]]) -> list[Entry]:
    """The matching as it was: every ancestor of every item asked, the highest that matches first."""
    out: list[Entry] = []
    seen: set[str] = set()
    for rel, is_dir in items:
        parts = rel.split("/")
        for i in range(1, len(parts)):
            d = "/".join(parts[:i])
            pat = patterns.match(d, True)
            if pat is not None:
                if d not in seen:
                    seen.add(d)
                    out.append(Entry(os.path.join(root, d), True, EXPLICIT, f"matches {pat.text!r} ({pat.source})"))
                break
        else:
            pat = patterns.match(rel, is_dir)
            if pat is not None and rel not in seen:
                seen.add(rel)
                out.append(Entry(os.path.join(root, rel), is_dir, EXPLICIT, f"matches {pat.text!r} ({pat.source})"))
    return out


NAMES = ["a", "b", "README.md", "x.pem", "node_modules", ".env", "c d", "é\nf"]
PATTERNS = [
    "README.md", "*.pem", "a/", "/a/b", "b/", "a/*/x.pem", "!a/README.md", "**/b/README.md", ".env*",
    "node_modules/", "a/b/", "c d/", "!b/", "/README.md", "a/**",
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(
        st.tuples(st.lists(st.sampled_from(NAMES), min_size=1, max_size=4).map("/".join), st.booleans()), max_size=30
    ),
    texts=st.lists(st.sampled_from(PATTERNS), min_size=1, max_size=4),
)
def test_the_entries_are_those_of_asking_every_ancestor(items, texts):
    patterns = PatternSet([Pattern(t, "t") for t in texts])
    assert explicit.match(ROOT, patterns, EXPLICIT, items) == reference(ROOT, patterns, items)


def test_a_directory_is_asked_once_whatever_lies_below_it():
    """50 files in a/b/c: `a`, `a/b` and `a/b/c` are asked once each, not once per file."""
    asked: list[tuple[str, bool]] = []
    patterns = PatternSet([Pattern("README.md", "t")])
    real = patterns.match

    def counted(rel: str, is_dir: bool) -> Pattern | None:
        asked.append((rel, is_dir))
        return real(rel, is_dir)

    patterns.match = counted  # type: ignore[method-assign]
    items = [(f"a/b/c/f{i}", False) for i in range(50)]
    assert explicit.match(ROOT, patterns, EXPLICIT, items) == []
    dirs = [rel for rel, is_dir in asked if is_dir]
    assert sorted(dirs) == ["a", "a/b", "a/b/c"]
