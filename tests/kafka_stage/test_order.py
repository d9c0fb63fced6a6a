"""Event-time order across partitions, and a record that keeps failing its batch, on a real broker."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from stream_dedup.engine.detector import Detector
from stream_dedup.engine.text_verification import DocumentTexts
from stream_dedup.engine.verdict import Verdict
from stream_dedup.lsh.generation import IndexedBatch
from stream_dedup.worker.events import BatchReport, WorkerEvents
from tests.corpus import make_clustered_corpus, make_corpus

from .stage import (
    Stage,
    check_exactly_once,
    document_messages,
    expected_verdicts,
    produce,
    read_committed,
    worker_thread,
)

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


class _JudgedOrder(WorkerEvents):
    """The timestamps of the documents judged, in the order judged, and what the merge held after each poll."""

    def __init__(self) -> None:
        self.timestamps: list[int] = []
        self.buffered: list[int] = []
        self.refetched = 0

    def batch_committed(self, report: BatchReport) -> None:
        self.timestamps += report.timestamps_ms.tolist()

    def records_buffered(self, buffered: int, refetched: int) -> None:
        self.buffered.append(buffered)
        self.refetched += refetched


def test_a_partition_far_ahead_in_event_time_is_held_to_its_buffer_and_judged_in_order(stage: Stage) -> None:
    """A third of a backlog, the newest, is all in partition 0: it waits for the others, not in memory."""
    corpus = make_clustered_corpus(3000, seed=44)
    first = int(time.time() * 1000)
    ahead = len(corpus) * 2 // 3
    # Older documents alternate over partitions 1 and 2; the newest third is partition 0's.
    messages = [
        (
            f"doc-{i}".encode(),
            json.dumps({"id": f"doc-{i}", "text": text}).encode(),
            0 if i >= ahead else 1 + i % 2,
            first + i,
        )
        for i, (text, _) in enumerate(corpus)
    ]
    produce(stage.bootstrap, stage.input_topic, messages)
    limit = 60
    events = _JudgedOrder()
    with worker_thread(stage.settings(batch_size=50, max_partition_buffered_records=limit), events=events):
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
    check_exactly_once([json.loads(r.value) for r in records], expected_verdicts(corpus))
    assert events.timestamps == [first + i for i in range(len(corpus))]  # each judged once, in event-time order
    assert events.refetched > 0  # partition 0 filled its buffer: the bound was reached...
    assert max(events.buffered) <= 3 * limit  # ...and held (unbounded, partition 0 alone buffers ~1000)


def test_the_last_batch_is_reported_committed_without_waiting_for_another(stage: Stage) -> None:
    """Transactions commit in the background: the loop collects the last one even if no more input comes."""
    corpus = make_clustered_corpus(30, seed=45)
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    events = _JudgedOrder()
    with worker_thread(stage.settings(batch_size=1000), events=events):
        read_committed(stage.bootstrap, stage.output_topic, len(corpus), settle=0)
        deadline = time.monotonic() + 10
        while len(events.timestamps) < len(corpus) and time.monotonic() < deadline:
            time.sleep(0.05)
        reported = len(events.timestamps)  # before the stop, which collects every commit anyway
    assert reported == len(corpus)


class _TripsOnOneDocument(Detector):
    """A detector with a bug that one document triggers, every time."""

    def process_signed(self, batch: IndexedBatch, document_texts: DocumentTexts | None = None) -> list[Verdict]:
        if "poison" in batch.ids:
            raise RuntimeError("the detector trips on this document")
        return super().process_signed(batch, document_texts)


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
