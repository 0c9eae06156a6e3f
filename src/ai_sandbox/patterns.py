"""gitignore-style patterns, matched against paths relative to the git root.

pathspec gives exact gitignore semantics but costs 30–50 ms to import, so the common shapes are matched
here: plain names such as `.claude/` or `.aider*` (fnmatch on the last component) and paths such as
`infra/prod.tfvars`, `/build/public/` or `config/*.yml` (a regex where `*` and `?` stop at `/`, anchored at
the root as git anchors any pattern with a `/` in it). pathspec is loaded only for the rest (`**`, `[…]`,
escapes, negations); the property tests compare both paths with git itself.
"""

from __future__ import annotations

import re
from enum import StrEnum  # already imported by re: free on the launch path
from fnmatch import fnmatchcase

from ai_sandbox.errors import ConfigError
from ai_sandbox.globs import Glob, Names
from ai_sandbox.records import value

_SPECIAL = frozenset("\\!^")  # escapes, negation and [^...] classes need the real parser
# Stands for "\n" in what pathspec sees: its regexes use `.` (stops at a newline) and `$` (matches before a
# final one). No file name decodes to it: surrogateescape only yields \udc80-\udcff.
_NL = "\udc0a"
_NEVER = re.compile(r"(?!)")
_POSIX = {"alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z", "lower": "a-z",
          "xdigit": "0-9A-Fa-f", "blank": " \t", "space": " \t\n\r\f\v"}  # fmt: skip


# Who wrote a pattern. Decisions read this, never `source` (text for people, which a project file can imitate:
# an allow entry `[.(profile ]env` renders as "... (profile ...)" too). Built-in lists and profiles are not
# files a session can edit; the user's config is read-only inside but still a rule that may change; a
# project's files are the agent's to rewrite.
class Origin(StrEnum):
    BUILT_IN = "built-in"
    DEPENDENCY = "dependency"
    OUTPUT = "build-output"
    PROFILE = "profile"
    USER = "user"
    PROJECT = "project"

    @property
    def shipped(self) -> bool:
        """Shipped with ai-sandbox or its profiles: not a file a session can edit."""
        return self in CODE


BUILT_IN, DEPENDENCY, OUTPUT, PROFILE = Origin.BUILT_IN, Origin.DEPENDENCY, Origin.OUTPUT, Origin.PROFILE
USER, PROJECT = Origin.USER, Origin.PROJECT
ORIGINS = tuple(Origin)
CODE = frozenset({BUILT_IN, DEPENDENCY, OUTPUT, PROFILE})


@value
class Source:
    """Where a rule was written: who (what decisions read), and for people which file and line, or what it
    is when it comes from no file ("profile claude", "dependency directory")."""

    origin: Origin
    file: str = ""  # as people know it: ".ai-sandbox.toml", "~/.config/ai-sandbox/config.toml"
    line: int = 0
    name: str = ""

    def __str__(self) -> str:
        if not self.file:
            return self.name or str(self.origin)
        return f"{self.file}:{self.line}" if self.line else self.file


@value
class Pattern:
    text: str
    source: Source = Source(PROJECT)  # unsaid means the least trusted

    @property
    def origin(self) -> Origin:
        return self.source.origin

    def __str__(self) -> str:
        """The pattern and where it was written, as reports name a rule."""
        return f"{self.text} ({self.source})"


def _needs_parser(text: str, body: str) -> bool:
    """What only pathspec matches as git does, whatever the pattern's shape."""
    return (
        "**" in body
        or bool(_SPECIAL & set(body))
        or body.startswith("#")  # a comment in git's syntax
        or text[-1].isspace()  # git strips trailing blanks; fnmatch would keep them
        or "[" in body  # brackets: git's classes (and its errors) differ from fnmatch's
        or "]" in body
    )


def _is_simple(text: str) -> bool:
    """A plain name (no `/`), matched with fnmatch on the last component."""
    body = text[:-1] if text.endswith("/") else text
    return bool(body) and "/" not in body and not _needs_parser(text, body)


def escapes_next(body: str) -> bool:
    """Whether body ends in an unescaped backslash, which escapes what follows it."""
    return (len(body) - len(body.rstrip("\\"))) % 2 == 1


