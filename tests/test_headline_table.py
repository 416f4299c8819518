"""`models.tools.headline_table`: one Markdown row per document, whatever its text."""

from models.tools.headline_table import table


def test_rows_keep_angle_brackets_pipes_and_any_script_visible():
    lines = table(
        sources=["Zürich « café » | 東京 😀 " + "x" * 200],
        headlines=["Café in Zürich"],
        normalized=["caf <unk> zurich"],
        references=["a & b"],
        source_chars=20,
    )
    assert lines[:2] == [
        "| # | source | headline | normalized tokens | reference |",
        "|---|---|---|---|---|",
    ]
    assert lines[2] == (
        "| 1 | Zürich « café » \\| 東… | Café in Zürich | caf &lt;unk&gt; zurich"
        " | a &amp; b |"
    )
    assert len(lines) == 3
