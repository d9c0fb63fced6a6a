"""The HTML page around the charts: one self-contained document, its style inline, no script.

The status page and the offline report share this frame so that they look alike and escape alike:
:func:`html_table` escapes every cell, since cells hold document ids and texts (user data).

Example:
    >>> page = html_page("Report", html_table(["id"], [["<script>"]]))
    >>> "&lt;script&gt;" in page and "<script>" not in page
    True
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from html import escape

from stream_dedup.text.shown import printable

_STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 1400px; }
h1 { font-size: 1.4em; margin: 0 0 0.2em 0; } h2 { font-size: 1.1em; margin: 1.4em 0 0.4em 0; }
.subtitle { color: #555; margin-bottom: 1em; }
.figures { display: flex; flex-wrap: wrap; gap: 0.8em; margin: 0; }
.figures div { border: 1px solid #ddd; border-radius: 6px; padding: 0.5em 0.9em; min-width: 9em; }
.figures dt { color: #555; font-size: 0.85em; } .figures dd { margin: 0.1em 0 0 0; font-size: 1.4em; }
.charts { display: flex; flex-wrap: wrap; gap: 1em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border-bottom: 1px solid #e5e5e5; padding: 0.25em 0.7em; text-align: left; vertical-align: top; }
td.number, th.number { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.text { min-width: 7em; max-width: 30em; overflow-wrap: anywhere; }
td.prose { min-width: 20em; max-width: 50em; overflow-wrap: break-word; }
.role { display: inline-block; padding: 0.1em 0.6em; border-radius: 4px; color: #fff; background: #777; }
.role-active { background: #1a7f37; } .role-standby { background: #0072b2; } .role-restoring { background: #b58100; }
.note { color: #666; font-size: 0.9em; }
"""


def html_page(title: str, body: str, refresh_seconds: int | None = None) -> str:
    """A whole HTML document: ``title`` (escaped here) and ``body`` (markup, escaped by its maker)."""
    refresh = f'<meta http-equiv="refresh" content="{refresh_seconds}">' if refresh_seconds else ""
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">{refresh}'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>{body}</body></html>"
    )


@dataclass(frozen=True)
class Figure:
    """One headline number: its label, how it is shown, and its raw value (``None``: not known yet).

    The raw value goes in a ``data-value`` attribute and ``key`` in the ``id``, so that a test
    or a script can read the number without parsing the shown text ("1,234", "12.5 %").
    """

    key: str
    label: str
    shown: str
    value: float | None = None


def html_figures(figures: Sequence[Figure]) -> str:
    """The headline numbers as a row of boxes."""
    boxes = []
    for figure in figures:
        value = "" if figure.value is None else f' data-value="{figure.value!r}"'
        shown = f'<dd id="{escape(figure.key)}"{value}>{escape(figure.shown)}</dd>'
        boxes.append(f"<div><dt>{escape(figure.label)}</dt>{shown}</div>")
    return f'<dl class="figures">{"".join(boxes)}</dl>'


def html_table(
    headers: Sequence[str],
    rows: Iterable[Sequence[object]],
    numeric: Sequence[int] = (),
    table_id: str = "",
    prose: Sequence[int] = (),
) -> str:
    """A table of ``rows``, every cell escaped (see :func:`shown`).

    The columns whose indexes are in ``numeric`` align right and do not wrap;
    those in ``prose`` (long texts) wrap at words and take the width left by
    the others (ids, short texts), which wrap only when longer than 30 em.
    """

    def cell(tag: str, column: int, value: object) -> str:
        kind = "number" if column in numeric else "prose" if column in prose else "text"
        return f'<{tag} class="{kind}">{escape(shown(str(value)))}</{tag}>'

    head = "".join(cell("th", i, h) for i, h in enumerate(headers))
    body = "".join("<tr>" + "".join(cell("td", i, v) for i, v in enumerate(row)) + "</tr>" for row in rows)
    identity = f' id="{escape(table_id)}"' if table_id else ""
    return f"<table{identity}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def shown(text: str) -> str:
    """``text`` as a cell shows it: runs of whitespace one space, as HTML renders them, and controls as escapes.

    Controls are not allowed in HTML, and a right-to-left override in an id
    or a text would reorder what follows it on the page
    (:func:`~stream_dedup.text.shown.printable`).
    """
    return printable(" ".join(text.split()))
