"""Every kind of notice is described for people; docs/notices.md's table is rendered from the descriptions."""

from __future__ import annotations

from ai_sandbox import notices
from ai_sandbox.policy import LOUD, Kind


def test_every_kind_has_a_description():
    assert set(notices.DESCRIPTION) == set(Kind), "add a sentence for each new Kind to notices.DESCRIPTION"
    for kind, text in notices.DESCRIPTION.items():
        assert text.strip() and "|" not in text and "\n" not in text, kind  # one Markdown table cell


def test_the_table_has_a_row_per_kind_saying_whether_the_launch_prints_it():
    rows = notices.table().splitlines()[2:]
    assert [row.split(" | ")[0] for row in rows] == [f"| `{kind}`" for kind in Kind]
    for kind, row in zip(Kind, rows, strict=True):
        assert row.split(" | ")[1] == ("yes" if kind in LOUD else "no")
        assert row.endswith(f" | {notices.DESCRIPTION[kind]} |")
