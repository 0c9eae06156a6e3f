"""Shell-style name patterns (`*` and `?` only, as fnmatchcase reads them) matched without compiling a regex.

A launch matches every listed name against some fifty patterns (the allowlists, the secret names); fnmatch
compiles one regex per pattern, and the one alternation that stood for all of them took ~8 ms to compile: a
fifth of a launch's own work on a small project. Patterns here are split once into their fixed parts, and a
name is matched with startswith, endswith and find, which is what `*` means when nothing else is special. A
pattern with `[`, `]` or anything fnmatch reads otherwise is the caller's to route elsewhere (`plain`).
"""

from __future__ import annotations

from collections.abc import Callable


def plain(pattern: str) -> bool:
    """Whether this module matches the pattern exactly as fnmatchcase does: no bracket class."""
    return "[" not in pattern and "]" not in pattern


def _parts(pattern: str) -> tuple[str, ...]:
    return tuple(pattern.split("*"))


def _fixed(name: str, part: str, at: int) -> bool:
    """part (where `?` stands for any one character) is in name at index at."""
    if "?" not in part:
        return name.startswith(part, at)
    if at + len(part) > len(name):
        return False
    return all(p == "?" or p == c for p, c in zip(part, name[at : at + len(part)], strict=True))


def _find(name: str, part: str, start: int, end: int) -> int:
    """The first index >= start where part (with `?`) fits in name[:end], or -1."""
    if "?" not in part:
        return name.find(part, start, end)
    for at in range(start, end - len(part) + 1):
        if _fixed(name, part, at):
            return at
    return -1


class Glob:
    """One pattern, split at its stars. Matching the middle parts leftmost-first is exact for `*`: any match
    can be slid left onto the first place each fixed part fits."""

    __slots__ = ("parts", "text", "literal")

    def __init__(self, text: str) -> None:
        self.text = text
        self.parts = _parts(text)
        self.literal = len(self.parts) == 1 and "?" not in text

    def match(self, name: str) -> bool:
        parts = self.parts
        if len(parts) == 1:
            return name == self.text if self.literal else len(name) == len(self.text) and _fixed(name, self.text, 0)
        first, last = parts[0], parts[-1]
        end = len(name) - len(last)
        if end < len(first) or not _fixed(name, first, 0) or not _fixed(name, last, end):
            return False
        at = len(first)
        for mid in parts[1:-1]:
            found = _find(name, mid, at, end)
            if found < 0:
                return False
            at = found + len(mid)
        return True


def match(name: str, pattern: str) -> bool:
    """fnmatchcase(name, pattern) for a `plain` pattern."""
    return Glob(pattern).match(name)


# Names asked before the patterns left over from the fast paths are compiled into one regex: a small project asks
# a few hundred and never pays the compile (~2 ms); a monorepo's build outputs ask the secret names ~100,000
# times, where one compiled match beats five matched in Python by ~80 ms.
COMPILE_AFTER = 512


class Names:
    """Many patterns, asked of every listed name: the literal ones answered by one set lookup, `*suffix` and
    `prefix*` (most of the rest) by one endswith or startswith over all of them, the others one by one, or by
    one compiled regex once many names were asked."""

    __slots__ = ("literals", "suffixes", "prefixes", "globs", "asked", "regex")

    def __init__(self, patterns: list[str] | tuple[str, ...]) -> None:
        globs = [Glob(p) for p in patterns]
        self.literals = frozenset(g.text for g in globs if g.literal)
        # one star at either end, no `?`: answered by endswith/startswith over all of them
        edge = [g for g in globs if len(g.parts) == 2 and "?" not in g.text and not (g.parts[0] and g.parts[1])]
        self.suffixes = tuple(g.parts[1] for g in edge if not g.parts[0])
        self.prefixes = tuple(g.parts[0] for g in edge if not g.parts[1])
        self.globs = [g for g in globs if not g.literal and g not in edge]
        self.asked = 0
        self.regex: Callable[[str], object] | None = None

    def any(self, name: str) -> bool:
        if name in self.literals or name.endswith(self.suffixes) or name.startswith(self.prefixes):
            return True
        if not self.globs:
            return False
        if self.regex is None:
            self.asked += 1
            if self.asked <= COMPILE_AFTER:
                return any(g.match(name) for g in self.globs)
            import re
            from fnmatch import translate

            self.regex = re.compile("|".join(f"(?:{translate(g.text)})" for g in self.globs)).match
        return self.regex(name) is not None
