"""Texts read again by source pointer: records judged are kept compressed, and only the others are fetched.

The fetching itself is tested on the broker (tests/kafka_stage/test_text_verification.py);
here a stand-in lookup counts what would have been fetched.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.errors import KafkaError, KafkaTimeoutError

from stream_dedup.kafka.block_spool import BlockSpool
from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.messages import InputReading, document_text
from stream_dedup.kafka.record_lookup import RecordGone, RecordLookup
from stream_dedup.kafka.record_texts import TRIES_BEFORE_GONE, RecordTexts, text_blocks
from stream_dedup.kafka.value_blocks import block_compressor
from stream_dedup.lsh.generation import NO_SOURCE
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
    assert kept.take_reads() == {"batch": 3, "none": 1}


def test_texts_read_by_the_signers_are_kept_as_given_and_never_read_again(asked: list[tuple[str, int, int]]) -> None:
    kept = texts(cache_bytes=1)  # whatever the budget, the batch being judged is held
    signed = ["ünïcode text as read", "another one", "nowhere"]
    sources = np.append(pointers(2, [7, 9]), NO_SOURCE)  # the last one's source is past what a pointer holds
    encoded = [text.encode() for text in signed]
    kept.keep_texts(sources, encoded, text_blocks(sources, encoded, block_compressor()))
    assert kept.texts_of(pointers(2, [9, 7])) == ["another one", "ünïcode text as read"]
    assert asked == []


def test_texts_signed_in_a_batch_come_from_memory_once_the_next_batch_is_judged(
    asked: list[tuple[str, int, int]],
) -> None:
    kept = texts()
    signed = [f"text number {i} as the signer read it" for i in range(40)]
    sources, encoded = pointers(1, range(100, 140)), [text.encode() for text in signed]
    kept.keep_texts(sources, encoded, text_blocks(sources, encoded, block_compressor()))
    following = pointers(1, [140])
    kept.keep_texts(following, [b"the next batch"], text_blocks(following, [b"the next batch"], block_compressor()))
    assert kept.texts_of(pointers(1, [139, 100, 117])) == [signed[39], signed[0], signed[17]]
    assert kept.take_reads() == {"memory": 3}
    assert asked == []


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


def test_with_a_spool_the_records_memory_lets_go_are_read_from_disk_not_fetched(
    asked: list[tuple[str, int, int]], tmp_path: Path
) -> None:
    paragraphs = list(stdlib_paragraphs(400)[:150])
    spool = BlockSpool(str(tmp_path), 1 << 30)
    kept = RecordTexts(KafkaConnection("127.0.0.1:1"), "documents", InputReading(), 32 << 10, spool)
    assert kept.kept_bytes() == {"memory": 0, "disk": 0}
    batch = records(paragraphs)
    for start in range(0, len(batch), 10):
        kept.keep(batch[start : start + 10])
    # What the texts take, by place: memory within its budget (less the lookup's share), the rest on disk.
    assert 16 << 10 < kept.kept_bytes()["memory"] <= 28 << 10
    assert kept.kept_bytes()["disk"] == spool.disk_bytes > 0
    assert kept.texts_of(pointers(0, range(len(paragraphs)))) == [normalize(p) for p in paragraphs]
    assert asked == [] and spool.disk_bytes > 0
    reads = kept.take_reads()
    assert reads["batch"] == 10 and reads["memory"] > 0 and reads["disk"] > 0 and reads.total() == len(paragraphs)
    assert kept.take_reads() == {}
    kept.close()
    assert spool.disk_bytes == 0  # closed with the texts: its disk freed


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


class TopicLookup:
    """Stands in for RecordLookup over ``TOPIC``: (partition, offset) -> value; missing offsets are gaps."""

    TOPIC: ClassVar[dict[tuple[int, int], bytes | None]] = {}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def fetch(self, topic: str, partition: int, offset: int) -> WireRecord | RecordGone:
        if (partition, offset) not in self.TOPIC:
            return RecordGone("a gap")
        return WireRecord(topic, partition, offset, 0, None, self.TOPIC[(partition, offset)])

    def records_between(self, topic: str, partition: int, start: int, end: int) -> list[WireRecord]:
        held = sorted((o, v) for (p, o), v in self.TOPIC.items() if p == partition and start <= o < end)
        return [WireRecord(topic, partition, offset, 0, None, value) for offset, value in held]

    def close(self) -> None:
        pass


_VALUES = st.one_of(
    st.none(),
    st.sampled_from([b"{not json", b'{"id": "x", "text": "  "}']),
    st.text(min_size=1).map(lambda text: json.dumps({"id": "d", "text": text}).encode()),
)


_COORDINATES = st.tuples(st.integers(0, 2), st.integers(0, 80))


@settings(max_examples=300, deadline=None)
@given(
    topic=st.dictionaries(_COORDINATES, _VALUES, min_size=1, max_size=120),
    budget=st.integers(1, 20_000),
    spool_segments=st.integers(0, 3),
    data=st.data(),
)
def test_every_text_is_the_records_own_whatever_was_kept_spooled_read_or_fetched(
    tmp_path_factory: pytest.TempPathFactory,
    topic: dict[tuple[int, int], bytes | None],
    budget: int,
    spool_segments: int,
    data: st.DataObject,
) -> None:
    """Batches consumed or expected, budgets that drop blocks (to a spool of 4 KB segments, or none), gaps:
    a text is the record's, or None for a gap."""
    reading = InputReading()
    # Mostly coordinates the topic holds (kept, read or fetched), some gaps.
    coordinates = st.one_of(st.sampled_from(sorted(topic)), _COORDINATES)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("stream_dedup.kafka.record_texts.RecordLookup", TopicLookup)
        patch.setattr(TopicLookup, "TOPIC", topic)
        patch.setattr("stream_dedup.kafka.block_spool._MIN_SEGMENT_BYTES", 4096)
        spool = BlockSpool(str(tmp_path_factory.mktemp("spool")), spool_segments * 4096) if spool_segments else None
        kept = RecordTexts(KafkaConnection("127.0.0.1:1"), "documents", reading, budget, spool)
        for _ in range(data.draw(st.integers(1, 8))):
            batch = data.draw(st.lists(coordinates, max_size=30))
            held = [(p, o) for p, o in batch if (p, o) in topic]
            how = data.draw(st.sampled_from(["consumed", "signed", "elsewhere"]))
            if how == "consumed":
                kept.keep([WireRecord("documents", p, o, 0, None, topic[(p, o)]) for p, o in held])
            elif how == "signed":  # read by signers: only the documents, with their texts
                documents = [(c, document_text(topic[c], reading)) for c in held]
                read = [(c, text) for c, text in documents if text is not None]
                sources, encoded = pointers_of([c for c, _ in read]), [text.encode() for _, text in read]
                kept.keep_texts(sources, encoded, text_blocks(sources, encoded, block_compressor()))
            else:  # read elsewhere (a shard's)
                kept.expect(pointers_of(batch))
            asked = data.draw(st.lists(coordinates, max_size=30))
            expected = [document_text(topic[c], reading) if c in topic else None for c in asked]
            assert kept.texts_of(pointers_of(asked)) == expected
        kept.close()


