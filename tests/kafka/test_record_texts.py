"""Texts read again by source pointer: records judged are kept compressed, and only the others are fetched.

The fetching itself is tested on the broker (tests/kafka_stage/test_text_verification.py);
here a stand-in lookup counts what would have been fetched.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np
import pytest

from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.messages import InputReading
from stream_dedup.kafka.record_lookup import RecordGone
from stream_dedup.kafka.record_texts import RecordTexts
from stream_dedup.text import normalize
from stream_dedup.worker.signer_wire import WireRecord
from tests.real_text import stdlib_paragraphs


class CountingLookup:
    """Stands in for RecordLookup: fetches nothing, counts the records asked for."""

    asked: ClassVar[list[tuple[str, int, int]]] = []
    spans: ClassVar[list[tuple[int, int, int]]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def fetch(self, topic: str, partition: int, offset: int) -> RecordGone:
        CountingLookup.asked.append((topic, partition, offset))
        return RecordGone("not in this test")

    def records_between(self, topic: str, partition: int, start: int, end: int) -> list[WireRecord]:
        CountingLookup.spans.append((partition, start, end))
        return []

    def close(self) -> None:
        pass


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    monkeypatch.setattr("stream_dedup.kafka.record_texts.RecordLookup", CountingLookup)
    CountingLookup.asked, CountingLookup.spans = [], []
    return CountingLookup.asked


def records(texts: list[str | None], partition: int = 0) -> list[WireRecord]:
    values = [None if t is None else json.dumps({"id": f"d{i}", "text": t}).encode() for i, t in enumerate(texts)]
    return [WireRecord("documents", partition, i, 0, None, value) for i, value in enumerate(values)]


def pointers(partition: int, offsets: range | list[int]) -> np.ndarray:
    return np.array([(partition << 48) | offset for offset in offsets], dtype=np.uint64)


def texts(cache_bytes: int = 32 << 20) -> RecordTexts:
    return RecordTexts(KafkaConnection("127.0.0.1:1"), "documents", InputReading(), cache_bytes)


def test_the_records_kept_give_their_normalised_texts_without_a_fetch(asked: list[tuple[str, int, int]]) -> None:
    kept = texts()
    kept.keep(records(["Some  TEXT here", None, "Ünïcode ﬁne"], partition=3))
    assert kept.texts_of(pointers(3, [2, 0, 1])) == [normalize("Ünïcode ﬁne"), "some text here", None]
    assert asked == []
    assert kept.texts_of(pointers(4, [0])) == [None] and asked == [("documents", 4, 0)]


def test_compressed_the_budget_holds_more_prose_than_its_size(asked: list[tuple[str, int, int]]) -> None:
    paragraphs = list(stdlib_paragraphs(400)[:150])
    batch = records(paragraphs)
    raw = sum(len(r.value or b"") for r in batch)
    kept = texts(cache_bytes=raw * 3 // 4)
    kept.keep(batch)
    assert kept.texts_of(pointers(0, range(len(batch)))) == [normalize(p) for p in paragraphs]
    assert asked == []


def test_past_the_budget_the_least_recently_used_are_fetched_again(asked: list[tuple[str, int, int]]) -> None:
    paragraphs = list(stdlib_paragraphs(400)[:150])
    kept = texts(cache_bytes=32 << 10)
    batch = records(paragraphs)
    for start in range(0, len(batch), 10):
        kept.keep(batch[start : start + 10])
    found = kept.texts_of(pointers(0, range(len(paragraphs))))
    held = [i for i, text in enumerate(found) if text is not None]
    assert 0 < len(held) < len(paragraphs)
    assert held == list(range(held[0], len(paragraphs)))  # the newest
    assert [offset for _, _, offset in asked] == list(range(held[0]))


def test_the_batch_being_judged_needs_no_fetch_whatever_the_budget(asked: list[tuple[str, int, int]]) -> None:
    paragraphs = list(stdlib_paragraphs(400)[:40])
    kept = texts(cache_bytes=1)
    kept.keep(records(paragraphs))
    assert kept.texts_of(pointers(0, range(len(paragraphs)))) == [normalize(p) for p in paragraphs]
    assert asked == []


def test_an_expected_batch_is_read_by_span_where_dense_and_record_by_record_where_sparse(
    asked: list[tuple[str, int, int]],
) -> None:
    kept = texts()
    dense, sparse = pointers(1, range(100, 300, 2)), pointers(2, [5, 50_000])
    kept.expect(np.concatenate((dense, sparse)))
    assert kept.texts_of(np.concatenate((dense[:3], sparse))) == [None] * 5  # the stand-in reads nothing
    assert CountingLookup.spans == [(1, 100, 299)]  # once, at the first text asked for
    assert [offset for _, _, offset in asked] == [100, 102, 104, 5, 50_000]  # what the span did not bring
