"""How likely SimHash is to find a pair: the S-curve of "within ``k`` of 64 bits", by Jaccard similarity.

Each fingerprint bit of two documents differs with probability ``angle / pi``,
the angle between their shingle vectors (Charikar, STOC 2002), independently
enough that the distance is close to binomial: ``P(distance <= k)`` is the
binomial CDF of 64 trials at ``p = angle / pi``. The index finds every pair
within ``k`` bits, so that is the chance a pair is reported. For two sets of
equal size at Jaccard ``J`` (the case a Jaccard threshold is usually read
for), the cosine of their 0/1 vectors is ``2J / (1 + J)``; sets of unequal size
have a lower cosine at the same Jaccard, so the curve is the most a pair can
hope for.
"""

import math

import numpy as np
import numpy.typing as npt

from stream_dedup.lsh.hamming_params import FINGERPRINT_BITS


def equal_size_cosine(jaccard: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The cosine of two equal-size sets' 0/1 vectors at Jaccard ``jaccard``."""
    j = np.asarray(jaccard, dtype=np.float64)
    return 2.0 * j / (1.0 + j)


def expected_distance(jaccard: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The expected Hamming distance of the fingerprints of equal-size sets at ``jaccard``."""
    return FINGERPRINT_BITS * np.arccos(np.clip(equal_size_cosine(jaccard), -1.0, 1.0)) / math.pi


def within_distance_probability(jaccard: npt.ArrayLike, max_distance: int) -> npt.NDArray[np.float64]:
    """``P(distance <= max_distance)`` of the SimHash fingerprints of equal-size sets at ``jaccard``."""
    p = expected_distance(jaccard) / FINGERPRINT_BITS  # the chance that one bit differs
    total = np.zeros_like(p)
    for i in range(max_distance + 1):
        total += math.comb(FINGERPRINT_BITS, i) * p**i * (1.0 - p) ** (FINGERPRINT_BITS - i)
    return np.minimum(total, 1.0)


def expected_distance_jaccard(max_distance: int) -> float:
    """The Jaccard of equal-size sets whose expected distance is ``max_distance`` bits: where the curve turns."""
    cosine = math.cos(math.pi * max_distance / FINGERPRINT_BITS)
    return cosine / (2.0 - cosine)
