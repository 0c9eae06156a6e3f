"""What ai-sandbox prints to the terminal names files a session can name: their control characters must reach it
escaped, never as codes that set the title, clear the screen or write the clipboard (forty-third red team: a
hidden tracked file named `x<ESC>]0;…<BEL><ESC>[2J` in the launch's hidden-edit warning, a kept path in the
allowed-but-hidden one, a reason in --dry-run's list)."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from ai_sandbox import fs, launch, main, report
from ai_sandbox.errors import PolicyError
from ai_sandbox.policy import ALLOWED_BUT_HIDDEN, HIDDEN_EDIT, IGNORED, How, Mask, Policy

NAME = "x\x1b]0;PWNED\x07\x1b[2J\x1b[31mRED\udcff\n.evil"
CODES = ("\x1b", "\x07", "\udcff", "\n.evil")


def _clean(text: str) -> None:
    assert not [c for c in CODES if c in text], repr(text)
    assert "\\x1b]0;PWNED\\x07" in text, repr(text)


def test_a_line_keeps_what_prints_and_escapes_the_rest():
    assert fs.shown("plain — text …") == "plain — text …"
    assert fs.shown(f"a {NAME} b") == "a x\\x1b]0;PWNED\\x07\\x1b[2J\\x1b[31mRED\\udcff\\n.evil b"


def test_the_launchs_warnings_reach_the_terminal_escaped(capsys):
    policy = Policy(root="/p", in_git=True)
    policy.warn(HIDDEN_EDIT, f"1 hidden tracked file(s) have changes you have not staged ({NAME})", "/p/" + NAME)
    policy.warn(ALLOWED_BUT_HIDDEN, f"/p/{NAME}/dist is allowed but hidden anyway", "/p/" + NAME)
    launch._print_loud(policy, f"history: {NAME}", None)
    err = capsys.readouterr().err
    assert err.count("ai-sandbox: warning:") == 3 and len(err.splitlines()) == 3, err
    _clean(err)


def test_an_error_naming_a_file_reaches_the_terminal_escaped(monkeypatch, capsys):
    def refuse(req: object) -> int:
        raise PolicyError(f"{NAME} cannot be resolved", "remove it")

    monkeypatch.setattr(launch, "run", refuse)
    assert main.main(["--", "true"]) == PolicyError.exit_code
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    _clean(err)


def test_an_internal_error_naming_a_file_reaches_the_terminal_escaped(monkeypatch, capsys):
    def crash(req: object) -> int:
        raise RuntimeError(NAME)

    monkeypatch.setattr(launch, "run", crash)
    assert main.main(["--", "true"]) == 70
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1, err
    _clean(err)


@pytest.mark.parametrize("where", ["reason", "detail"])
def test_dry_runs_list_of_masks_shows_reasons_escaped(where):
    text = f"everything in it is ignored, e.g. {NAME}"
    if where == "reason":
        mask = Mask("/p/d", True, IGNORED, text)
    else:  # shown under the mask, as its note
        mask = Mask("/p/d", True, IGNORED, "ignored", origin="/p/d/e", how=How.WIDENED, detail=text)
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=400, color_system=None)
    for line in report._mask_lines(Policy(root="/p", in_git=True), [mask]):
        console.print(line)
    assert "e.g." in out.getvalue(), out.getvalue()
    _clean(out.getvalue())
