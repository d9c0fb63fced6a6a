"""The HTML frame: one self-contained document, every cell and figure escaped."""

import re
from html.parser import HTMLParser

from hypothesis import given
from hypothesis import strategies as st

from stream_dedup.charts import Figure, html_figures, html_page, html_table

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'


class Elements(HTMLParser):
    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(page)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_a_page_has_no_script_and_no_external_asset_and_refreshes_when_asked() -> None:
    page = html_page("status", "<p>body</p>", refresh_seconds=5)

    elements = Elements(page)
    tags = [tag for tag, _ in elements.tags]
    assert "script" not in tags and "link" not in tags
    assert ("meta", {"http-equiv": "refresh", "content": "5"}) in elements.tags
    assert "http-equiv" not in html_page("report", "")


def test_table_cells_and_figures_are_escaped() -> None:
    page = html_page(
        HOSTILE,
        html_table(["id", "n"], [[HOSTILE, 3]], numeric=[1])
        + html_figures([Figure("documents", HOSTILE, HOSTILE, 12.0)]),
    )

    elements = Elements(page)
    assert not [tag for tag, _ in elements.tags if tag in ("script", "img")]
    assert "".join(elements.text).count(HOSTILE) == 4  # title, cell, figure label, figure text


def test_cells_show_controls_and_bidi_overrides_as_escapes_and_keep_every_script() -> None:
    text = "price\x00 100\u202e\tEUR\n\x1b[2J \u05e9\u05dc\u05d5\u05dd \u6771\u4eac"

    cell = "".join(Elements(html_table(["text"], [[text]])).text[1:])

    assert cell == "price\\x00 100\\u202e EUR \\x1b[2J \u05e9\u05dc\u05d5\u05dd \u6771\u4eac"


#: What HTML forbids in text (controls but whitespace), lone surrogates, and what reorders the text after it.
_NOT_IN_A_CELL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")


@given(st.text())
def test_any_cell_text_can_be_written_and_holds_no_control_or_override(text: str) -> None:
    table = html_table(["text"], [[text]])

    table.encode("utf-8")
    assert not _NOT_IN_A_CELL.search(table)


def test_a_figure_carries_its_raw_value_and_key() -> None:
    elements = Elements(html_figures([Figure("lag", "consumer lag", "1,234 records", 1234), Figure("age", "a", "-")]))

    assert ("dd", {"id": "lag", "data-value": "1234"}) in elements.tags
    assert ("dd", {"id": "age"}) in elements.tags
