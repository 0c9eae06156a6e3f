"""The legacy bash file: parsed like bash would read the arrays, never executed."""

from __future__ import annotations

import pytest

from ai_sandbox.errors import ConfigError
from ai_sandbox.legacy import parse


def test_arrays_with_quotes_comments_and_lines():
    text = """# old config
AI_SANDBOX_BLOCK_PATHS=(
  config/prod.yml   # the prod one
  "my file.txt" 'single $quoted'
  esc\\ aped
)
AI_SANDBOX_ALLOW_PATHS=(build/public/)
AI_SANDBOX_BLOCK_PATHS+=(more)
"""
    cfg = parse(text, ".ai-sandbox")
    assert [p for p, _ in cfg.block] == ["config/prod.yml", "my file.txt", "single $quoted", "esc aped", "more"]
    assert cfg.block[0][1] == 3 and cfg.block[-1][1] == 8
    assert cfg.allow == [("build/public/", 7)]


def test_home_is_the_one_expansion(monkeypatch):
    monkeypatch.setenv("HOME", "/home/u")
    cfg = parse('AI_SANDBOX_BLOCK_PATHS=("$HOME/.aws" ${HOME}/x "$HOME")\n', ".ai-sandbox")
    assert [p for p, _ in cfg.block] == ["/home/u/.aws", "/home/u/x", "/home/u"]


@pytest.mark.parametrize(
    "text, line",
    [
        ("AI_SANDBOX_BLOCK_PATHS=($(rm -rf ~))\n", 1),
        ("\nAI_SANDBOX_BLOCK_PATHS=(`id`)\n", 2),
        ('AI_SANDBOX_BLOCK_PATHS=("$HOMEX/x")\n', 1),
        ("AI_SANDBOX_BLOCK_PATHS=($USER)\n", 1),
        ("AI_SANDBOX_BLOCK_PATHS=(${X})\n", 1),
        ("cat <<EOF\nx\nEOF\n", 1),
        ("rm -rf /\n", 1),
        ('AI_SANDBOX_BLOCK_PATHS=("unbalanced)\n', 1),
        ("AI_SANDBOX_BLOCK_PATHS=(a b\n", 1),
        ("AI_SANDBOX_BLOCK_PATHS=(a); touch x\n", 1),
        ("OTHER=(a)\n", 1),
    ],
)
def test_anything_a_shell_would_expand_or_run_is_refused_with_its_line(text, line):
    with pytest.raises(ConfigError) as exc:
        parse(text, "/repo/.ai-sandbox")
    assert exc.value.message.startswith(f"/repo/.ai-sandbox:{line}:")
