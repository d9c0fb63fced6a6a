"""Pairs within a batch against their definition, one row and band at a time."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.lsh import pairs_within_batch


@settings(max_examples=200, deadline=None)
@given(
    rows=st.integers(0, 40),
    bands=st.integers(1, 4),
    values=st.integers(1, 5),
    cap=st.integers(1, 4),
    seed=st.integers(0, 2**32),
)
def test_each_row_pairs_with_the_first_earlier_rows_under_each_key_up_to_the_cap(
    rows: int, bands: int, values: int, cap: int, seed: int
) -> None:
    keys = np.random.default_rng(seed).integers(0, values, (rows, bands)).astype(np.uint32)
    later, earlier, ranks = pairs_within_batch(keys, cap)
    expected_pairs = []
    for band in range(bands):
        for row in range(rows):
            sharing = [e for e in range(row) if keys[e, band] == keys[row, band]]
            assert ranks[row, band] == len(sharing)
            expected_pairs += [(row, e) for e in sharing[:cap]]
    assert sorted(zip(later.tolist(), earlier.tolist(), strict=True)) == sorted(expected_pairs)
