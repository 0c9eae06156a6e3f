"""The bench's parts that need no sandbox (bench/): the fixtures are the size its docstring says, the Markdown's
tables are well formed, and --write-docs replaces only what is between its marker lines."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# bench/bench.py runs as a script, its modules import each other by their bare names
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import fixtures  # noqa: E402
import report  # noqa: E402
import runs  # noqa: E402

# --- fixtures --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("name", "files", "tracked"), [("small", 100, 88), ("100k", 102_012, 2_000)])
def test_a_fixture_has_the_files_the_docstring_says(name, files, tracked):
    [fx] = [f for f in fixtures.FIXTURES if f.name == name]
    made = list(fx.files())
    assert len(made) == files
    assert sum(is_tracked for _, _, is_tracked in made) == tracked
    assert len({rel for rel, _, _ in made}) == files  # no path written twice
    assert made[0][0] == ".gitignore"  # ignore rules come first


# --- the Markdown ----------------------------------------------------------------------------------------------


def _row(variant: str, **kw) -> runs.Row:
    [fx] = [f for f in fixtures.FIXTURES if f.name == "small"]
    return runs.Row(fx, {"files": 100, "tracked": 88}, variant, **kw)


def _tables(markdown: str) -> list[list[str]]:
    tables: list[list[str]] = []
    previous = ""
    for line in markdown.splitlines():
        if line.startswith("|"):
            if not previous.startswith("|"):
                tables.append([])
            tables[-1].append(line)
        previous = line
    return tables


def test_every_row_of_every_table_has_as_many_cells_as_its_header():
    measured = _row(
        "default",
        hidden=2,
        dry=[180.0, 190.0],
        sandbox=[110.0, 120.0],
        bare=[30.0, 40.0],
        bw_hidden=2,
        bw_sandbox=[130.0, 140.0],
        bw_bare=[20.0, 25.0],
        inner={"import": 25.0, "find_repo": 3.0, "scan": 7.0, "scan git": 6.5, "scan self": 7.0, "collect self": 0.4,
               "policy build": 1.5, "prepare": 20.0, "top": 12.0, "fork": 1.0, "masks": 2, "git calls": "rev-parse ×1"},
    )  # fmt: skip
    failed = _row("nodeps", hidden=3, error="`ai-sandbox -- true …` exited 1: refused")
    bw_failed = _row("tracked", hidden=3, dry=[1.0], sandbox=[1.0], bare=[1.0], bw_hidden=3, bw_error="no bwrap")
    gits = {"small": {**dict.fromkeys([*runs.GIT_CALLS, runs.SCAN, runs.OLD_STATUS_NAME], 2.0), "ignored entries": 5}}
    imp = {"total_us": 32_100, "top": [("enum", 1_250, 4_340)], "modules": 72, "wall_pass": 12.0,
           "wall_import": 56.0, "wall_version": 40.0, "uncached_us": 78_900}  # fmt: skip
    markdown = report.launches([measured, failed, bw_failed], gits, imp, [("ai-sandbox", "abc1234")], "Medians.", [])
    markdown += report.findings([("history walk", "100,000 commits", 7_142.4)])

    tables = _tables(markdown)
    assert [len(t) for t in tables] == [2 + 3, 2 + 1, 2 + 1, 2 + 1, 2 + 1]  # launches, git, inside, imports, findings
    for table in tables:
        assert {line.count("|") for line in table} == {table[0].count("|")}, table
    assert "| small repo | `allow_dependencies = false` | 100 | 3 | – | **fails** | – |" in markdown
    assert "exited 1: refused" in markdown.split("### Where the launch time goes")[0]  # verbatim under the table
    assert "| history walk | 100,000 commits | 7,142 ms |" in markdown
    assert markdown.startswith("## Launch benchmark\n") and markdown.endswith("|\n")


def test_a_time_is_shown_to_a_tenth_below_10_ms_and_a_missing_one_as_a_dash():
    assert [report.ms(x) for x in (0.94, 9.5, 10.4, 7_142.4, float("nan"))] == [
        "0.9 ms", "9.5 ms", "10 ms", "7,142 ms", "–",
    ]  # fmt: skip


# --- --write-docs ----------------------------------------------------------------------------------------------

DOC = "# Performance\n\nIntro.\n\n<!-- bench:begin -->\nan older run\n<!-- bench:end -->\n\nAfter.\n"


def test_the_markdown_replaces_what_is_between_the_marker_lines_and_nothing_else(tmp_path):
    doc = tmp_path / "performance.md"
    doc.write_text(DOC)
    report.write_docs(str(doc), "## Launch benchmark\n\n| a |\n| --- |\n| 1 |\n")
    expected = (
        "# Performance\n\nIntro.\n\n<!-- bench:begin -->\n"
        "## Launch benchmark\n\n| a |\n| --- |\n| 1 |\n\n"  # a blank line ends the table before the marker
        "<!-- bench:end -->\n\nAfter.\n"
    )
    assert doc.read_text() == expected
    report.write_docs(str(doc), "## Launch benchmark\n\n| a |\n| --- |\n| 1 |\n")
    assert doc.read_text() == expected  # a second run replaces the first


@pytest.mark.parametrize(
    "text",
    [
        "# Performance\n\nno markers\n",
        "<!-- bench:begin -->\nonly the first\n",
        "<!-- bench:end -->\nin the wrong order\n<!-- bench:begin -->\n",
        "inline <!-- bench:begin --> and <!-- bench:end --> are not lines\n",
    ],
)
def test_a_doc_without_the_marker_lines_is_a_one_line_error_and_left_as_it_was(tmp_path, text):
    doc = tmp_path / "performance.md"
    doc.write_text(text)
    for call in (lambda: report.check_docs(str(doc)), lambda: report.write_docs(str(doc), "## x\n")):
        with pytest.raises(SystemExit) as e:
            call()
        message = str(e.value.code)
        assert message.startswith(f"bench: --write-docs {doc}: no line <!-- bench:begin -->") and "\n" not in message
    assert doc.read_text() == text


def test_a_missing_doc_is_a_one_line_error(tmp_path):
    with pytest.raises(SystemExit) as e:
        report.check_docs(str(tmp_path / "nowhere.md"))
    assert str(e.value.code) == f"bench: --write-docs {tmp_path / 'nowhere.md'}: No such file or directory"


def test_every_variant_has_its_config_and_its_name_in_the_table():
    """A variant without its row label failed the whole bench after measuring (network-on did)."""
    assert set(runs.VARIANTS) == set(report.CONFIG_SHOWN) == set(report.CONFIG_SHORT)
    assert set(runs.CONFIG_TEXT) == set(runs.VARIANTS) - {"default"}