def _for_pathspec(text: str) -> str:
    """The pattern as pathspec must read it to mean what git means."""
    text = text.replace("\n", _NL)
    text = re.sub(r"\[:([a-z]+):\]", lambda m: _POSIX.get(m.group(1), m.group(0)), text)
    # git strips trailing spaces unless escaped; pathspec strips every trailing whitespace character.
    # A tab (or NBSP…) that git keeps goes into a bracket, which pathspec's rstrip() cannot reach.
    if text and text[-1].isspace() and text[-1] != " ":
        body = text[:-1]
        if escapes_next(body):
            body = body[:-1]  # it was escaped: the bracket replaces the escape
        text = f"{body}[{text[-1]}]"
    # `X/**/` names the directories below X, not X; pathspec reads it as `X/` (forty-third red team's re-attack:
    # `["secrets/", "!secrets/**/"]` left secrets/ readable): `X/**/*/` is what git means
    if m := _BELOW.fullmatch(text):
        text = f"{m.group(1)}/**/*/"
    return text


_BELOW = re.compile(r"(!?.*[^/\\])/(?:\*\*/)+")  # a prefix, then `**/` once or more at the end


def _anchored_regex(text: str) -> re.Pattern[str] | None:
    """A regex for a wildcard-light pattern holding a `/`; None when it needs the real parser."""
    body = text[:-1] if text.endswith("/") else text
    if "/" not in body or _needs_parser(text, body) or "\n" in text or "//" in body:
        return None
    out = []
    for ch in body.lstrip("/"):
        out.append("[^/]*" if ch == "*" else "[^/]" if ch == "?" else re.escape(ch))
    return re.compile("".join(out), re.DOTALL)


_NONE: frozenset[int] = frozenset()


