"""Event-time order across partitions, and a record that keeps failing its batch, on a real broker."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from stream_dedup.engine.detector import Detector
from stream_dedup.engine.verdict import Verdict
from stream_dedup.lsh.generation import IndexedBatch
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.intake import BatchIntake, buffer_limit
from stream_dedup.worker.isolation import BatchFailures
from tests.corpus import make_corpus

from .stage import Stage, produce, read_committed, worker_thread

pytestmark = pytest.mark.kafka


def doc(doc_id: str, text: str, partition: int, timestamp_ms: int) -> tuple[bytes, bytes, int, int]:
    return doc_id.encode(), json.dumps({"id": doc_id, "text": text}).encode(), partition, timestamp_ms


def test_a_backlog_is_judged_in_timestamp_order_across_partitions(stage: Stage) -> None:
    """The older near-copy is the original, though its partition is fetched after a busier one."""
    texts = make_corpus(301, seed=41)
    now = int(time.time() * 1000)
    # Partition 0: 300 documents, the first a near-copy of the one in partition 1, stamped later.
    messages = [doc(f"late-{i}", texts[i], 0, now + 1000 + i) for i in range(300)]
    messages.append(doc("early", texts[0] + " and one more word", 1, now))
    produce(stage.bootstrap, stage.input_topic, messages)
    with worker_thread(stage.settings(batch_size=100)):
        records = read_committed(stage.bootstrap, stage.output_topic, len(messages))
    verdicts = {v["id"]: v for v in (json.loads(r.value) for r in records)}
    assert verdicts["early"]["verdict"] == "unique"
    assert verdicts["late-0"]["verdict"] == "duplicate" and verdicts["late-0"]["duplicate_of"] == "early"


class _TripsOnOneDocument(Detector):
    """A detector with a bug that one document triggers, every time."""

    def process_signed(self, batch: IndexedBatch) -> list[Verdict]:
        if "poison" in batch.ids:
            raise RuntimeError("the detector trips on this document")
        return super().process_signed(batch)


def test_a_record_that_keeps_failing_its_batch_is_isolated_and_dead_lettered(
    stage: Stage, caplog: pytest.LogCaptureFixture
) -> None:
    texts = make_corpus(40, seed=42)
    now = int(time.time() * 1000)
    messages = [doc(f"d{i}", texts[i], i % 3, now + i) for i in range(40)]
    messages[17] = doc("poison", texts[17], 17 % 3, now + 17)
    produce(stage.bootstrap, stage.input_topic, messages)
    factory: Any = _TripsOnOneDocument
    with caplog.at_level("ERROR", logger="stream_dedup"), worker_thread(stage.settings(batch_size=20), factory):
        verdicts = read_committed(stage.bootstrap, stage.output_topic, 39, timeout=120)
        letters = read_committed(stage.bootstrap, stage.dead_letter_topic, 1, timeout=60)
    assert sorted(json.loads(r.value)["id"] for r in verdicts) == sorted(f"d{i}" for i in range(40) if i != 17)
    (letter,) = letters
    headers = dict(letter.headers)
    assert letter.value == messages[17][1]
    assert headers["stream-dedup-reason"] == b"processing_failed"
    assert b"RuntimeError" in headers["stream-dedup-error"]
    named = [r for r in caplog.records if "fails its batch" in r.getMessage()]
    assert named and getattr(named[0], "partition", None) == 17 % 3


def test_records_of_an_aborted_producer_transaction_never_get_a_verdict(stage: Stage) -> None:
    from kafka import KafkaProducer

    texts = make_corpus(12, seed=43)
    now = int(time.time() * 1000)
    aborted = KafkaProducer(bootstrap_servers=stage.bootstrap, transactional_id=f"aborted-{stage.group_id}")
    try:
        aborted.init_transactions()
        aborted.begin_transaction()
        for i in range(6):
            key, value, partition, timestamp = doc(f"aborted-{i}", texts[i], i % 3, now + i)
            aborted.send(stage.input_topic, key=key, value=value, partition=partition, timestamp_ms=timestamp)
        aborted.flush()
        aborted.abort_transaction()
    finally:
        aborted.close()
    committed = [doc(f"kept-{i}", texts[i], i % 3, now + 100 + i) for i in range(6, 12)]
    produce(stage.bootstrap, stage.input_topic, committed, transactional_id=f"kept-{stage.group_id}")
    with worker_thread(stage.settings(batch_size=4)):
        records = read_committed(stage.bootstrap, stage.output_topic, len(committed), settle=3)
    ids = [json.loads(r.value)["id"] for r in records]
    assert sorted(ids) == sorted(f"kept-{i}" for i in range(6, 12))


def test_a_partition_waiting_for_an_older_backlog_is_paused_not_buffered_without_end(stage: Stage) -> None:
    """Partition 0 is all newer than partition 1's backlog: it may not be fetched into memory meanwhile."""
    now = int(time.time() * 1000)
    count = 3000
    backlog = [doc(f"old-{i}", f"old text {i}", 1, now + i) for i in range(count)]
    newer = [doc(f"new-{i}", f"new text {i}", 0, now + 10 * count + i) for i in range(count)]
    produce(stage.bootstrap, stage.input_topic, newer + backlog)
    consumer = KafkaConsumer(
        bootstrap_servers=stage.bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    try:
        parts = [TopicPartition(stage.input_topic, p) for p in (0, 1)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        intake = BatchIntake(consumer, stage.input_topic, 100, 5.0, BatchFailures(), WorkerEvents())
        intake.restart(parts)
        limit = buffer_limit(100)
        taken: list[Any] = []
        most_buffered, was_paused = 0, False
        deadline = time.monotonic() + 120
        while len(taken) < 2 * count and time.monotonic() < deadline:
            intake.add(consumer.poll(timeout_ms=200, max_records=100))
            most_buffered = max(most_buffered, intake.merge.buffered(0))
            was_paused |= parts[0] in intake.paused
            taken += intake.next_batch()
    finally:
        consumer.close()
    assert [r.value for r in taken] == [v for _, v, _, _ in backlog + newer]  # event-time order, nothing lost
    assert was_paused and most_buffered < limit + 100
