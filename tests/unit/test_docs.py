"""The documentation: its generated parts are current, its links lead somewhere, and it names every option.

The generated parts (the config reference, the notices table, sample outputs of real runs on a demo project)
are made by scripts/docs.py, which `make docs` runs; here it only compares (a few seconds: the demo runs
ai-sandbox about ten times). Samples that need the real sandbox are checked in
tests/integration/test_docs_samples.py.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ai_sandbox.options import OPTIONS, SUBCOMMANDS

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
USAGE = ROOT / "docs" / "usage.md"


def _docs_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ai_sandbox_docs_script", ROOT / "scripts" / "docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_generated_parts_are_the_generated_ones():
    stale = _docs_script().stale()
    assert not stale, "generated parts differ from what `make docs` writes (run it):\n  " + "\n  ".join(stale)


def test_render_replaces_only_between_markers():
    docs = _docs_script()
    text = "a\n<!-- x:start: note -->\nold\n<!-- x:end -->\nb <!-- y:start --> kept\n"
    assert (
        docs.render(text, lambda name: f"new {name}")
        == "a\n<!-- x:start: note -->\n\nnew x\n\n<!-- x:end -->\nb <!-- y:start --> kept\n"
    )
    assert docs.parts(text) == [("x", "old")]


def test_realign_pads_columns_as_rendered():
    docs = _docs_script()
    shortened = "   a  bb\n·  x  /p\n✓  y  /long/path\nprose line\n"
    assert docs.realign(shortened) == "   a  bb\n·  x  /p\n✓  y  /long/path\nprose line\n"
    assert docs.realign("h  c  d\nx  /p  e\n") == "h  c   d\nx  /p  e\n"


# --- links -------------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^ *```.*?^ *```", re.S | re.M)
_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"\[(?P<text>[^\]\n]*)\]\((?P<target>[^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lowercased, punctuation dropped (not `-` or `_`), spaces to `-`."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "").strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading's anchor in path; repeats get -1, -2… as on GitHub."""
    seen: dict[str, int] = {}
    out = set()
    for line in _FENCE.sub("", path.read_text(encoding="utf-8")).splitlines():
        if m := re.match(r"#{1,6} +(.*?) *#*$", line):
            base = slug(m[1])
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(path: Path) -> list[str]:
    text = _CODE.sub("", _FENCE.sub("", path.read_text(encoding="utf-8")))
    return [m["target"] for m in _LINK.finditer(text)]


def test_slugs_follow_githubs_rules():
    assert slug("How `auto` chooses") == "how-auto-chooses"
    assert slug("The docker backend (macOS; Linux on request)") == "the-docker-backend-macos-linux-on-request"
    assert slug("Escape attempts, tested (`tests/security/`)") == "escape-attempts-tested-testssecurity"
    assert slug("`ai-sandbox explain [PATH]... [--json]`") == "ai-sandbox-explain-path---json"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_and_anchors_resolve(page):
    broken = []
    for target in links(page):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            broken.append(f"{target}: no {dest.relative_to(ROOT) if dest.is_relative_to(ROOT) else dest}")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            broken.append(f"{target}: no heading with the anchor #{anchor} in {dest.relative_to(ROOT)}")
    assert not broken, f"{page.relative_to(ROOT)}: " + "; ".join(broken)


def test_the_docs_pages_are_all_in_the_index():
    index = (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    for page in (ROOT / "docs").glob("*.md"):
        assert page.name == "README.md" or f"]({page.name})" in index, f"docs/README.md does not list {page.name}"


# --- the command line --------------------------------------------------------------------------------------


def test_every_option_is_documented():
    """usage.md's options are hand-written (they say more than --help); each of OPTIONS must be there, with its
    values as the parser takes them, and the table names no option the parser lacks."""
    text = USAGE.read_text(encoding="utf-8")
    names = {n for o in OPTIONS for n in o.names}
    for o in OPTIONS:
        for name in o.names:
            assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), f"usage.md does not mention {name}"
        if o.metavar:
            shown = f"`{o.name} {o.metavar}`".replace("|", "\\|")
            assert shown in text, f"usage.md's options table should show {shown}"
    table = text[text.index("| option | meaning |") :].split("\n\n")[0]
    for row in table.splitlines()[2:]:
        for name in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", row.split(" | ")[0]):
            assert name in names, f"usage.md documents {name}, which is not in options.OPTIONS"


def test_every_command_has_its_section():
    headings = [ln for ln in USAGE.read_text(encoding="utf-8").splitlines() if ln.startswith("### `ai-sandbox ")]
    for command in SUBCOMMANDS:
        assert any(h.startswith(f"### `ai-sandbox {command}") for h in headings), f"usage.md has no {command}"


def test_the_bench_tables_keep_their_markers():
    """`make bench BENCH_ARGS="--write-docs docs/performance.md"` writes its Markdown between these lines."""
    lines = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8").splitlines()
    assert lines.count("<!-- bench:begin -->") == lines.count("<!-- bench:end -->") == 1
    assert lines.index("<!-- bench:begin -->") < lines.index("<!-- bench:end -->")


def test_make_docs_writes_nothing_in_the_callers_home(tmp_path):
    """`make docs` reads the shipped profiles in-process, whose parse ai-sandbox caches in its state directory:
    the caller's (~/.local/state/ai-sandbox/parsed) until the script used a scratch one."""
    import os
    import subprocess

    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env["HOME"] = str(home)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docs.py"), "--check"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.relative_to(home).as_posix() for p in home.rglob("*")) == []
