from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.text import shingle_sets
from stream_dedup.text.shingle_sets import ShingleSets, exact_jaccard, jaccard_of_pairs, shared_counts

set_lists = st.lists(st.sets(st.integers(0, 50), max_size=12), min_size=1, max_size=8)
#: Sets of any 32-bit values, long enough to be taken slice by slice.
long_sets = st.sets(st.integers(0, 2**32 - 1), min_size=65, max_size=200)


def ragged(sets: list[set[int]]) -> ShingleSets:
    values = np.array([v for s in sets for v in sorted(s)], dtype=np.uint32)
    return ShingleSets(values, np.cumsum([len(s) for s in sets], dtype=np.int64))


def as_python(sets: ShingleSets) -> list[list[int]]:
    starts = sets.ends - sets.lengths
    return [sets.values[a:b].tolist() for a, b in zip(starts, sets.ends, strict=True)]


@settings(max_examples=100, deadline=None)
@given(sets=set_lists, picks=st.lists(st.integers(0, 7), max_size=10))
def test_take_gathers_the_chosen_sets_in_order(sets: list[set[int]], picks: list[int]) -> None:
    which = np.array([p % len(sets) for p in picks], dtype=np.intp)
    assert as_python(ragged(sets).take(which)) == [sorted(sets[i]) for i in which]


@settings(max_examples=100, deadline=None)
@given(first=set_lists, second=set_lists)
def test_concat_appends_sets(first: list[set[int]], second: list[set[int]]) -> None:
    assert as_python(ShingleSets.concat([ragged(first), ragged(second)])) == [sorted(s) for s in first + second]


@settings(max_examples=100, deadline=None)
@given(pairs=st.lists(st.tuples(st.sets(st.integers(0, 30), min_size=1), st.sets(st.integers(0, 30), min_size=1))))
def test_exact_jaccard_of_many_pairs_matches_python_sets(pairs: list[tuple[set[int], set[int]]]) -> None:
    left, right = ragged([a for a, _ in pairs]), ragged([b for _, b in pairs])
    expected = [len(a & b) / len(a | b) for a, b in pairs]
    assert np.allclose(exact_jaccard(left, right), expected)


@settings(max_examples=60, deadline=None)
@given(sets=st.lists(long_sets, min_size=1, max_size=6), picks=st.lists(st.integers(0, 5), max_size=8))
def test_take_gathers_long_sets_of_any_values_in_order(sets: list[set[int]], picks: list[int]) -> None:
    which = np.array([p % len(sets) for p in picks], dtype=np.intp)
    assert as_python(ragged(sets).take(which)) == [sorted(sets[i]) for i in which]


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.tuples(long_sets, long_sets, long_sets), max_size=6))
def test_exact_jaccard_of_sets_of_any_32_bit_values_matches_python_sets(
    parts: list[tuple[set[int], set[int], set[int]]],
) -> None:
    # Each pair: a part both sets hold, so that they share many values, and a part of its own for each.
    pairs = [(shared | first, shared | second) for shared, first, second in parts]
    expected = [len(a & b) / len(a | b) for a, b in pairs]
    assert np.allclose(exact_jaccard(ragged([a for a, _ in pairs]), ragged([b for _, b in pairs])), expected)


def check_jaccard_of_pairs(sets: list[set[int]], picks: list[tuple[int, int]], per_round: int) -> None:
    """``jaccard_of_pairs`` of the pairs ``picks`` (positions taken modulo the sets) against Python's sets."""
    left = np.array([a % len(sets) for a, _ in picks], dtype=np.intp)
    right = np.array([b % len(sets) for _, b in picks], dtype=np.intp)
    expected = [len(sets[a] & sets[b]) / len(sets[a] | sets[b]) for a, b in zip(left, right, strict=True)]
    with patch.object(shingle_sets, "_VALUES_PER_ROUND", per_round):
        assert np.allclose(jaccard_of_pairs(ragged(sets), left, right), expected) and len(expected) == left.size


@settings(max_examples=100, deadline=None)
@given(
    sets=st.lists(st.sets(st.integers(0, 40), min_size=1, max_size=12), min_size=1, max_size=8),
    picks=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7)), max_size=30),
    per_round=st.integers(1, 40),
)
def test_jaccard_of_pairs_in_rounds_matches_python_sets(
    sets: list[set[int]], picks: list[tuple[int, int]], per_round: int
) -> None:
    """Rounds of any size (a pair larger than a round is a round of its own) give every pair once, in order."""
    check_jaccard_of_pairs(sets, picks, per_round)


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(long_sets, min_size=2, max_size=5),
    picks=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), max_size=12),
    per_round=st.integers(1, 1_000),
)
def test_jaccard_of_pairs_of_sets_of_any_32_bit_values_matches_python_sets(
    parts: list[set[int]], picks: list[tuple[int, int]], per_round: int
) -> None:
    """Values gathered straight into the tagged 64-bit copy keep all 32 bits, whatever the rounds."""
    # All share the first set's values, so that pairs share many.
    check_jaccard_of_pairs([parts[0] | part for part in parts], picks, per_round)


@settings(max_examples=100, deadline=None)
@given(pairs=st.lists(st.tuples(st.sets(st.integers(0, 30)), st.sets(st.integers(0, 30)))))
def test_shared_counts_match_python_sets_empty_ones_included(pairs: list[tuple[set[int], set[int]]]) -> None:
    """Each pair's count is read where its values end once sorted: an empty set, or two, must not shift them."""
    left, right = ragged([a for a, _ in pairs]), ragged([b for _, b in pairs])
    assert shared_counts(left, right).tolist() == [len(a & b) for a, b in pairs]
