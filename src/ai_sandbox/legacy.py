"""The legacy bash `.ai-sandbox` file, read by parsing and never by sourcing.

It holds two bash arrays, `AI_SANDBOX_ALLOW_PATHS=(…)` and `AI_SANDBOX_BLOCK_PATHS=(…)`. `$HOME` and
`${HOME}` are expanded (they are everywhere in such files and mean one thing); anything else a shell would
expand or execute (`$VAR`, `$(…)`, backticks, here-docs) is refused with its line: a line we do not
understand could have been a block we would drop.
"""

from __future__ import annotations

import os

from ai_sandbox.errors import ConfigError
from ai_sandbox.records import factory, record

KEYS = {"AI_SANDBOX_ALLOW_PATHS": "allow", "AI_SANDBOX_BLOCK_PATHS": "block"}


@record
class LegacyConfig:
    allow: list[tuple[str, int]] = factory(list)  # (path, line)
    block: list[tuple[str, int]] = factory(list)


@record
class _Tok:
    kind: str  # "word", "(", ")", "nl"
    text: str
    line: int


class _Lexer:
    def __init__(self, text: str, path: str) -> None:
        self.text, self.path, self.i, self.line = text, path, 0, 1

    def fail(self, what: str, line: int | None = None) -> ConfigError:
        return ConfigError(
            f"{self.path}:{line or self.line}: {what}",
            'write each path literally, e.g. AI_SANDBOX_BLOCK_PATHS=(secrets/ "my file.txt")',
        )

    def tokens(self) -> list[_Tok]:
        out: list[_Tok] = []
        t = self.text
        while self.i < len(t):
            c = t[self.i]
            if c == "\n":
                out.append(_Tok("nl", "", self.line))
                self.line += 1
                self.i += 1
            elif c in " \t\r":
                self.i += 1
            elif c == "#":
                while self.i < len(t) and t[self.i] != "\n":
                    self.i += 1
            elif c in "()":
                out.append(_Tok(c, c, self.line))
                self.i += 1
            else:
                out.append(self.word())
        return out

    def home(self, buf: list[str]) -> bool:
        """Expand `$HOME` or `${HOME}` at the cursor into buf; False when it is any other expansion."""
        t, i = self.text, self.i
        for form in ("${HOME}", "$HOME"):
            end = i + len(form)
            if t.startswith(form, i) and not (form == "$HOME" and end < len(t) and (t[end].isalnum() or t[end] == "_")):
                buf.append(os.path.expanduser("~"))
                self.i = end
                return True
        return False

    def word(self) -> _Tok:
        t, line = self.text, self.line
        buf: list[str] = []
        while self.i < len(t) and t[self.i] not in " \t\r\n()":
            c = t[self.i]
            if c in "$`" and not self.home(buf):
                raise self.fail(f"`{c}` would be expanded by a shell; ai-sandbox does not run this file")
            if c == "$":
                continue
            if c in ";&|<>":
                raise self.fail(f"`{c}` is shell syntax; only the two path arrays are understood")
            if c == "'":
                end = t.find("'", self.i + 1)
                if end < 0:
                    raise self.fail("unbalanced single quote", line)
                self.line += t.count("\n", self.i, end)
                buf.append(t[self.i + 1 : end])
                self.i = end + 1
            elif c == '"':
                self.i += 1
                while True:
                    if self.i >= len(t):
                        raise self.fail("unbalanced double quote", line)
                    c = t[self.i]
                    if c == '"':
                        self.i += 1
                        break
                    if c in "$`" and not self.home(buf):
                        raise self.fail(f"`{c}` would be expanded by a shell; ai-sandbox does not run this file")
                    if c == "$":
                        continue
                    if c == "\\" and self.i + 1 < len(t) and t[self.i + 1] in '"\\$`\n':
                        if t[self.i + 1] != "\n":
                            buf.append(t[self.i + 1])
                        else:
                            self.line += 1
                        self.i += 2
                        continue
                    if c == "\n":
                        self.line += 1
                    buf.append(c)
                    self.i += 1
            elif c == "{" and _brace_expansion(t, self.i):
                raise self.fail("`{…,…}` would be expanded by a shell into several paths; list each one")
            elif c == "\\":
                if self.i + 1 < len(t):
                    if t[self.i + 1] == "\n":
                        self.line += 1
                    else:
                        buf.append(t[self.i + 1])
                self.i += 2
            else:
                buf.append(c)
                self.i += 1
        return _Tok("word", "".join(buf), line)


def _brace_expansion(t: str, i: int) -> bool:
    """bash expands an unquoted {a,b} or {1..3} into several words."""
    end = i + 1
    while end < len(t) and t[end] not in " \t\r\n()}'\"":
        end += 1
    inner = t[i + 1 : end]
    return end < len(t) and t[end] == "}" and ("," in inner or ".." in inner)


def parse(text: str, path: str) -> LegacyConfig:
    lexer = _Lexer(text, path)
    toks = lexer.tokens()
    cfg = LegacyConfig()
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok.kind == "nl":
            i += 1
            continue
        name, op, _ = tok.text.partition("+=") if "+=" in tok.text else tok.text.partition("=")
        target = KEYS.get(name) if tok.kind == "word" and tok.text.endswith("=") else None
        if target is None or i + 1 >= len(toks) or toks[i + 1].kind != "(":
            raise lexer.fail(
                f"not understood: {tok.text or tok.kind!r}; only AI_SANDBOX_ALLOW_PATHS=(…) and "
                "AI_SANDBOX_BLOCK_PATHS=(…) are read",
                tok.line,
            )
        i += 2
        values: list[tuple[str, int]] = []
        while True:
            if i >= len(toks):
                raise lexer.fail(f"{name}: missing `)`", tok.line)
            if toks[i].kind == ")":
                i += 1
                break
            if toks[i].kind == "(":
                raise lexer.fail("nested `(`", toks[i].line)
            if toks[i].kind == "word" and toks[i].text:
                values.append((toks[i].text, toks[i].line))
            i += 1
        getattr(cfg, target).extend(values)
    return cfg
