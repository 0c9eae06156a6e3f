"""gitignore-style matching: the fnmatch fast path agrees with pathspec, and splitting decisions."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_sandbox.patterns import Pattern, PatternSet


def ps(*texts: str) -> PatternSet:
    return PatternSet([Pattern(t, "t") for t in texts])


CASES = [
    (".claude/", ".claude", True),
    (".claude/", ".claude", False),
    (".claude/", "sub/.claude", True),
    (".aider*", ".aider.conf.yml", False),
    (".aider*", ".aider.tags.cache.v3", True),
    ("node_modules/", "a/b/node_modules", True),
    ("*.log", "x.log", False),
    ("*.log", "x.logs", False),
    ("CLAUDE.local.md", "CLAUDE.local.md", False),
    # anchored shapes (a `/` in them) take the regex fast path
    ("infra/prod.tfvars", "infra/prod.tfvars", False),
    ("infra/prod.tfvars", "a/infra/prod.tfvars", False),
    ("infra/prod.tfvars", "infra/prod.tfvars/x", False),
    ("/build/public/", "build/public", True),
    ("/build/public/", "build/public", False),
    ("/build/public/", "build/public/x.js", False),
    ("/build/public/", "x/build/public", True),
    ("config/*.yml", "config/a.yml", False),
    ("config/*.yml", "config/sub/a.yml", False),
    ("a/?/c", "a/b/c", False),
    ("a/?/c", "a/bb/c", False),
    ("/top.txt", "x/top.txt", False),
]


@pytest.mark.parametrize("pattern, rel, is_dir", CASES)
def test_fast_path_agrees_with_pathspec(pattern, rel, is_dir):
    import pathspec

    fast = ps(pattern)
    assert fast._spec is None, "built-in style patterns must not load pathspec"
    spec = pathspec.GitIgnoreSpec.from_lines([pattern])
    assert (fast.match(rel, is_dir) is not None) == spec.match_file(rel + "/" if is_dir else rel)


def test_complex_patterns_use_gitignore_semantics():
    s = ps("/build/public/", "*.tfvars", "!example.tfvars", "docs/**/secret.md")
    assert s.match("build/public", True)
    assert not s.match("x/build/public", True)
    assert s.match("prod.tfvars", False)
    assert not s.match("example.tfvars", False)
    assert s.match("docs/a/b/secret.md", False)


def test_the_matching_pattern_is_reported():
    s = ps("*.pem", "certs/")
    assert s.match("certs", True).text == "certs/"
    assert s.match("a.pem", False).text == "*.pem"


@pytest.mark.parametrize(
    "pattern, directory, expected",
    [
        ("build/public/", "build", True),
        ("/build/public/", "build", True),
        ("build/public/", "build/public", False),  # the directory itself, not below it
        ("out/*/keep/", "out", True),
        ("out/*/keep/", "out/a", True),
        ("out/*/keep/", "other", False),
        ("docs/**", "docs/a/b", True),
        (".claude/", "build", False),  # unanchored names are not searched for inside hidden dirs
        ("!build/public/", "build", False),
    ],
)
def test_may_match_below(pattern, directory, expected):
    assert (ps(pattern).may_match_below(directory) is not None) == expected


def test_brackets_go_to_the_real_parser():
    assert ps("[ab].txt")._spec is not None  # git's classes and errors, not fnmatch's


def test_remembered_name_answers_keep_directory_only_patterns_apart():
    ps = PatternSet([Pattern(".claude/", "t"), Pattern("*.log", "t")])
    for _ in range(2):  # the second round is answered from memory
        assert ps.match("a/.claude", True) is not None
        assert ps.match("b/.claude", False) is None
        assert ps.match("c/x.log", False) is not None
        assert ps.match("c/x.txt", False) is None


def _ancestors(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def _reference_match(patterns: PatternSet, rel: str, is_dir: bool) -> Pattern | None:
    """PatternSet.match as it was, asking each anchored pattern of every ancestor of rel in turn."""
    name = rel.rsplit("/", 1)[-1]
    if not patterns._anchored and (patterns._any_name is None or not patterns._any_name.any(name)):
        return None
    for i in range(len(patterns.patterns) - 1, -1, -1):
        pat = patterns.patterns[i]
        text = pat.text
        if text.endswith("/"):
            if not is_dir and i not in patterns._anchored:
                continue
            if not is_dir and not any(patterns._anchored[i].fullmatch(a) for a in _ancestors(rel)):
                continue
        rx = patterns._anchored.get(i)
        if rx is None:
            if patterns._names[i].match(name):
                return pat
        elif rx.fullmatch(rel) or any(rx.fullmatch(a) for a in _ancestors(rel)):
            return pat
    return None


_PARTS = ["a", "b", "infra", "prod.tfvars", "x.yml", "", "c d", "é\nf"]
# each one a pattern the fast path takes (a negation or `**` goes to pathspec, which keeps no memo of its own)
_SIMPLE = [
    "infra/prod.tfvars", "/infra/", "a/b/", "a/*/x.yml", "/a/?/", "*/b", "/*", "*.yml", "b/", "prod.tfvars",
    "a/b/c", "/b/", "infra/*", "*/*.yml", "infra/",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    texts=st.lists(st.sampled_from(_SIMPLE), min_size=1, max_size=4),
    asked=st.lists(
        st.tuples(st.lists(st.sampled_from(_PARTS), min_size=1, max_size=5).map("/".join), st.booleans()),
        min_size=1,
        max_size=25,
    ),
)
def test_anchored_patterns_answer_as_asking_every_ancestor_does(texts, asked):
    """The anchored patterns' answers for a path's ancestors are remembered per directory (a monorepo's 57,000
    paths asked about `infra/prod.tfvars` cost ~250 ms): the same answers, in any order, `//` and a leading `/`
    included."""
    s = ps(*texts)
    fresh = ps(*texts)
    assert s._spec is None
    for rel, is_dir in asked:
        assert s.match(rel, is_dir) == _reference_match(fresh, rel, is_dir), (rel, is_dir)


# --- forty-third red team: git's order with negations --------------------------------------------------------
# Each set as git reads it (the same lines as a .gitignore, `git ls-files -o -i`): pathspec's GitIgnoreSpec ranked a
# match "as a directory" below one "as a file" whatever their order, so an earlier negation ending in a wildcard
# beat a later directory pattern (13 of 2,000 random sets left a file readable that git ignores; 0 now).
GIT_ORDER = [
    (["**/*.tfvars", "!examples/**", "examples/prod/"], "examples/prod/db.tfvars", False, "examples/prod/"),
    (["**/*.tfvars", "!examples/**", "examples/prod/"], "examples/x.tfvars", False, None),
    (["**/*.tfvars", "!examples/**", "examples/prod/"], "live/a.tfvars", False, "**/*.tfvars"),
    (["!docs/**", "docs/private/"], "docs/private", True, "docs/private/"),
    (["**/secrets/", "!/docs/"], "docs/secrets", True, "**/secrets/"),  # the gap this page once documented
    (["examples/", "!examples/**"], "examples/a", False, "examples/"),  # no negation brings a file back
    (["*/", "!a /  ", "!.e/[^b]"], "a /s/x", False, "*/"),
    (["secret/", "!secret/"], "secret/a", False, None),
    (["!foo/", "foo/"], "foo/bar", False, "foo/"),
    # the re-attack: pathspec reads `X/**/` (the directories below X) as `X/`
    (["secrets/", "!secrets/**/"], "secrets/k.key", False, "secrets/"),
    (["secrets/", "!secrets/**/"], "secrets/deep/x.key", False, "secrets/"),
    (["!/a b\\ ", "**/", "!*/**/**/"], "x/y/z/c", False, "**/"),
]


@pytest.mark.parametrize("patterns, rel, is_dir, expected", GIT_ORDER)
def test_negations_are_read_in_gits_order(patterns, rel, is_dir, expected):
    found = ps(*patterns).match(rel, is_dir)
    assert (found.text if found else None) == expected
