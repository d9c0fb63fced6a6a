"""The S-curve of a banding (or of SimHash's distance limit) as an SVG picture, with what a sample measured beside it.

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
from stream_dedup.lsh.hamming_curve import expected_distance_jaccard, within_distance_probability

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
    """The chart: the theoretical curve, the threshold, and the measured shares if given.

    MinHash (and the combined method): the banding's curve, and the shares of
    pairs that shared a band and that were reported. SimHash: the chance of
    fingerprints within ``max_hamming`` bits, and the share reported (the
    index finds every such pair, so candidates and reported are one).
    """
    similarity = np.linspace(0.0, 1.0, _CURVE_POINTS)
    if config.uses_minhash:
        banding = config.banding()
        b, r = banding.bands, banding.rows_per_band
        theory = Series(
            f"P(candidate) = 1 - (1 - s^{r})^{b}, in theory",
            list(zip(similarity, banding.collision_probability(similarity), strict=True)),
        )
        title = f"S-curve: {b} bands x {r} rows, threshold {config.threshold:g}"
        mark = Mark(config.threshold, f"threshold {config.threshold:g}")
    else:
        k = config.max_hamming
        theory = Series(
            f"P(within {k} of 64 bits), sets of equal size, in theory",
            list(zip(similarity, within_distance_probability(similarity, k), strict=True)),
        )
        title = f"SimHash: duplicate within {k} of 64 bits"
        mark = Mark(expected_distance_jaccard(k), f"expected distance {k} bits")
    series = [theory]
    if measured is not None:
        sample = f"measured on {sample_name}: {measured.pairs:,} pairs of {measured.documents:,} documents"
        if config.uses_minhash:
            series.append(
                Series(
                    f"shared a band, {sample}{_crossing(measured.candidates)}",
                    [(bucket.centre, bucket.rate) for bucket in measured.candidates],
                    "dots",
                )
            )
            sample = "measured"
        series.append(
            Series(
                f"reported duplicate, {sample}{_crossing(measured.flagged)}",
                [(bucket.centre, bucket.rate) for bucket in measured.flagged],
                "line+dots",
            )
        )
    return line_chart(
        series,
        Axis("Jaccard similarity of a pair", 0.0, 1.0, ".1f"),
        Axis("share of pairs", 0.0, 1.0, ".0%"),
        title=title,
        marks=[mark],
        width=760,
        height=420,
    )


def _crossing(rates: list[BucketRate]) -> str:
    """``; 50% at 0.812``, or nothing if the share never crosses one half."""
    point = midpoint(rates)
    return "" if np.isnan(point) else f"; 50% at {point:.3f}"
