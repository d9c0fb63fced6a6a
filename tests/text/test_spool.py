"""The text spool gives back what was kept under each number, and nothing for a number never kept."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_dedup.text.spool import TextSpool

#: Batches of (gap before the number, text): numbers increase across batches, as line numbers do.
batches = st.lists(st.lists(st.tuples(st.integers(1, 3000), st.text(min_size=1, max_size=40)), max_size=30), max_size=8)


@given(batches, st.lists(st.integers(0, 10**6), max_size=50))
def test_texts_come_back_under_their_numbers_and_gaps_have_none(
    kept: list[list[tuple[int, str]]], asked: list[int]
) -> None:
    expected: dict[int, str] = {}
    number = 0
    with TextSpool() as spool:
        for batch in kept:
            numbers = []
            for gap, text in batch:
                number += gap
                numbers.append(number)
                expected[number] = text
            spool.add(numbers, [text for _, text in batch])
        every = sorted({*asked, *expected, number + 1})
        assert spool.texts_of(np.array(every, dtype=np.uint64)) == [expected.get(n) for n in every]


def test_numbers_must_increase_past_those_kept() -> None:
    with TextSpool() as spool:
        spool.add([3, 5], ["a", "b"])
        with pytest.raises(ValueError, match="must increase"):
            spool.add([5], ["c"])
        with pytest.raises(ValueError, match="must increase"):
            spool.add([7, 6], ["c", "d"])
        assert spool.texts_of(np.array([3, 5, 6, 7], dtype=np.uint64)) == ["a", "b", None, None]
