"""gitignore-style matching: the fnmatch fast path agrees with pathspec, and splitting decisions."""

from __future__ import annotations

import pytest

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