class PatternSet:
    """An ordered list of patterns; like a .gitignore, the last matching pattern decides."""

    def __init__(self, patterns: list[Pattern]) -> None:
        self.patterns = patterns
        self._anchored: dict[int, re.Pattern[str]] = {}
        for i, p in enumerate(patterns):
            if not _is_simple(p.text) and (rx := _anchored_regex(p.text)) is not None:
                self._anchored[i] = rx
        self._simple = all(i in self._anchored or _is_simple(p.text) for i, p in enumerate(patterns))
        self._below = [
            (p, p.text.rstrip("/").lstrip("/").split("/"))
            for p in patterns
            if not p.text.startswith("!") and "/" in p.text.rstrip("/")
        ]
        # the simple name patterns, matched without a regex (globs.py): most paths match none, and are answered
        # at once
        self._names = {i: Glob(p.text.rstrip("/")) for i, p in enumerate(patterns) if i not in self._anchored}
        self._any_name = Names([g.text for g in self._names.values()]) if self._names else None
        self._spec = None
        self._by_name: dict[tuple[str, bool], Pattern | None] = {}
        self._in_dir: dict[str, frozenset[int]] = {}  # a directory -> _above's answer for what it holds
        self._dirs: dict[str, Pattern | None] = {}  # a directory -> the pattern that excludes it (pathspec's path)
        if not self._simple:
            import pathspec  # deliberately lazy, see module docstring

            lines = [_for_pathspec(p.text) for p in patterns]
            try:
                self._spec = pathspec.GitIgnoreSpec.from_lines(lines)
            except (ValueError, re.error):
                for pat, line in zip(patterns, lines, strict=True):  # name the one that is wrong
                    try:
                        pathspec.GitIgnoreSpec.from_lines([line])
                    except (ValueError, re.error) as e:
                        raise ConfigError(
                            f"{pat.source}: {pat.text!r} is not a valid pattern ({e})",
                            "a trailing `\\` escapes nothing (write `\\\\`); a range needs `[a-z]`",
                        ) from None
                raise
            # pathspec's regex for a pattern also matches what a directory it names holds (its `ps_d` group is
            # the slash after that directory, a prefix of the path): git leaves those to the directory (_dir). So
            # a pattern with that group matches a path itself only where the group ends it (a directory's path
            # given with its slash); one without (`docs/**`, whose regex is `^docs/`) names what a directory holds,
            # never the directory, whose path is then given without a slash.
            self._itself = [
                (re.compile(rx.pattern + r"\Z", rx.flags), p.include, True)
                if (rx := p.regex) is not None and "(?P<ps_d>" in rx.pattern
                else (rx or _NEVER, p.include, False)
                for p in self._spec.patterns
            ]

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def match(self, rel: str, is_dir: bool) -> Pattern | None:
        """The pattern that includes rel, or None when none does (or a negation has the last word)."""
        if not self.patterns:
            return None
        if self._spec is not None:
            # git's order: a directory excluded excludes all it holds (no negation brings a path back from it);
            # otherwise the last pattern that matches the path itself decides. pathspec's GitIgnoreSpec ranks a
            # match "as a directory" below one "as a file" instead, whatever their order: `["!docs/**",
            # "docs/private/"]` left docs/private/ readable (forty-third red team; 13 of 2,000 random sets)
            rel = rel.replace("\n", _NL)
            parent = rel.rpartition("/")[0]
            found = self._dir(parent) if parent else None
            return found if found is not None else self._own(rel, is_dir)
        name = rel.rsplit("/", 1)[-1]
        if self._anchored:
            return self._match(rel, name, is_dir)
        if self._any_name is None or not self._any_name.any(name):
            return None
        # names only: the answer depends on the last component alone, and a monorepo repeats a few names
        # (node_modules, dist) thousands of times
        key = (name, is_dir)
        if key not in self._by_name:
            self._by_name[key] = self._match(rel, name, is_dir)
        return self._by_name[key]

    def _dir(self, d: str) -> Pattern | None:
        """The pattern that excludes directory d, itself or through a directory above it; remembered."""
        if d not in self._dirs:
            parent = d.rpartition("/")[0]
            self._dirs[d] = (self._dir(parent) if parent else None) or self._own(d, True)
        return self._dirs[d]

    def _own(self, rel: str, is_dir: bool) -> Pattern | None:
        """The last pattern that matches rel itself when it includes, None when it negates or none does."""
        for i in range(len(self._itself) - 1, -1, -1):
            itself, include, with_slash = self._itself[i]
            if include is not None and itself.search(rel + "/" if is_dir and with_slash else rel):
                return self.patterns[i] if include else None
        return None

    def _match(self, rel: str, name: str, is_dir: bool) -> Pattern | None:
        above = self._above(rel) if self._anchored else _NONE
        for i in range(len(self.patterns) - 1, -1, -1):
            pat = self.patterns[i]
            text = pat.text
            if text.endswith("/"):
                if not is_dir and i not in self._anchored:
                    continue
                text = text[:-1]
                if not is_dir and i not in above:
                    continue
            rx = self._anchored.get(i)
            if rx is None:
                if self._names[i].match(name):
                    return pat
            elif i in above or rx.fullmatch(rel):
                return pat  # a pattern that names a directory covers everything in it, as in git
        return None

    def _above(self, rel: str) -> frozenset[int]:
        """The anchored patterns that match one of rel's ancestors (`a`, `a/b` for `a/b/c`), remembered per
        directory: every path in a directory has the same ancestors, and asking each pattern of each ancestor of
        each of a monorepo's 57,000 paths was ~250 ms of a launch with one `infra/prod.tfvars` rule."""
        if "/" not in rel:
            return _NONE
        d = rel.rpartition("/")[0]
        chain = []  # the directories not yet known, nearest first (a loop: paths can be thousands of levels deep)
        while d not in self._in_dir:
            chain.append(d)
            if "/" not in d:
                base = _NONE
                break
            d = d.rpartition("/")[0]
        else:
            base = self._in_dir[d]
        for q in reversed(chain):
            here = [i for i, rx in self._anchored.items() if rx.fullmatch(q)]
            if here:
                base = base.union(here)
            self._in_dir[q] = base
        return base

    def may_match_below(self, dir_rel: str) -> Pattern | None:
        """A pattern that names something strictly inside dir_rel, so the directory must be split.

        Only patterns anchored with a '/' are followed into a hidden directory: an unanchored name like
        `.claude/` could match at any depth, and searching every ignored tree for it would cost a walk of
        node_modules at each launch. Write `build/public/` to reach inside an ignored `build/`.
        """
        if not self._below:
            return None  # the usual case: no allow pattern with a `/` in it
        parts = dir_rel.split("/")
        for pat, segs in self._below:
            if _prefix_matches(segs, parts):
                return pat
        return None


def _prefix_matches(segs: list[str], parts: list[str]) -> bool:
    for i, part in enumerate(parts):
        if i >= len(segs):
            return False
        if segs[i] == "**":
            return True
        if not fnmatchcase(part, segs[i]):
            return False
    return len(segs) > len(parts)
