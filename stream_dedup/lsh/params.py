"""Choosing the LSH banding: ``bands`` (b) of ``rows_per_band`` (r) signature slots.

Two documents of Jaccard similarity ``s`` share at least one band, and so
become candidates, with probability ``P(s) = 1 - (1 - s**r)**b`` (the
S-curve). Pairs that are never candidates are lost for good, while false
candidates are removed by verification, so we choose for recall: the
largest ``r`` (the steepest curve, the fewest false candidates) whose
``P(t)`` at the threshold ``t`` still reaches ``min_recall`` (default 0.99)
with at most ``num_perm`` slots, and for it the fewest bands that do. Each
band costs about 10 bytes of table per indexed document; slots no band uses
cost only signing time (the banding signature is never stored).

This differs on purpose from datasketch's ``_optimal_param``, which
minimises the sum of the false-positive and false-negative areas and, for
``t = 0.8`` and 128 permutations, picks ``b=9, r=13``: its curve's midpoint
sits near 0.845 and about 12% of pairs at ``J = 0.8`` are never candidates.
We pick ``b=16, r=6``: ``P(0.8) = 0.992``, and ``P(0.85) = 0.9995``.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from stream_dedup.errors import ConfigError

#: Grid of the numerical integrals of the S-curve (trapezoid rule: relative error below 1e-4 for the bandings
#: chosen; the mean of the grid's values, each point weighted alike, was off by up to 1%, in the digits printed).
_INTEGRAL_POINTS = 2001


@dataclass(frozen=True)
class BandParameters:
    """A banding of a signature: ``bands`` bands of ``rows_per_band`` slots each."""

    bands: int
    rows_per_band: int

    def __post_init__(self) -> None:
        if self.bands < 1:
            raise ConfigError("bands", f"must be at least 1, got {self.bands}")
        if self.rows_per_band < 1:
            raise ConfigError("rows_per_band", f"must be at least 1, got {self.rows_per_band}")

    def collision_probability(self, similarity: float | np.ndarray) -> np.ndarray:
        """``P(s) = 1 - (1 - s**r)**b``: chance that a pair of similarity ``s`` is a candidate."""
        s = np.asarray(similarity, dtype=np.float64)
        return 1.0 - (1.0 - s**self.rows_per_band) ** self.bands

    def false_positive_area(self, threshold: float) -> float:
        """Mean candidate probability of pairs below ``threshold`` (uniform over ``[0, t)``)."""
        s = np.linspace(0.0, threshold, _INTEGRAL_POINTS)
        return _mean_over(self.collision_probability(s), s)

    def false_negative_area(self, threshold: float) -> float:
        """Mean miss probability of pairs at or above ``threshold`` (uniform over ``[t, 1]``)."""
        s = np.linspace(threshold, 1.0, _INTEGRAL_POINTS)
        return _mean_over(1.0 - self.collision_probability(s), s)

    def midpoint(self) -> float:
        """Similarity where the S-curve crosses 1/2 (about ``(1/b)**(1/r)``)."""
        return float((1.0 - 0.5 ** (1.0 / self.bands)) ** (1.0 / self.rows_per_band))


def _mean_over(values: np.ndarray, s: np.ndarray) -> float:
    """The mean of a function sampled as ``values`` at the evenly spaced ``s``: its integral (trapezoid
    rule) over the interval's width."""
    return float(np.trapezoid(values, s) / (s[-1] - s[0]))


def check_min_recall(min_recall: float) -> None:
    """Refuse a ``min_recall`` that is no probability short of certain (whichever banding it chooses)."""
    if not 0.0 < min_recall < 1.0:
        raise ConfigError("min_recall", f"must be strictly between 0 and 1, got {min_recall!r}")


def choose_bands(threshold: float, num_perm: int, min_recall: float = 0.99) -> BandParameters:
    """The fewest bands of the largest ``r`` whose collision probability at ``threshold`` is ``>= min_recall``.

    >>> choose_bands(0.8, 128)
    BandParameters(bands=16, rows_per_band=6)
    """
    if not 0.0 < threshold < 1.0:
        raise ConfigError("threshold", f"must be strictly between 0 and 1, got {threshold!r}")
    check_min_recall(min_recall)
    banding = steepest_banding([(threshold, min_recall)], num_perm)
    if banding is not None:
        return banding
    raise ConfigError(
        "num_perm",
        f"{num_perm} permutations cannot reach recall {min_recall} at threshold {threshold}; "
        "use more permutations or a higher threshold",
    )


def steepest_banding(targets: Sequence[tuple[float, float]], num_perm: int) -> BandParameters | None:
    """The largest ``r``, and for it the fewest bands, whose candidate probability at each
    ``(similarity, recall)`` of ``targets`` reaches that recall with at most ``num_perm`` slots; ``None`` if none.
    """
    for rows in range(num_perm, 0, -1):
        bands = 1
        for similarity, recall in targets:
            band_probability = similarity**rows
            if band_probability * num_perm < recall:
                break  # even num_perm bands of this width fall short (or s**r underflows)
            # Solve 1 - (1 - s**r)**b >= recall for b, then step up past rounding.
            needed = max(1, math.ceil(math.log1p(-recall) / math.log1p(-band_probability)) - 1)
            while needed * rows <= num_perm and BandParameters(needed, rows).collision_probability(similarity) < recall:
                needed += 1
            bands = max(bands, needed)
        else:
            if bands * rows <= num_perm:
                return BandParameters(bands, rows)
    return None
