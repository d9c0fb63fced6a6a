"""Pairs within a batch against their definition, one row and band at a time."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.lsh import pairs_within_batch
from stream_dedup.lsh.band_keys import content_slots
from stream_dedup.lsh.index import ranks_within_batch


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(0, 40),
    bands=st.integers(1, 4),
    values=st.integers(1, 5),
    cap=st.integers(1, 9),
    slots=st.integers(1, 4),
    seed=st.integers(0, 2**32),
)
def test_each_row_pairs_with_the_newest_earlier_rows_of_each_slot_under_a_band_key_and_the_first_under_the_content_key(
    rows: int, bands: int, values: int, cap: int, slots: int, seed: int
) -> None:
    """As bands entered one row at a time keep them: each slot its newest ceil(cap / slots) under a key."""
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, values, (rows, bands)).astype(np.uint32)
    keys[:, -1] |= rng.integers(0, 3, rows).astype(np.uint32) << np.uint32(16)
    slot = content_slots(keys, slots)
    share = -(-cap // slots)
    later, earlier, tables, ranks = pairs_within_batch(keys, cap, slots)
    expected_pairs = []
    for band in range(bands):
        for row in range(rows):
            sharing = [e for e in range(row) if keys[e, band] == keys[row, band]]
            assert ranks[row, band] == len(sharing)
            if band == bands - 1:  # the content key: its earliest (one slot: the slot is the content key's)
                kept = sharing[:share]
            else:
                kept = [e for s in range(slots) for e in [e for e in sharing if slot[e] == s][-share:]]
            expected_pairs += [(row, e, band) for e in kept]
    assert sorted(zip(later.tolist(), earlier.tolist(), tables.tolist(), strict=True)) == sorted(expected_pairs)


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(0, 40),
    bands=st.integers(1, 4),
    values=st.integers(1, 5),
    slots=st.integers(1, 6),
    seed=st.integers(0, 2**32),
)
def test_a_rank_by_slot_counts_the_earlier_rows_under_the_same_key_and_slot(
    rows: int, bands: int, values: int, slots: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, values, (rows, bands)).astype(np.uint32)
    # The content key (last column) carries the slot in its high half, as band_keys makes it.
    keys[:, -1] |= rng.integers(0, 3, rows).astype(np.uint32) << np.uint32(16)
    slot = content_slots(keys, slots)
    ranks = ranks_within_batch(keys, slots)
    for band in range(bands):
        for row in range(rows):
            sharing = [e for e in range(row) if keys[e, band] == keys[row, band] and slot[e] == slot[row]]
            assert ranks[row, band] == len(sharing)
