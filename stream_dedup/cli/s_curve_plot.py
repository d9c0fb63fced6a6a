"""The S-curve of a banding as an SVG picture, with what a sample measured beside it.

The theoretical curve ``P(s) = 1 - (1 - s**r)**b`` says how likely a pair of
Jaccard similarity ``s`` is to become a candidate. Measured on a sample
(:func:`~stream_dedup.engine.evaluation.realised_curve`), two sets of dots show,
per bucket of exact Jaccard, the share of pairs that did become candidates
(which the curve predicts) and the share reported as duplicates (candidates
that also passed verification): the steeper that second step at the
threshold, the sharper the detector.
"""

import numpy as np

from stream_dedup.charts import Axis, Mark, Series, line_chart
from stream_dedup.config import DetectionConfig
from stream_dedup.engine.evaluation import BucketRate, RealisedCurve, midpoint

_CURVE_POINTS = 201


def curve_edges(threshold: float) -> list[float]:
    """Buckets of 0.05 from 0.4 below the threshold (not under 0.2) to 1, identical pairs in the last.

    Pairs far below the threshold are never reported and, in text of one kind,
    very many: starting higher keeps the exact measurement quick.
    """
    low = max(0.2, np.floor((threshold - 0.4) * 20) / 20)
    steps = np.round(np.arange(low, 1.0 - 1e-9, 0.05), 2)
    return [*(float(edge) for edge in steps), float(np.nextafter(1.0, 2.0))]


def s_curve_svg(config: DetectionConfig, measured: RealisedCurve | None = None, sample_name: str = "") -> str:
    """The chart: the theoretical curve, the threshold, and the measured shares if given."""
    banding = config.banding()
    b, r = banding.bands, banding.rows_per_band
    similarity = np.linspace(0.0, 1.0, _CURVE_POINTS)
    probability = banding.collision_probability(similarity)
    series = [Series(f"P(candidate) = 1 - (1 - s^{r})^{b}, in theory", list(zip(similarity, probability, strict=True)))]
    if measured is not None:
        series += [
            Series(
                f"shared a band, measured on {sample_name}: {measured.pairs:,} pairs of {measured.documents:,} "
                f"documents{_crossing(measured.candidates)}",
                [(bucket.centre, bucket.rate) for bucket in measured.candidates],
                "dots",
            ),
            Series(
                f"reported duplicate, measured{_crossing(measured.flagged)}",
                [(bucket.centre, bucket.rate) for bucket in measured.flagged],
                "line+dots",
            ),
        ]
    return line_chart(
        series,
        Axis("Jaccard similarity of a pair", 0.0, 1.0, ".1f"),
        Axis("share of pairs", 0.0, 1.0, ".0%"),
        title=f"S-curve: {b} bands x {r} rows, threshold {config.threshold:g}",
        marks=[Mark(config.threshold, f"threshold {config.threshold:g}")],
        width=760,
        height=420,
    )


def _crossing(rates: list[BucketRate]) -> str:
    """``; 50% at 0.812``, or nothing if the share never crosses one half."""
    point = midpoint(rates)
    return "" if np.isnan(point) else f"; 50% at {point:.3f}"
