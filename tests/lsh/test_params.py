import math
from fractions import Fraction

import numpy as np
import pytest

from stream_dedup.errors import ConfigError
from stream_dedup.lsh import BandParameters, choose_bands


def test_threshold_08_with_128_permutations_keeps_recall_where_datasketch_loses_it() -> None:
    ours = choose_bands(0.8, 128)
    datasketch = BandParameters(bands=9, rows_per_band=13)
    assert (ours.bands, ours.rows_per_band) == (16, 6)
    similarities = np.linspace(0.8, 1.0, 201)
    assert ours.collision_probability(similarities).mean() > 0.998
    assert datasketch.collision_probability(similarities).mean() < 0.9


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7, 0.8, 0.9, 0.95])
@pytest.mark.parametrize("num_perm", [64, 128, 256])
def test_chosen_banding_reaches_the_recall_target_with_the_steepest_curve(threshold: float, num_perm: int) -> None:
    chosen = choose_bands(threshold, num_perm, min_recall=0.99)
    assert chosen.collision_probability(threshold) >= 0.99
    assert chosen.bands * chosen.rows_per_band <= num_perm
    steeper = BandParameters(num_perm // (chosen.rows_per_band + 1), chosen.rows_per_band + 1)
    assert steeper.collision_probability(threshold) < 0.99
    fewer = BandParameters(chosen.bands - 1, chosen.rows_per_band)
    assert chosen.bands == 1 or fewer.collision_probability(threshold) < 0.99


def test_s_curve_matches_its_formula() -> None:
    banding = BandParameters(20, 5)
    assert banding.collision_probability(0.6) == pytest.approx(1 - (1 - 0.6**5) ** 20)
    assert banding.collision_probability(banding.midpoint()) == pytest.approx(0.5)


def test_impossible_threshold_names_the_setting() -> None:
    with pytest.raises(ConfigError, match="threshold"):
        choose_bands(1.0, 128)


def _exact_mean_miss(bands: int, rows: int, low: Fraction, high: Fraction) -> Fraction:
    """The mean of ``(1 - s**r)**b`` over ``[low, high]``, integrated term by term of its binomial expansion."""
    integral = sum(
        Fraction(math.comb(bands, k) * (-1) ** k, rows * k + 1) * (high ** (rows * k + 1) - low ** (rows * k + 1))
        for k in range(bands + 1)
    )
    return integral / (high - low)


@pytest.mark.parametrize(("threshold", "num_perm"), [(0.8, 128), (0.5, 64), (0.9, 256), (0.3, 128), (0.95, 128)])
def test_false_positive_and_negative_areas_print_their_exact_digits(threshold: float, num_perm: int) -> None:
    # `params` prints them to 4 and 5 decimals; the mean of grid values was off in that digit (0.2741 at the
    # default banding, exactly 0.27402).
    banding = choose_bands(threshold, num_perm)
    t = Fraction(str(threshold))
    false_positive = 1 - _exact_mean_miss(banding.bands, banding.rows_per_band, Fraction(0), t)
    false_negative = _exact_mean_miss(banding.bands, banding.rows_per_band, t, Fraction(1))
    assert banding.false_positive_area(threshold) == pytest.approx(float(false_positive), rel=1e-4)
    assert banding.false_negative_area(threshold) == pytest.approx(float(false_negative), rel=1e-4)
