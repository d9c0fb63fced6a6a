"""The HTML frame: one self-contained document, every cell and figure escaped."""

from html.parser import HTMLParser

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


def test_a_figure_carries_its_raw_value_and_key() -> None:
    elements = Elements(html_figures([Figure("lag", "consumer lag", "1,234 records", 1234), Figure("age", "a", "-")]))

    assert ("dd", {"id": "lag", "data-value": "1234"}) in elements.tags
    assert ("dd", {"id": "age"}) in elements.tags
