"""The sample outputs in docs/ that only the real sandbox produces, compared with a real run.

`make docs` regenerates the samples of the commands that start no sandbox (tests/unit/test_docs.py checks
them); these need one: doctor (it starts a sandbox of each backend), a launch's own lines, a refused launch
and accept, the line after a session. Each runs the installed ai-sandbox in scripts/docs.py's demo project,
paths normalized as there (/home/me/code/shop), and fails with the real output to paste when they differ.
Versions and counts of this machine (`firejail version 0.9.72`, `max 96365`) are compared as `N`.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import AIS, IS_ROOT, require, unavailable

pytestmark = pytest.mark.sandbox

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _docs_script() -> ModuleType:
    path = DOCS.parent / "scripts" / "docs.py"
    spec = importlib.util.spec_from_file_location("ai_sandbox_docs_script", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def demo(tmp_world, firejail):
    """scripts/docs.py's demo project, reviewed (its .ai-sandbox.toml written), run with the real ai-sandbox."""
    d = _docs_script().Demo(str(tmp_world), command=[AIS])
    d.reviewed()
    return d


def sample(page: str, first: str) -> list[str]:
    """The lines of the fenced block in docs/PAGE whose first line starts with `first` (indentation removed)."""
    text = (DOCS / page).read_text(encoding="utf-8")
    for m in re.finditer(r"^( *)```\n(.*?)\n\1```$", text, re.S | re.M):
        lines = [ln[len(m[1]) :] for ln in m[2].splitlines()]
        if lines[0].startswith(first):
            return lines
    raise AssertionError(f"docs/{page} has no sample starting with {first!r}")


def versionless(lines: list[str]) -> list[str]:
    return [re.sub(r"\bmax \d+", "max N", re.sub(r"\d+(\.\d+)+", "N", ln)) for ln in lines]


def same(page: str, want: list[str], real: str) -> None:
    got = real.rstrip("\n").splitlines()
    assert versionless(got) == versionless(want), f"docs/{page}'s sample is not what a real run prints; it is:\n{real}"


def test_the_doctor_sample_is_a_real_run(demo):
    require("bwrap")
    require("git-crypt")
    want = sample("usage.md", "$ ai-sandbox doctor")
    same("usage.md", want[1:], demo.run("doctor"))


def test_the_launch_lines_sample_is_a_real_launch(demo):
    """The two lines a launch prints from what explain --history and --secrets found before it."""
    demo.run("explain", "--history")
    demo.run("explain", "--secrets")
    same("notices.md", sample("notices.md", "ai-sandbox: warning:"), demo.run("--", "true"))


def test_the_accept_sample_is_a_real_refusal_and_accept(demo):
    """A rule changed between launches (.env no longer ignored): the launch refuses until accept."""
    want = sample("usage.md", "$ ai-sandbox -- true")
    demo.run("--", "true")
    demo.write(".gitignore", _docs_script().GITIGNORE.replace(".env\n", ""))
    refused = demo.run("--", "true", status=65)
    accepted = demo.run("accept")
    same("usage.md", want, f"$ ai-sandbox -- true\n{refused}$ ai-sandbox accept\n{accepted}")


def test_the_line_after_a_session_that_checked_out_into_a_hidden_directory_is_real(demo):
    """main ignores secrets/, branch feat tracks secrets/README.md; the session checks feat out. The session's
    scratch directory needs root under firejail, or bwrap for a user."""
    backend = [] if IS_ROOT else ["--backend", "bwrap"]
    if backend:
        require("bwrap")
    demo.write(".gitignore", _docs_script().GITIGNORE + "secrets/\n")
    demo.git("commit", "-qam", "ignore secrets/")
    demo.git("checkout", "-qb", "feat")
    demo.write("secrets/README.md", "how to get the keys\n")
    demo.git("add", "-f", "secrets/README.md")
    demo.git("commit", "-qm", "document the keys")
    demo.git("checkout", "-q", "main")
    demo.write("secrets/key.txt", "KEY\n")
    real = demo.run(*backend, "--", "git", "checkout", "-q", "feat")
    lines = [ln for ln in real.splitlines() if "which the sandbox kept from your disk" in ln]
    if not lines and not IS_ROOT:
        unavailable(f"the session's git could not check out into a scratch directory here: {real}")
    same("inside.md", sample("inside.md", "ai-sandbox: git checked out"), "\n".join(lines))
