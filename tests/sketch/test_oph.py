"""The vectorised one-permutation sketch and its coarsening against their definitions."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.sketch.bit_sketch import coarsen
from stream_dedup.sketch.oph import EMPTY, oph_sketch
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
