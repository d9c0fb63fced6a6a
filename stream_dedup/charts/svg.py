"""Line charts and bar charts, drawn as SVG text.

A chart is a string holding one ``<svg>`` element, with its namespace, so the same string can be
written to a ``.svg`` file or put inline in an HTML page. Every text drawn (title, axis labels,
legend entries, bar labels) is escaped: labels can hold user data, such as a file name.

A chart with no points says so (``empty``) instead of drawing bare axes, which would read as zero.

Example:
    >>> curve = Series("P(candidate)", [(0.0, 0.0), (0.5, 0.2), (1.0, 1.0)])
    >>> svg = line_chart([curve], Axis("Jaccard", 0, 1), Axis("probability", 0, 1), title="S-curve")
    >>> svg.startswith("<svg") and "S-curve" in svg
    True
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Literal

#: Colours of the series, in order; colour-blind safe (Okabe and Ito).
_PALETTE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#e69f00", "#56b4e9")
_LEFT, _RIGHT, _BOTTOM = 64, 16, 44
#: Height of the title line, and of each legend line under it.
_TITLE, _LINE = 28, 16
_TICKS = 5


@dataclass(frozen=True)
class Axis:
    """One axis: its label, its range, and how its tick labels are formatted (a format spec)."""

    label: str
    low: float
    high: float
    tick_format: str = "g"


@dataclass(frozen=True)
class Series:
    """Points ``(x, y)`` drawn as a line (of one point: a dot), as dots, or both; the label goes in the legend."""

    label: str
    points: Sequence[tuple[float, float]]
    style: Literal["line", "dots", "line+dots"] = "line"


@dataclass(frozen=True)
class Mark:
    """A labelled vertical line at ``x`` (a threshold)."""

    x: float
    label: str


@dataclass(frozen=True)
class Bar:
    """One bar of a bar chart: its label under the axis and its value (written above the bar)."""

    label: str
    value: float


@dataclass(frozen=True)
class _Frame:
    """The plot area inside the margins, and the mapping of data to pixels."""

    width: int
    height: int
    x: Axis
    y: Axis
    #: Pixels above the plot area: the title, and one legend line per series.
    top: float

    @property
    def right(self) -> float:
        return float(self.width - _RIGHT)

    @property
    def bottom(self) -> float:
        return float(self.height - _BOTTOM)

    def px(self, value: float) -> float:
        span = (self.x.high - self.x.low) or 1.0
        return _LEFT + (value - self.x.low) / span * (self.right - _LEFT)

    def py(self, value: float) -> float:
        span = (self.y.high - self.y.low) or 1.0
        clipped = min(max(value, self.y.low), self.y.high)
        return self.bottom - (clipped - self.y.low) / span * (self.bottom - self.top)


def line_chart(
    series: Sequence[Series],
    x: Axis,
    y: Axis,
    *,
    title: str,
    marks: Sequence[Mark] = (),
    width: int = 640,
    height: int = 300,
    empty: str = "no data yet",
) -> str:
    """A chart of ``series`` over the ranges of ``x`` and ``y`` (points outside ``y`` are drawn at its edge)."""
    frame = _Frame(width, height, x, y, top=_TITLE + _LINE * len(series) + 8)
    parts = [*_frame_parts(frame, title), *_x_ticks(frame)]
    for mark in marks:
        left = frame.px(mark.x)
        # In the right half the label goes left of its line, so that it is not cut at the edge.
        beside = f'x="{left - 4:.1f}" text-anchor="end"' if left > (_LEFT + frame.right) / 2 else f'x="{left + 4:.1f}"'
        parts.append(
            f'<line class="mark" x1="{left:.1f}" y1="{frame.top:.1f}" x2="{left:.1f}" y2="{frame.bottom:.1f}" '
            'stroke="#555" stroke-dasharray="4 3"/>'
            f'<text {beside} y="{frame.bottom - 6:.1f}" fill="#555">{escape(mark.label)}</text>'
        )
    if not any(s.points for s in series):
        parts.append(_empty_note(frame, empty))
    for index, each in enumerate(series):
        colour = _PALETTE[index % len(_PALETTE)]
        parts.append(_legend_entry(index, each, colour))
        parts.append(_series_shapes(frame, each, colour))
    return _svg(width, height, title, parts)


def bar_chart(
    bars: Sequence[Bar],
    *,
    title: str,
    x_label: str,
    y_label: str,
    width: int = 640,
    height: int = 300,
    empty: str = "no data yet",
) -> str:
    """Bars of equal width from zero, each value written above its bar (a histogram when labels are bins).

    With no bar above zero the chart says ``empty``: a flat histogram reads as data.
    """
    top = max((b.value for b in bars), default=0.0)
    x, y = Axis(x_label, 0, max(len(bars), 1)), Axis(y_label, 0, _nice_ceiling(top))
    frame = _Frame(width, height, x, y, top=_TITLE + _LINE)  # room for the value above the highest bar
    parts = _frame_parts(frame, title)
    if not any(b.value for b in bars):
        parts.append(_empty_note(frame, empty))
    # Every label would overlap on narrow bars: then only every few are written.
    label_every = max(1, math.ceil(len(bars) * 40 / (frame.right - _LEFT)))
    slot = (frame.right - _LEFT) / max(len(bars), 1)
    for index, bar in enumerate(bars):
        left, top_px = frame.px(index) + slot * 0.1, frame.py(bar.value)
        centre = left + slot * 0.4
        parts.append(
            f'<rect class="bar" x="{left:.1f}" y="{top_px:.1f}" width="{slot * 0.8:.1f}" '
            f'height="{frame.bottom - top_px:.1f}" fill="{_PALETTE[0]}"><title>{escape(bar.label)}: '
            f"{bar.value:g}</title></rect>"
        )
        if bar.value:
            parts.append(f'<text x="{centre:.1f}" y="{top_px - 3:.1f}" text-anchor="middle">{bar.value:g}</text>')
        if index % label_every == 0:
            parts.append(
                f'<text x="{centre:.1f}" y="{frame.bottom + 16:.1f}" text-anchor="middle">{escape(bar.label)}</text>'
            )
    return _svg(width, height, title, parts)


def _svg(width: int, height: int, title: str, parts: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'role="img" font-family="sans-serif" font-size="12"><title>{escape(title)}</title>'
        f'<rect width="{width}" height="{height}" fill="#fff"/>' + "".join(parts) + "</svg>"
    )


def _frame_parts(frame: _Frame, title: str) -> list[str]:
    """Title, the y axis with its grid lines and tick labels, the x axis line and both axis labels."""
    parts = [
        f'<text x="{_LEFT}" y="18" font-size="14" font-weight="bold">{escape(title)}</text>',
        f'<text x="{(_LEFT + frame.right) / 2:.1f}" y="{frame.height - 6}" text-anchor="middle">'
        f"{escape(frame.x.label)}</text>",
        f'<text transform="translate(14 {(frame.top + frame.bottom) / 2:.1f}) rotate(-90)" text-anchor="middle">'
        f"{escape(frame.y.label)}</text>",
    ]
    for tick in _ticks(frame.y.low, frame.y.high):
        top = frame.py(tick)
        parts.append(
            f'<line x1="{_LEFT}" y1="{top:.1f}" x2="{frame.right:.1f}" y2="{top:.1f}" stroke="#e5e5e5"/>'
            f'<text x="{_LEFT - 6}" y="{top + 4:.1f}" text-anchor="end">{format(tick, frame.y.tick_format)}</text>'
        )
    parts.append(
        f'<line x1="{_LEFT}" y1="{frame.bottom:.1f}" x2="{frame.right:.1f}" y2="{frame.bottom:.1f}" stroke="#333"/>'
        f'<line x1="{_LEFT}" y1="{frame.top:.1f}" x2="{_LEFT}" y2="{frame.bottom:.1f}" stroke="#333"/>'
    )
    return parts


def _x_ticks(frame: _Frame) -> list[str]:
    parts = []
    for tick in _ticks(frame.x.low, frame.x.high):
        left = frame.px(tick)
        parts.append(
            f'<line x1="{left:.1f}" y1="{frame.bottom:.1f}" x2="{left:.1f}" y2="{frame.bottom + 4:.1f}" stroke="#333"/>'
            f'<text x="{left:.1f}" y="{frame.bottom + 16:.1f}" text-anchor="middle">'
            f"{format(tick, frame.x.tick_format)}</text>"
        )
    return parts


def _series_shapes(frame: _Frame, series: Series, colour: str) -> str:
    points = [(frame.px(a), frame.py(b)) for a, b in series.points]
    shapes = [f'<g class="series" data-label="{escape(series.label)}" data-points="{len(points)}">']
    if "line" in series.style and len(points) > 1:
        path = " ".join(f"{a:.1f},{b:.1f}" for a, b in points)
        shapes.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
    # A line through one point would not show: it is drawn as a dot.
    if "dots" in series.style or len(points) == 1:
        shapes += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="3.5" fill="{colour}"/>' for a, b in points]
    return "".join(shapes) + "</g>"


def _legend_entry(index: int, series: Series, colour: str) -> str:
    """One line of the legend under the title: a swatch drawn like the series, and its label."""
    middle = _TITLE + _LINE * index + 4
    swatch = (
        f'<circle cx="{_LEFT + 7}" cy="{middle}" r="3.5" fill="{colour}"/>'
        if series.style == "dots"
        else f'<rect x="{_LEFT}" y="{middle - 2}" width="14" height="4" fill="{colour}"/>'
    )
    return f'{swatch}<text x="{_LEFT + 20}" y="{middle + 4}">{escape(series.label)}</text>'


def _empty_note(frame: _Frame, text: str) -> str:
    return (
        f'<text class="empty" x="{(_LEFT + frame.right) / 2:.1f}" y="{(frame.top + frame.bottom) / 2:.1f}" '
        f'text-anchor="middle" fill="#888">{escape(text)}</text>'
    )


def _ticks(low: float, high: float) -> list[float]:
    """About five round values from ``low`` to ``high`` (steps of 1, 2 or 5 times a power of ten)."""
    if not high > low:
        return [low]
    raw = (high - low) / _TICKS
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step - 1e-9)
    count = math.floor(high / step + 1e-9) - first + 1
    # Rounding to the step's decimals keeps 0.30000000000000004 off the axis.
    decimals = max(0, -math.floor(math.log10(step)))
    return [round((first + i) * step, decimals) for i in range(count)]


def _nice_ceiling(value: float) -> float:
    """The smallest 1, 2 or 5 times a power of ten at or above ``value`` (1 for nothing)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return float(next(m * power for m in (1, 2, 5, 10) if m * power >= value))
