"""Measuring a configuration on a sample: exact truth, detection rates by bucket, the realised S-curve."""

import itertools
import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.evaluation import (
    BucketRate,
    detection_rates,
    flagged_pairs,
    midpoint,
    realised_curve,
    shingle_hash_sets,
    similar_pairs,
)

EDGES = [0.4, 0.6, 0.8, 1.0]


def brute_force_jaccard(left: set[int], right: set[int]) -> float:
    return len(left & right) / len(left | right)


token_sets = st.lists(st.frozensets(st.integers(0, 30), min_size=1, max_size=12), min_size=2, max_size=12)


@settings(max_examples=200, deadline=None)
@given(sets=token_sets, threshold=st.sampled_from([0.3, 0.5, 0.8, 1.0]))
def test_similar_pairs_are_every_pair_at_or_above_the_threshold_by_brute_force(
    sets: list[frozenset[int]], threshold: float
) -> None:
    arrays = [np.array(sorted(s), dtype=np.uint64) for s in sets]

    found = similar_pairs(arrays, threshold)

    expected = {
        (i, j): brute_force_jaccard(set(sets[i]), set(sets[j]))
        for i, j in itertools.combinations(range(len(sets)), 2)
        if brute_force_jaccard(set(sets[i]), set(sets[j])) >= threshold
    }
    assert found.keys() == expected.keys()
    for pair, similarity in found.items():
        assert similarity == pytest.approx(expected[pair])


def test_detection_rates_are_shares_detected_in_half_open_buckets_leaving_empty_ones_out() -> None:
    similarities = [0.4, 0.5, 0.59, 0.8, 0.9, 0.95, 1.0, 0.1]
    detected = [False, True, True, True, False, True, True, True]

    rates = detection_rates(similarities, detected, EDGES)

    # 0.6 <= J < 0.8 holds nothing; 1.0 and 0.1 fall outside [0.4, 1.0).
    assert rates == [BucketRate(0.4, 0.6, 3, 2 / 3), BucketRate(0.8, 1.0, 3, 2 / 3)]


def test_an_edge_just_past_one_counts_identical_items_in_the_last_bucket() -> None:
    rates = detection_rates([1.0, 0.9], [True, False], [0.8, float(np.nextafter(1.0, 2.0))])

    assert [(r.count, r.rate) for r in rates] == [(2, 0.5)]


@settings(deadline=None)  # time is not the point
@given(st.lists(st.tuples(st.floats(0.0, 1.0), st.booleans()), max_size=60))
def test_detection_rates_count_every_item_inside_the_edges_once(items: list[tuple[float, bool]]) -> None:
    similarities = [s for s, _ in items]
    detected = [d for _, d in items]

    rates = detection_rates(similarities, detected, EDGES)

    inside = [(s, d) for s, d in items if EDGES[0] <= s < EDGES[-1]]
    assert sum(r.count for r in rates) == len(inside)
    assert sum(r.rate * r.count for r in rates) == pytest.approx(sum(d for _, d in inside))


def test_midpoint_interpolates_where_the_share_crosses_one_half() -> None:
    rates = [BucketRate(0.4, 0.6, 10, 0.0), BucketRate(0.6, 0.8, 10, 0.25), BucketRate(0.8, 1.0, 10, 0.75)]

    assert midpoint(rates) == pytest.approx(0.8)
    assert math.isnan(midpoint(rates[:2]))


def _graded_corpus() -> list[str]:
    """40 unrelated texts of 80 words, and for each a copy with 1 to 40 of its words replaced."""
    rng = random.Random(3)
    words = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(5, 9))) for _ in range(4000)]
    originals = [" ".join(rng.sample(words, 80)) for _ in range(40)]
    copies = []
    for edits, text in enumerate(originals, start=1):
        tokens = text.split()
        for position in rng.sample(range(80), edits):
            tokens[position] = rng.choice(words)
        copies.append(" ".join(tokens))
    return originals + copies


def test_realised_curve_buckets_every_pair_of_the_truth_and_reports_what_the_index_flags() -> None:
    texts = _graded_corpus()
    config = DetectionConfig(threshold=0.8)
    edges = [0.4, 0.5, 0.6, 0.7, 0.8, 0.9, float(np.nextafter(1.0, 2.0))]

    curve = realised_curve(texts, config, edges)

    truth = similar_pairs(shingle_hash_sets(texts, config), 0.4)
    assert curve.documents == 80
    assert curve.pairs == len(truth) == sum(r.count for r in curve.candidates)
    flagged = flagged_pairs(texts, config)
    assert sum(r.rate * r.count for r in curve.flagged) == pytest.approx(len(flagged & truth.keys()))
    for candidate, reported in zip(curve.candidates, curve.flagged, strict=True):
        assert candidate.low == reported.low and candidate.count == reported.count
        assert reported.rate <= candidate.rate  # verification only removes candidates
    # A sharp threshold: nearly nothing reported below 0.7, nearly everything from 0.9.
    by_low = {r.low: r.rate for r in curve.flagged}
    assert by_low.get(0.4, 0.0) == by_low.get(0.5, 0.0) == 0.0
    assert by_low[0.9] == 1.0
