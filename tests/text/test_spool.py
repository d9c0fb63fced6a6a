"""The text spool gives back what was kept under each number, and nothing for a number never kept or forgotten."""

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_dedup.text import spool as spool_module
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


@given(
    st.lists(st.tuples(st.integers(1, 40), st.text(min_size=1, max_size=40), st.integers(0, 30)), max_size=120),
    st.integers(0, 200),
    st.integers(1, 20),
)
def test_texts_past_the_forgotten_numbers_come_back_whatever_was_compacted(
    added: list[tuple[int, str, int]], compact_bytes: int, compact_numbers: int
) -> None:
    # Each step adds a text a few numbers on, then forgets up to some numbers back: what stays is exact.
    expected: dict[int, str] = {}
    number = forgotten = 0
    with _small_compactions(compact_bytes, compact_numbers), TextSpool() as spool:
        for gap, text, back in added:
            number += gap
            expected[number] = text
            spool.add([number], [text])
            forgotten = max(forgotten, number - back)
            spool.forget_before(forgotten)
            asked = range(max(forgotten - 45, 0), number + 2)
            assert spool.texts_of(np.array(asked, dtype=np.uint64)) == [
                expected.get(n) if n >= forgotten else None for n in asked
            ]


def test_forgetting_keeps_disk_and_memory_to_about_twice_what_is_kept() -> None:
    # Under --max-documents the offline command forgets every line retention evicted: the spool took
    # a line's text on disk and 8 bytes of memory for every line of the input, however long.
    text = "x" * 100
    with _small_compactions(1000, 100), TextSpool() as spool:
        for number in range(1, 20_001):
            spool.add([number], [text])
            spool.forget_before(number - 49)  # the last 50 kept
            assert spool.disk_bytes <= 2 * max(50 * len(text), 1000) + len(text)
            assert spool.numbers_held <= 2 * max(50, 100) + 1


def test_a_number_forgotten_has_no_text_and_numbers_still_must_increase() -> None:
    with _small_compactions(0, 1), TextSpool() as spool:
        spool.add([1, 2, 3], ["a", "b", "c"])
        spool.forget_before(3)
        assert spool.texts_of(np.array([1, 2, 3], dtype=np.uint64)) == [None, None, "c"]
        with pytest.raises(ValueError, match="must increase"):
            spool.add([3], ["d"])
        spool.add([5], ["e"])
        assert spool.texts_of(np.array([3, 4, 5], dtype=np.uint64)) == ["c", None, "e"]


def test_a_compaction_that_cannot_copy_leaves_every_text_where_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    """The offsets were moved before the copy: a full disk left them pointing past the texts of the old file."""
    texts = [f"text {number}" * number for number in range(1, 11)]

    def full_disk(*_: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    with _small_compactions(0, 1), TextSpool() as spool:
        spool.add(list(range(1, 11)), texts)
        monkeypatch.setattr(spool_module.shutil, "copyfileobj", full_disk)
        with pytest.raises(OSError, match="No space left"):
            spool.forget_before(6)
        assert spool.texts_of(np.arange(6, 11, dtype=np.uint64)) == texts[5:]


@contextmanager
def _small_compactions(compact_bytes: int, compact_numbers: int) -> Iterator[None]:
    """Compact the spool at these sizes instead of its defaults (tens of MB, a million numbers)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(spool_module, "COMPACT_BYTES", compact_bytes)
        patch.setattr(spool_module, "COMPACT_NUMBERS", compact_numbers)
        yield
