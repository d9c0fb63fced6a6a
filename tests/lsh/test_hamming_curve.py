"""SimHash's S-curve: the binomial chance of a distance within k bits, at the angle of sets of equal size."""

import math

import numpy as np
import pytest

from stream_dedup.lsh.hamming_curve import (
    equal_size_cosine,
    expected_distance,
    expected_distance_jaccard,
    within_distance_probability,
)


@pytest.mark.parametrize("k", [0, 3, 6, 10, 16])
@pytest.mark.parametrize("jaccard", [0.3, 0.6, 0.8, 0.9, 0.97])
def test_the_chance_is_that_of_64_coin_flips_at_the_angle_over_pi(jaccard: float, k: int) -> None:
    angle = math.acos(2 * jaccard / (1 + jaccard))
    flips = np.random.default_rng(7).binomial(64, angle / math.pi, size=400_000)
    assert float(within_distance_probability(jaccard, k)) == pytest.approx(np.mean(flips <= k), abs=0.005)


def test_the_cosine_of_equal_size_sets_is_counted_from_their_vectors() -> None:
    for shared in (10, 50, 90):
        a, b = np.zeros(200), np.zeros(200)
        a[:100], b[100 - shared : 200 - shared] = 1, 1
        jaccard = shared / (200 - shared)
        cosine = float(a @ b / math.sqrt((a @ a) * (b @ b)))
        assert float(equal_size_cosine(jaccard)) == pytest.approx(cosine)


def test_the_curve_rises_to_one_and_turns_where_the_expected_distance_is_k() -> None:
    curve = within_distance_probability(np.linspace(0, 1, 101), 5)
    assert np.all(np.diff(curve) >= 0) and curve[-1] == 1.0 and curve[0] < 1e-9
    for k in (1, 3, 10):
        cosine = float(equal_size_cosine(expected_distance_jaccard(k)))
        assert 64 * math.acos(cosine) / math.pi == pytest.approx(k)
        assert float(expected_distance(expected_distance_jaccard(k))) == pytest.approx(k)
