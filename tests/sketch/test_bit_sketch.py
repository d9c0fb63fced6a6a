"""Agreeing bits of one-bit sketches against a bit-by-bit count."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.sketch.bit_sketch import bit_agreements


@settings(max_examples=100, deadline=None)
@given(
    rows=st.integers(0, 6),
    width=st.integers(0, 40),
    every_other_column=st.booleans(),
    one_left_row=st.booleans(),
    seed=st.integers(0, 2**32),
)
def test_agreeing_bits_are_counted_alike_whether_rows_are_whole_words_or_not(
    rows: int, width: int, every_other_column: bool, one_left_row: bool, seed: int
) -> None:
    """Any width (whole 64-bit words or not), rows not contiguous, one left row against many."""
    rng = np.random.default_rng(seed)
    columns = width * 2 if every_other_column else width
    left = rng.integers(0, 256, (1 if one_left_row else rows, columns), dtype=np.uint8)
    right = rng.integers(0, 256, (rows, columns), dtype=np.uint8)
    if every_other_column:
        left, right = left[:, ::2], right[:, ::2]
    expected = (np.unpackbits(left, axis=1) == np.unpackbits(right, axis=1)).sum(axis=1)
    assert bit_agreements(left, right).tolist() == np.broadcast_to(expected, (rows,)).tolist()
