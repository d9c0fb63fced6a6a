"""Pictures without a plotting library: inline SVG charts and the HTML page frame around them.

Used by the worker's status page (:mod:`stream_dedup.ops.status_page`), ``stream-dedup params
--plot`` and ``stream-dedup dedup --report``. It imports nothing of the project, so any layer
may draw with it; it needs no JavaScript and no external asset, so a page works offline and
behind any firewall.
"""

from stream_dedup.charts.page import Figure, html_figures, html_page, html_table
from stream_dedup.charts.svg import Axis, Bar, Mark, Series, bar_chart, line_chart

__all__ = [
    "Axis",
    "Bar",
    "Figure",
    "Mark",
    "Series",
    "bar_chart",
    "html_figures",
    "html_page",
    "html_table",
    "line_chart",
]
