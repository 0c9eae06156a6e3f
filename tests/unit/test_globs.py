"""globs.py against the standard library: for every pattern without a bracket class, the same answer as
fnmatchcase, on names built to sit near the pattern's fixed parts."""

from fnmatch import fnmatchcase

from hypothesis import given, settings
from hypothesis import strategies as st

from ai_sandbox import globs, patterns, profiles

CHARS = "ab.*?-\n\udc80é"
texts = st.text(alphabet=CHARS, max_size=8)


@settings(max_examples=3000, deadline=None)
@given(pattern=texts, name=st.text(alphabet="ab.-\n\udc80é*?", max_size=10))
def test_a_glob_answers_as_fnmatchcase(pattern, name):
    assert globs.match(name, pattern) == fnmatchcase(name, pattern)


@settings(max_examples=1000, deadline=None)
@given(pattern=texts, data=st.data())
def test_names_built_from_the_pattern_itself_agree(pattern, data):
    """Names made by filling the pattern's wildcards (so that most of them match), then nudged."""
    fill = data.draw(st.lists(st.text(alphabet="ab.", max_size=3), min_size=pattern.count("*") + pattern.count("?")))
    it = iter(fill)
    name = "".join((next(it) if c == "*" else (next(it)[:1] or "x")) if c in "*?" else c for c in pattern)
    cut = data.draw(st.integers(0, len(name)))
    for candidate in (name, name[:cut] + name[cut + 1 :], name + "a", "a" + name):
        assert globs.match(candidate, pattern) == fnmatchcase(candidate, pattern)


@given(names=st.lists(texts, max_size=6), name=texts)
def test_a_set_of_patterns_matches_when_one_does(names, name):
    assert globs.Names(names).any(name) == any(fnmatchcase(name, p) for p in names)


def test_the_shipped_name_lists_have_no_bracket_class():
    """What globs.py cannot read must never reach it: the secret names, and the simple allow patterns."""
    assert all(globs.plain(p) for p in (*profiles.SECRET_NAMES, *profiles.NOT_SECRET))
    simple = [
        p
        for p in (*profiles.TOOL_ALLOW, *profiles.DEPENDENCY_DIRS, *profiles.BUILD_OUTPUT_DIRS)
        if patterns._is_simple(p)
    ]
    assert simple and all(globs.plain(p) for p in simple)
    assert not patterns._is_simple("[ab]c") and not patterns._is_simple("a]")


@given(names=st.lists(texts, max_size=6), asked=st.lists(texts, min_size=1, max_size=8))
def test_the_compiled_regex_answers_as_the_matches_it_replaces(names, asked):
    """Past COMPILE_AFTER names asked, the left-over patterns are one regex: the same answers as fnmatchcase."""
    many = globs.Names(names)
    many.asked = globs.COMPILE_AFTER - 1
    for name in asked * 2:
        assert many.any(name) == any(fnmatchcase(name, p) for p in names)


def test_many_names_asked_compile_the_left_over_patterns_once():
    many = globs.Names(["*a*b", "x?y", "*.log"])
    names = [f"{i}a{i}b" if i % 3 else f"x{i % 10}y" for i in range(globs.COMPILE_AFTER + 100)]
    assert [many.any(n) for n in names] == [any(fnmatchcase(n, p) for p in ("*a*b", "x?y", "*.log")) for n in names]
    assert many.regex is not None


def test_a_secret_name_holds_by_any_of_its_patterns():
    """`*secret*` is for data files only, but a name it passes over may still be a secret by another pattern
    (thirtieth red team: `dist/secret.asc` was left readable, `dist/key.asc` hidden)."""
    assert profiles.secret_name("secret.asc") == "*.asc"
    assert profiles.secret_name("Secrets.age") == "*.age"
    assert profiles.secret_name("my-credentials.pem") == "*.pem"
    assert profiles.secret_name("secret_manager.py") is None
    assert profiles.secret_name("secrets.yaml") == "*secret*"
    assert profiles.secret_name("key.asc") == "*.asc"
    assert profiles.secret_name("secret.asc.example") is None


def test_remembered_build_output_answers_are_kept_per_secret_rules(monkeypatch):
    """layers/outputs.py remembers secret_name's verdicts by directory, under a name holding SECRET_RULES
    (launch.py): a change of the rules, or of how they are read, is a new name, so a build output listed under
    the old ones is looked at again (secret.asc above was remembered readable)."""
    assert profiles.secret_rules() == profiles.SECRET_RULES
    monkeypatch.setattr(profiles, "SECRET_LOGIC", profiles.SECRET_LOGIC + 1)
    assert profiles.secret_rules() != profiles.SECRET_RULES
    monkeypatch.undo()
    monkeypatch.setattr(profiles, "NOT_SECRET", (*profiles.NOT_SECRET, "*.bak"))
    assert profiles.secret_rules() != profiles.SECRET_RULES