def test_a_text_read_in_its_span_needs_no_fetch_whatever_the_budget() -> None:
    """The span's records are taken from what was read: with little memory, some went to disk, or are gone."""
    topic: dict[tuple[int, int], bytes | None] = {
        (0, offset): json.dumps({"id": f"d{offset}", "text": f"text number {offset} " * 20}).encode()
        for offset in range(200)
    }
    fetched: list[int] = []

    class FetchCounting(TopicLookup):
        def fetch(self, topic_name: str, partition: int, offset: int) -> WireRecord | RecordGone:
            fetched.append(offset)
            return super().fetch(topic_name, partition, offset)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("stream_dedup.kafka.record_texts.RecordLookup", FetchCounting)
        patch.setattr(TopicLookup, "TOPIC", topic)
        kept = texts(cache_bytes=1)
        kept.expect(pointers(0, range(200)))
        assert kept.texts_of(pointers(0, [0])) == [normalize("text number 0 " * 20)]
    assert fetched == []


def pointers_of(coordinates: list[tuple[int, int]]) -> np.ndarray:
    return np.array([(p << 48) | o for p, o in coordinates], dtype=np.uint64)


def test_with_no_broker_the_batch_fails_and_its_next_try_reads_the_texts_once_the_broker_is_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Judging the pair by the estimate instead would make the verdict depend on when the broker was away."""
    broker_up = False

    class BrokerDependent(TopicLookup):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if not broker_up:
                raise KafkaTimeoutError("Unable to bootstrap")

    monkeypatch.setattr("stream_dedup.kafka.record_texts.RecordLookup", BrokerDependent)
    monkeypatch.setattr(TopicLookup, "TOPIC", {(0, 7): json.dumps({"id": "a", "text": "Seven  here"}).encode()})
    kept = texts()
    for _ in range(2):  # each try asks the broker again: no quiet time to judge batches by the estimate in
        with pytest.raises(KafkaError, match="cannot read input records again to settle pairs"):
            kept.texts_of(pointers(0, [7]))
    broker_up = True
    assert kept.texts_of(pointers(0, [7])) == ["seven here"]
    assert kept.take_reads() == {"kafka": 1}


def test_a_record_gone_gives_no_text_and_one_not_given_now_fails_the_batch_until_its_tries_run_out(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A partition that says it ends before the record (re-created under its name) must not hold the stage forever."""

    class Answers(TopicLookup):
        def fetch(self, topic: str, partition: int, offset: int) -> WireRecord | RecordGone:
            if offset == 1:
                return RecordGone("deleted by the topic's retention")
            return RecordGone("documents partition 0 has no offset 2 yet (it ends at offset 2)", lasting=False)

    monkeypatch.setattr("stream_dedup.kafka.record_texts.RecordLookup", Answers)
    kept = texts()
    assert kept.texts_of(pointers(0, [1])) == [None]
    for _ in range(TRIES_BEFORE_GONE - 1):
        with pytest.raises(KafkaError, match=r"input record 0:2 not read again to settle a pair: .* no offset 2 yet"):
            kept.texts_of(pointers(0, [1, 2]))
    assert not caplog.records
    assert kept.texts_of(pointers(0, [1, 2])) == [None, None]
    assert "input record 0:2 not given in 10 tries" in caplog.text and "taken as gone" in caplog.text
    with pytest.raises(KafkaError):  # counted afresh: what the next batches meet is not taken as gone at once
        kept.texts_of(pointers(0, [2]))


