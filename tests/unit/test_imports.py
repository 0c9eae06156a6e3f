"""The package's import graph: no circle, no import that climbs the tiers CONTRIBUTING.md draws, and nothing
heavy on the launch path.

Every import statement counts, wherever it is: at the top, inside a function (a lazy import that only hides a
circle still is one) and under TYPE_CHECKING. The graph is read from the sources with `ast`, so the test
needs nothing installed and a new module is covered the day it is written.
"""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

from tests.conftest import PY

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = "ai_sandbox"
CONTRIBUTING = SRC.parent / "CONTRIBUTING.md"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def graph(runtime_only: bool = False) -> dict[str, set[str]]:
    """module -> the package's modules it imports (`from a import b` counts b when b is a module, a otherwise).
    runtime_only: leave out what is imported under `if TYPE_CHECKING:` (never at run time)."""
    mods = _modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = {
            id(n)
            for block in ast.walk(tree)
            if isinstance(block, ast.If) and isinstance(block.test, ast.Name) and block.test.id == "TYPE_CHECKING"
            for stmt in block.body
            for n in ast.walk(stmt)
        }
        for node in ast.walk(tree):
            if runtime_only and id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[: len(parts) - node.level + 1] + ([node.module] if node.module else []))
                # `from pkg import mod` imports the module; `from pkg import name`, what pkg itself holds
                subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in mods]
                targets = subs if len(subs) == len(node.names) else [base, *subs]
            else:
                continue
            edges[name] |= {t for t in targets if t in mods and t != name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def tiers() -> dict[str, int]:
    """CONTRIBUTING.md's tiers, bottom first: the block between the `tiers` markers, one tier a line,
    `name: module module…` (a module named `pkg.*` stands for the package and all its modules)."""
    text = CONTRIBUTING.read_text(encoding="utf-8")
    block = re.search(r"<!-- tiers -->\n```\n(.*?)```\n<!-- /tiers -->", text, re.S)
    assert block, "CONTRIBUTING.md lost its block of tiers (between <!-- tiers --> and <!-- /tiers -->)"
    out = {}
    for level, line in enumerate(block.group(1).strip().splitlines()):
        for word in line.partition(":")[2].split():
            out[word] = level
    return out


def tier_of(module: str, table: dict[str, int]) -> int | None:
    short = module.removeprefix(PACKAGE + ".")
    parts = short.split(".")
    for i in range(len(parts), 0, -1):
        head = ".".join(parts[:i])
        if head in table and i == len(parts):
            return table[head]
        if f"{head}.*" in table:
            return table[f"{head}.*"]
    return None


def test_no_import_circle():
    found = cycles(graph())
    assert not found, "import circles (each a set of modules importing each other): " + "; ".join(
        " <-> ".join(c) for c in found
    )


def test_every_module_has_a_tier_and_imports_none_above_it():
    table = tiers()
    edges = graph()
    missing = sorted(m for m in edges if m != PACKAGE and tier_of(m, table) is None)
    assert not missing, f"modules in no tier of CONTRIBUTING.md: {missing}"
    climbing = sorted(
        f"{m} (tier {tier_of(m, table)}) imports {t} (tier {tier_of(t, table)})"
        for m, targets in edges.items()
        for t in targets
        if m != PACKAGE and t != PACKAGE and (tier_of(t, table) or 0) > (tier_of(m, table) or 0)
    )
    assert not climbing, "imports that climb the tiers: " + "; ".join(climbing)


def test_the_launch_check_imports_nothing_of_ours():
    """verify.py runs inside the sandbox as `python -I -S verify.py`: the standard library only."""
    assert graph()[f"{PACKAGE}.verify"] == set()


def launch_path() -> list[str]:
    """Every module a launch may import: what `main` and `launch` reach, lazily or not, except the commands'
    own (reached through `main`'s hand-over to the typer app and `launch`'s dry run). Imports under
    TYPE_CHECKING never run, so they are not followed."""
    edges = graph(runtime_only=True)
    commands = {
        f"{PACKAGE}.{m}" for m in ("cli", "report", "doctor", "explain", "template", "aliases", "notices", "dryrun")
    }
    seen: set[str] = set()
    todo = [f"{PACKAGE}.main", f"{PACKAGE}.launch"]
    while todo:
        m = todo.pop()
        if m in seen or m in commands:
            continue
        seen.add(m)
        todo += edges.get(m, ())
    return sorted(seen)


# Not on the launch path: typer, click and rich (~90 ms, people's output only), pathspec (30-50 ms, only for
# patterns the fast matcher cannot take), GitPython, and the standard library's dataclasses (~20 ms with
# inspect: records.py stands in) and typing (~4 ms: annotations are strings, Protocols for readers only).
OFF_THE_LAUNCH_PATH = ("typer", "click", "rich", "pathspec", "git", "dataclasses", "inspect", "typing")


def test_launch_path_does_not_import_typer_rich_pathspec_dataclasses_or_typing():
    """Every module the launch path can reach (read from the import graph, not a list kept by hand), imported
    together: none of them pulls in what only the commands need."""
    mods = launch_path()
    assert len(mods) > 20 and f"{PACKAGE}.watch" in mods and f"{PACKAGE}.backends.bwrap" in mods
    code = "import sys\n" + "".join(f"import {m}\n" for m in mods)
    code += f"print(sorted(m for m in {OFF_THE_LAUNCH_PATH!r} if m in sys.modules))"
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_graph_reader_sees_every_kind_of_import(tmp_path):
    """The reader itself: top-level, relative, inside a function and under TYPE_CHECKING all count."""
    edges = graph()
    assert f"{PACKAGE}.errors" in edges[f"{PACKAGE}.config"]  # top level
    lazy = {m for m, ts in edges.items() for t in ts if t == f"{PACKAGE}.watch"}
    assert f"{PACKAGE}.launch" in lazy  # launch imports watch inside a function
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    typed = graph()[f"{PACKAGE}.launch"] - graph(runtime_only=True)[f"{PACKAGE}.launch"]
    assert f"{PACKAGE}.backends.protocol" in typed  # under TYPE_CHECKING: a circle counts it, the launch does not
