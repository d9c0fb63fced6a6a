"""``distinct_sorted`` against Python's own set, on every integer width the engine passes it."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from stream_dedup.distinct import distinct_sorted


@given(st.lists(st.integers(0, 2**63 - 1)), st.sampled_from([np.int64, np.uint64]))
def test_the_distinct_values_in_ascending_order_and_the_dtype_kept(values: list[int], dtype: type) -> None:
    found = distinct_sorted(np.array(values, dtype=dtype))
    assert found.tolist() == sorted(set(values))
    assert found.dtype == dtype


@given(st.lists(st.integers(-5, 5), min_size=0, max_size=50))
def test_repeats_and_negatives(values: list[int]) -> None:
    assert distinct_sorted(np.array(values, dtype=np.int32)).tolist() == sorted(set(values))