def test_a_batch_past_its_reading_time_fails_and_its_next_try_fetches_only_what_it_had_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    topic = {(0, offset): json.dumps({"id": f"d{offset}", "text": f"text {offset}"}).encode() for offset in range(6)}
    fetched: list[int] = []

    class Slow(TopicLookup):
        def fetch(self, topic_name: str, partition: int, offset: int) -> WireRecord | RecordGone:
            fetched.append(offset)
            time.sleep(0.05)
            return super().fetch(topic_name, partition, offset)

    monkeypatch.setattr("stream_dedup.kafka.record_texts.RecordLookup", Slow)
    monkeypatch.setattr(TopicLookup, "TOPIC", topic)
    monkeypatch.setattr("stream_dedup.kafka.record_texts.FETCH_SECONDS_PER_BATCH", 0.12)
    kept = texts()
    with pytest.raises(KafkaError, match=r"the batch's reads took over 0\.12 s"):
        kept.texts_of(pointers(0, range(6)))
    first_try = list(fetched)
    assert 0 < len(first_try) < 6
    monkeypatch.setattr("stream_dedup.kafka.record_texts.FETCH_SECONDS_PER_BATCH", 60.0)
    assert kept.texts_of(pointers(0, range(6))) == [f"text {offset}" for offset in range(6)]
    assert fetched == first_try + list(range(len(first_try), 6))


def test_a_lookup_gives_up_on_an_absent_broker_within_its_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(KafkaError):
        RecordLookup(KafkaConnection("127.0.0.1:1"), timeout_seconds=1.0)
    assert time.monotonic() - started < 10.0


def test_a_record_judged_as_a_document_that_no_longer_reads_as_one_is_said(
    asked: list[tuple[str, int, int]], caplog: pytest.LogCaptureFixture
) -> None:
    # Reading settings changed since (text_field) or a shard's differing from its signers': the pairs fall back
    # to their estimate, which an operator should hear of (silently, 84 of 1,500 sharded verdicts differed).
    kept = RecordTexts(KafkaConnection("127.0.0.1:1"), "documents", InputReading(text_field="body"))
    kept.keep(records(["written under text_field 'text'", "another"], partition=2))
    with caplog.at_level(logging.WARNING):
        assert kept.texts_of(pointers(2, [0, 1])) == [None, None]
    assert caplog.text.count("holds no document") == 1  # said once, not per record
    assert "input record 2:0 of documents" in caplog.text and "text_field='body'" in caplog.text
