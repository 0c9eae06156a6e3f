"""The documentation: its generated parts are current.

The generated parts (the config reference, the notices table, sample outputs of real runs on a demo project)
are made by scripts/docs.py, which `make docs` runs; here it only compares (a few seconds: the demo runs
ai-sandbox about ten times). Samples that need the real sandbox are checked in
tests/integration/test_docs_samples.py.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


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
