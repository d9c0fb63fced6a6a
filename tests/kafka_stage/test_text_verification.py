"""On the broker: pairs too near the threshold for the sketch are settled by the input records' texts.

Real prose with copies edited at graded strengths, spread over three
partitions and judged in small batches, so that most matches were read in
an earlier batch and their records are read again from the input topic.
The published verdicts are exact brute force's, as the offline command's are.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError

from benchmarks.corpus import planted_stream
from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.record_lookup import RecordGone, RecordLookup
from stream_dedup.kafka.record_texts import RecordTexts
from stream_dedup.text import normalize_all
from stream_dedup.text.shingle_sets import ShingleSets, exact_jaccard
from stream_dedup.worker.events import BatchReport, WorkerEvents
from stream_dedup.worker.settings import WorkerSettings
from tests.real_text import stdlib_paragraphs

from .stage import Stage, document_messages, produce, produce_one_batch, read_committed, worker_thread

pytestmark = pytest.mark.kafka


class Settled(WorkerEvents):
    """Counts the pairs the worker settled by text, and those it could not."""

    def __init__(self) -> None:
        self.settled = self.unsettled = 0
        self.reads: Counter[str] = Counter()
        #: What the kept texts took after the last batch, by place.
        self.kept: dict[str, int] = {}

    def batch_committed(self, report: BatchReport) -> None:
        self.settled += report.settled_by_text
        self.unsettled += report.unsettled
        self.reads.update(report.text_reads)
        self.kept = dict(report.text_kept_bytes)


def brute_force_duplicates(texts: list[str]) -> list[bool]:
    """Whether each document has an earlier one at exact Jaccard >= 0.8 (the stage's shingle hashes)."""
    hasher = DetectionConfig().hasher()
    sets = ShingleSets.of_texts(normalize_all(texts), hasher.shingling, hasher.seed)
    return [False] + [
        bool(exact_jaccard(sets.take(np.full(i, i)), sets.take(np.arange(i))).max() >= 0.8)
        for i in range(1, len(texts))
    ]


@pytest.mark.parametrize("signing_processes", [0, 1], ids=["signed-in-place", "texts-from-a-signer-process"])
def test_verdicts_near_the_threshold_are_brute_forces(stage: Stage, signing_processes: int) -> None:
    texts = [d.text for d in planted_stream(500, dup_fraction=0.4, seed=9, paragraphs=stdlib_paragraphs())]
    truth = brute_force_duplicates(texts)
    sketch_only = make_detector(DetectionConfig()).process([f"doc-{i}" for i in range(len(texts))], texts)
    assert [v.verdict == "duplicate" for v in sketch_only] != truth  # the stream is hard for the sketch alone
    produce(stage.bootstrap, stage.input_topic, document_messages([(t, 0) for t in texts], partitions=3))
    events = Settled()
    settings = stage.settings(batch_size=25, signing_processes=signing_processes)
    with worker_thread(settings, events=events):
        records = read_committed(stage.bootstrap, stage.output_topic, len(texts))
    verdicts = {v["id"]: v for v in (json.loads(r.value) for r in records)}
    assert [verdicts[f"doc-{i}"]["verdict"] == "duplicate" for i in range(len(texts))] == truth
    assert events.settled > 0 and events.unsettled == 0


@pytest.mark.parametrize("spool_mb", [1, 0], ids=["texts-let-go-read-from-disk", "no-spool-texts-fetched"])
def test_texts_the_memory_lets_go_come_from_the_disk_spool_else_from_kafka(
    stage: Stage, monkeypatch: pytest.MonkeyPatch, spool_mb: int
) -> None:
    """16 KB of text cache for 500 documents: earlier texts are read from disk, or fetched without a spool."""
    monkeypatch.setattr(WorkerSettings, "text_cache_bytes", property(lambda _: 16 << 10))
    texts = [d.text for d in planted_stream(500, dup_fraction=0.4, seed=9, paragraphs=stdlib_paragraphs())]
    truth = brute_force_duplicates(texts)
    produce(stage.bootstrap, stage.input_topic, document_messages([(t, 0) for t in texts], partitions=3))
    events = Settled()
    settings = stage.settings(batch_size=25, signing_processes=0, text_spool_mb=spool_mb)
    with worker_thread(settings, events=events):
        records = read_committed(stage.bootstrap, stage.output_topic, len(texts))
    verdicts = {v["id"]: v for v in (json.loads(r.value) for r in records)}
    assert [verdicts[f"doc-{i}"]["verdict"] == "duplicate" for i in range(len(texts))] == truth
    assert events.unsettled == 0 and events.reads["none"] == 0
    if spool_mb:
        assert events.reads["disk"] > 0 and events.reads["kafka"] == 0
    else:
        assert events.reads["disk"] == 0 and events.reads["kafka"] > 0
    assert events.reads["batch"] > 0 and events.reads["memory"] > 0
    # Memory full to its 16 KB (less the lookup's 2 KB); the rest of the 500 texts on disk, within the spool's 1 MB.
    assert 8 << 10 < events.kept["memory"] <= 14 << 10
    assert (0 < events.kept["disk"] <= 1 << 20) if spool_mb else events.kept["disk"] == 0


def test_texts_not_read_now_fail_their_batch_which_is_judged_again_to_the_same_verdicts(
    stage: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No broker for the first lookup, then a fetch that times out: judged by the estimate instead, those
    batches' pairs near the threshold would have other verdicts than an uninterrupted run's."""
    monkeypatch.setattr(WorkerSettings, "text_cache_bytes", property(lambda _: 16 << 10))  # earlier texts fetched
    failures: list[str] = []

    class Unreliable(RecordLookup):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if not failures:
                failures.append("no broker")
                raise KafkaTimeoutError("Unable to bootstrap from 127.0.0.1:19092")
            super().__init__(*args, **kwargs)

        def fetch(self, topic: str, partition: int, offset: int) -> Any:
            if len(failures) == 1:
                failures.append(f"fetch of {partition}:{offset}")
                return RecordGone("not fetched within 10 s", lasting=False)
            return super().fetch(topic, partition, offset)

    monkeypatch.setattr("stream_dedup.kafka.record_texts.RecordLookup", Unreliable)
    texts = [d.text for d in planted_stream(500, dup_fraction=0.4, seed=9, paragraphs=stdlib_paragraphs())]
    produce(stage.bootstrap, stage.input_topic, document_messages([(t, 0) for t in texts], partitions=3))
    events = Settled()
    with worker_thread(stage.settings(batch_size=25, signing_processes=0, text_spool_mb=0), events=events):
        records = read_committed(stage.bootstrap, stage.output_topic, len(texts))
    verdicts = {v["id"]: v for v in (json.loads(r.value) for r in records)}
    assert len(failures) == 2 and len(records) == len(texts)
    assert [verdicts[f"doc-{i}"]["verdict"] == "duplicate" for i in range(len(texts))] == brute_force_duplicates(texts)
    assert events.unsettled == 0 and events.reads["none"] == 0 and events.reads["kafka"] > 0


def test_record_texts_gives_normalised_texts_none_for_what_is_gone_and_fails_without_a_broker(stage: Stage) -> None:
    produce(
        stage.bootstrap,
        stage.input_topic,
        [(b"a", b'{"id": "a", "text": "Some  TEXT here"}', 0, 1), (b"b", b"{not json", 0, 2)],
    )
    settings = stage.settings()
    texts = RecordTexts(settings.connection(), stage.input_topic, settings.input_reading())
    try:
        # A document, a record that is not one, the commit marker, no such partition.
        pointers = np.array([0, 1, 2, (7 << 48) | 0], dtype=np.uint64)
        assert texts.texts_of(pointers) == ["some text here", None, None, None]
        with pytest.raises(KafkaError, match=r"not read again to settle a pair: .* has no offset 99 yet"):
            texts.texts_of(np.array([99], dtype=np.uint64))  # past the end: it may come, so the batch is tried again
    finally:
        texts.close()
    unreachable = RecordTexts(KafkaConnection("127.0.0.1:1"), stage.input_topic, settings.input_reading())
    with pytest.raises(KafkaError, match="cannot read input records again"):
        unreachable.texts_of(pointers[:1])  # not read now is not gone: the batch is tried again


def test_a_document_above_16_mib_judged_under_a_larger_max_document_bytes_is_read_again(
    stage: Stage, tmp_path: Path
) -> None:
    """Read again as the stage's input consumer read it: within its batch bound, not the default's 16 MiB."""
    text = "lorem ipsum dolor sit amet " * ((20 << 20) // 27)  # 20 MiB, a few KB compressed
    produce_one_batch(stage.bootstrap, stage.input_topic, [(None, json.dumps({"id": "big", "text": text}).encode())], 0)
    texts = stage.settings(max_document_bytes=32 << 20).record_texts(str(tmp_path))
    assert texts is not None
    try:
        assert texts.texts_of(np.array([0], dtype=np.uint64)) == normalize_all([text])
    finally:
        texts.close()


def test_an_expected_batch_is_read_in_one_span_per_partition_and_aborted_records_are_not_texts(
    stage: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shard's batch: its texts come from one read of each dense span, never from aborted records."""
    paragraphs = list(stdlib_paragraphs()[:120])
    produce(stage.bootstrap, stage.input_topic, [(None, doc(i, t), 0) for i, t in enumerate(paragraphs[:60])])
    aborted = KafkaProducer(bootstrap_servers=stage.bootstrap, transactional_id=f"aborting-{stage.group_id}")
    aborted.init_transactions()
    aborted.begin_transaction()
    aborted.send(stage.input_topic, value=doc(999, "never committed, never a text"), partition=0)
    aborted.flush()
    aborted.abort_transaction()
    aborted.close()
    produce(stage.bootstrap, stage.input_topic, [(None, doc(i, t), 0) for i, t in enumerate(paragraphs[60:], 60)])
    calls: Counter[str] = Counter()
    for method in ("fetch", "records_between"):
        original = getattr(RecordLookup, method)
        monkeypatch.setattr(RecordLookup, method, counted(original, method, calls))
    settings = stage.settings()
    texts = RecordTexts(settings.connection(), stage.input_topic, settings.input_reading())
    try:
        # Offsets: 0-59, a commit marker, the aborted record (61) and its marker, then 63-122: one span.
        batch = np.array([*range(60), *range(63, 123)], dtype=np.uint64)
        texts.expect(batch)
        assert texts.texts_of(batch) == normalize_all(paragraphs)
        assert calls == {"records_between": 1}
        assert texts.texts_of(np.array([61, 62], dtype=np.uint64)) == [None, None]  # read in the span, not kept
    finally:
        texts.close()


def doc(i: int, text: str) -> bytes:
    return json.dumps({"id": f"doc-{i}", "text": text}).encode()


def counted(method: Callable[..., Any], name: str, calls: Counter[str]) -> Callable[..., Any]:
    def counting(*args: Any) -> Any:
        calls[name] += 1
        return method(*args)

    return counting


def test_a_span_partly_deleted_by_retention_gives_the_texts_still_held(stage: Stage) -> None:
    paragraphs = list(stdlib_paragraphs()[:40])
    produce(stage.bootstrap, stage.input_topic, [(None, doc(i, t), 1) for i, t in enumerate(paragraphs)])
    admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap)
    try:
        admin.delete_records({TopicPartition(stage.input_topic, 1): 10})  # offsets 0-9 gone
    finally:
        admin.close()
    settings = stage.settings()
    texts = RecordTexts(settings.connection(), stage.input_topic, settings.input_reading())
    try:
        batch = np.array([(1 << 48) | offset for offset in range(40)], dtype=np.uint64)
        texts.expect(batch)
        assert texts.texts_of(batch) == [None] * 10 + normalize_all(paragraphs[10:])
    finally:
        texts.close()
