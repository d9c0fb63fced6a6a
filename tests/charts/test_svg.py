"""SVG charts: well-formed, escaped, points where the axes say, an empty chart that says so."""

import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.charts import Axis, Bar, Mark, Series, bar_chart, line_chart
from stream_dedup.charts.svg import _ticks

SVG = "{http://www.w3.org/2000/svg}"
HOSTILE = '<script>alert("x")</script> & "quotes"'


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)  # raises on anything not well-formed


def texts(root: ET.Element) -> list[str]:
    return ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]


def polyline_points(root: ET.Element) -> list[tuple[float, float]]:
    (line,) = root.iter(f"{SVG}polyline")
    return [(float(x), float(y)) for x, y in (p.split(",") for p in line.attrib["points"].split())]


def test_a_line_chart_is_well_formed_svg_with_its_title_labels_and_legend() -> None:
    svg = line_chart(
        [Series("P(candidate)", [(0.0, 0.0), (0.5, 0.2), (1.0, 1.0)])],
        Axis("Jaccard similarity", 0, 1),
        Axis("probability", 0, 1),
        title="S-curve",
        marks=[Mark(0.8, "threshold 0.8")],
    )

    root = parse(svg)
    assert root.tag == f"{SVG}svg"
    shown = texts(root)
    for label in ("S-curve", "Jaccard similarity", "probability", "P(candidate)", "threshold 0.8"):
        assert label in shown
    assert root.find(f"{SVG}title") is not None


def test_points_are_placed_by_the_axes_ranges() -> None:
    svg = line_chart(
        [Series("s", [(10.0, 0.0), (15.0, 50.0), (20.0, 100.0)])], Axis("x", 10, 20), Axis("y", 0, 100), title="t"
    )

    (left, bottom), (middle_x, middle_y), (right, top) = polyline_points(parse(svg))
    assert left < middle_x < right and top < middle_y < bottom
    assert middle_x == pytest.approx((left + right) / 2, abs=0.1)
    assert middle_y == pytest.approx((top + bottom) / 2, abs=0.1)


def test_values_beyond_the_y_axis_are_drawn_at_its_edge() -> None:
    svg = line_chart([Series("s", [(0.0, -5.0), (1.0, 500.0)])], Axis("x", 0, 1), Axis("y", 0, 100), title="t")
    inside = line_chart([Series("s", [(0.0, 0.0), (1.0, 100.0)])], Axis("x", 0, 1), Axis("y", 0, 100), title="t")

    assert polyline_points(parse(svg)) == polyline_points(parse(inside))


def test_dots_draw_one_circle_per_point_and_no_line() -> None:
    root = parse(
        line_chart([Series("s", [(0.1, 0.1), (0.2, 0.3)], "dots")], Axis("x", 0, 1), Axis("y", 0, 1), title="t")
    )

    (group,) = [g for g in root.iter(f"{SVG}g") if g.attrib.get("class") == "series"]
    assert len(list(group.iter(f"{SVG}circle"))) == 2
    assert not list(root.iter(f"{SVG}polyline"))


def test_a_chart_without_points_says_so() -> None:
    root = parse(line_chart([Series("throughput", [])], Axis("x", 0, 1), Axis("y", 0, 1), title="t", empty="none yet"))

    assert "none yet" in texts(root)
    assert not list(root.iter(f"{SVG}polyline"))


def test_every_text_is_escaped() -> None:
    line = line_chart(
        [Series(HOSTILE, [(0, 0), (1, 1)])],
        Axis(HOSTILE, 0, 1),
        Axis(HOSTILE, 0, 1),
        title=HOSTILE,
        marks=[Mark(0.5, HOSTILE)],
    )
    bars = bar_chart([Bar(HOSTILE, 3)], title=HOSTILE, x_label=HOSTILE, y_label=HOSTILE)

    for svg in (line, bars):
        root = parse(svg)
        assert not [e for e in root.iter() if e.tag.endswith("script")]
        assert HOSTILE in texts(root)


def test_a_bar_chart_draws_one_bar_per_value_with_the_value_above_it() -> None:
    root = parse(bar_chart([Bar("0.80", 4), Bar("0.85", 0), Bar("0.90", 12)], title="t", x_label="x", y_label="y"))

    bars = [r for r in root.iter(f"{SVG}rect") if r.attrib.get("class") == "bar"]
    assert len(bars) == 3
    heights = [float(b.attrib["height"]) for b in bars]
    assert heights[1] == 0 and heights[2] == pytest.approx(3 * heights[0], abs=0.2)
    shown = texts(root)
    assert {"4", "12", "0.80", "0.85", "0.90"} <= set(shown)


def test_a_bar_chart_without_bars_or_with_only_zeros_says_so() -> None:
    assert "no data yet" in texts(parse(bar_chart([], title="t", x_label="x", y_label="y")))
    assert "none" in texts(parse(bar_chart([Bar("a", 0)], title="t", x_label="x", y_label="y", empty="none")))
    assert "none" not in texts(parse(bar_chart([Bar("a", 1)], title="t", x_label="x", y_label="y", empty="none")))


@settings(deadline=None)  # time is not the point
@given(st.floats(-1e6, 1e6), st.floats(1e-3, 1e6))
def test_ticks_are_round_ascending_values_inside_the_range(low: float, span: float) -> None:
    high = low + span

    ticks = _ticks(low, high)

    assert 2 <= len(ticks) <= 11
    assert ticks == sorted(ticks)
    tolerance = span * 1e-9
    assert all(low - tolerance <= t <= high + tolerance for t in ticks)


def test_a_line_of_one_point_is_drawn_as_a_dot() -> None:
    root = parse(line_chart([Series("s", [(0.5, 0.5)])], Axis("x", 0, 1), Axis("y", 0, 1), title="t"))

    (group,) = [g for g in root.iter(f"{SVG}g") if g.attrib.get("class") == "series"]
    assert len(list(group.iter(f"{SVG}circle"))) == 1
