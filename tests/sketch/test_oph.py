"""The vectorised one-permutation sketch and its coarsening against their definitions."""

from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.sketch import oph
from stream_dedup.sketch.bit_sketch import coarsen
from stream_dedup.sketch.oph import EMPTY, _attempts_by_rank, oph_sketch, probe_offsets, rank_table
from stream_dedup.text import ShingleChunk
from stream_dedup.text.hashing import MAX_U64

hash_lists = st.lists(
    st.lists(st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 2**64 - 2, 2**32, 2**63])), min_size=1),
    min_size=1,
    max_size=10,
)


def chunk_of(rows: list[list[int]]) -> ShingleChunk:
    """Rows of hashes as a chunk: padded with ``MAX_U64``, as shingling lays them out."""
    width = max(len(r) for r in rows)
    hashes = np.full((len(rows), width), MAX_U64, dtype=np.uint64)
    for i, values in enumerate(rows):
        hashes[i, : len(values)] = values
    counts = np.array([len(r) for r in rows], dtype=np.intp)
    return ShingleChunk(rows=np.arange(len(rows)), hashes=hashes, counts=counts)


@settings(max_examples=150, deadline=None)
@given(rows=hash_lists, num_bins=st.sampled_from([8, 12, 64, 100, 128, 1000, 1024, 4096]))
def test_each_bin_holds_the_smallest_hash_whose_high_half_falls_in_it(rows: list[list[int]], num_bins: int) -> None:
    expected = np.full((len(rows), num_bins), EMPTY, dtype=np.uint64)
    for i, values in enumerate(rows):
        for value in values:
            bin_ = ((value >> 32) * num_bins) >> 32
            expected[i, bin_] = min(int(expected[i, bin_]), value)
    assert (oph_sketch(chunk_of(rows), num_bins) == expected).all()


@settings(max_examples=60, deadline=None)
@given(
    rows=st.integers(1, 5),
    slots=st.sampled_from([1, 8, 64, 128]),
    group=st.sampled_from([1, 2, 3, 8]),
    seed=st.integers(0, 2**32),
)
def test_coarse_bins_are_the_minima_of_their_groups_of_fine_bins(rows: int, slots: int, group: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    sketches = rng.integers(0, 2**64, (rows, slots * group), dtype=np.uint64, endpoint=False)
    sketches[rng.random(sketches.shape) < 0.4] = EMPTY
    expected = sketches.reshape(rows, slots, group).min(axis=2)
    assert (coarsen(sketches, slots) == expected).all()


@settings(max_examples=60, deadline=None)
@given(
    rows=st.lists(st.lists(st.integers(0, 63), min_size=1, max_size=12), min_size=1, max_size=30),
    seed=st.integers(0, 2**32),
)
def test_sparse_rows_filled_in_several_rounds_take_their_first_non_empty_probe(
    rows: list[list[int]], seed: int
) -> None:
    num_bins = 64
    sketch = np.full((len(rows), num_bins), EMPTY, dtype=np.uint64)
    for r, bins in enumerate(rows):
        sketch[r, bins] = np.array(bins, dtype=np.uint64) * np.uint64(r + 1)
    empty = sketch == EMPTY
    offsets, _ = probe_offsets(num_bins, seed)
    expected = np.zeros(sketch.shape, dtype=np.intp)
    for r, i in zip(*np.nonzero(empty), strict=True):
        expected[r, i] = next(a for a, j in enumerate((i + offsets) % num_bins) if not empty[r, j])
    attempts = np.zeros(sketch.shape, dtype=np.intp)
    with patch.object(oph, "_RANK_CELLS", 3 * num_bins * 12):  # a few rows a round: many rounds
        _attempts_by_rank(attempts, empty, np.arange(len(rows)), rank_table(num_bins, seed))
    assert (attempts[empty] == expected[empty]).all()
