"""A sharded stage on the real broker: signers, shards and a judge give one process's verdicts, exactly once."""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from stream_dedup.engine.sharding import ShardDetector
from stream_dedup.errors import ChangelogError
from stream_dedup.kafka.clients import never_creating_topics
from stream_dedup.kafka.messages import Source, match_coordinates, verdict_value
from stream_dedup.kafka.record_texts import RecordTexts
from stream_dedup.kafka.sequenced import SequencedBatch, every_batch
from stream_dedup.roles.launch import role_runner
from stream_dedup.worker.events import StepReport, WorkerEvents
from tests.corpus import make_clustered_corpus

from .stage import (
    VERDICT_CORE,
    Message,
    RoleRunner,
    Stage,
    document_messages,
    expected_verdicts,
    failure_of,
    produce,
    read_committed,
    role_threads,
    verdicts_by_source,
    wait_until,
    worker_thread,
)
from .test_lag import lag_seen_from_outside

pytestmark = pytest.mark.kafka

#: Divisible by 1, 2 and 3 shards.
SLOTS = 6


def sequenced_batches(bootstrap: str, topic: str, config: DetectionConfig) -> list[SequencedBatch]:
    """Every batch of the sequenced topic, in order.

    Asking about the topic must not create it: read before the signer made
    it, the broker's default would (retention 1 h), and the signer then
    refuses it as a history that deletes documents.
    """
    consumer = never_creating_topics(
        KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False)
    )
    try:
        return every_batch(consumer, topic, config.signature_fingerprint())
    finally:
        consumer.close()


def one_process_verdicts(
    batches: list[SequencedBatch], config: DetectionConfig, stage: Stage
) -> dict[str, dict[str, Any]]:
    """What one detector publishes for the same sequenced batches, value for value, by document id.

    Pairs near the threshold are settled by the input records' texts, read from the stage's input topic as
    the shards read them.
    """
    detector = make_detector(config)
    settings = stage.settings()
    texts = RecordTexts(settings.connection(), stage.input_topic, settings.input_reading())
    published = {}
    try:
        for batch in batches:
            documents = batch.entry.documents
            verdicts = detector.process_signed(documents, texts)
            for verdict, pointer, event_time in zip(
                verdicts, documents.sources.tolist(), documents.event_times.tolist(), strict=True
            ):
                source = Source(batch.entry.input_topic, *match_coordinates(pointer), round(event_time * 1000))
                published[verdict.id] = json.loads(verdict_value(verdict, source, config.fingerprint()))
    finally:
        texts.close()
    return published


class ShardTextReads(WorkerEvents):
    """Adds up where the texts the shards' steps read came from, and the most memory their kept texts took."""

    def __init__(self) -> None:
        self.reads: Counter[str] = Counter()
        self.kept_in_memory = 0
        self._lock = threading.Lock()

    def step_committed(self, report: StepReport, seconds: float) -> None:
        if report.probes is not None:
            with self._lock:
                self.reads.update(report.probes.text_reads)
                self.kept_in_memory = max(self.kept_in_memory, report.probes.text_kept_bytes.get("memory", 0))


def a_signer_two_shards_and_a_judge(
    stage: Stage, events: WorkerEvents | None = None, **detection: Any
) -> contextlib.AbstractContextManager[list[RoleRunner]]:
    """The roles of a sharded ``stage`` as threads (batches of 100; ``detection`` settings besides); the
    signer's runner first."""
    roles = dict(batch_size=100, index_slots=SLOTS, shards=2, **detection)
    return role_threads(
        stage.settings("signer-1", role="signer", **roles),
        stage.settings("shard-0", role="shard", shard_index=0, **roles),
        stage.settings("shard-1", role="shard", shard_index=1, **roles),
        stage.settings("judge-1", role="judge", **roles),
        events=events,
    )


def check_one_process_verdicts_once(
    stage: Stage, records: list[Any], sequenced: str, documents: int, config: DetectionConfig | None = None
) -> tuple[list[dict[str, Any]], list[SequencedBatch]]:
    """Each of ``documents`` got one verdict, the one a single process with ``config`` (default: the
    default settings on ``SLOTS`` slots) gives on the sequenced topic; returns the verdicts published and
    the sequenced batches."""
    published = [json.loads(r.value) for r in records]
    assert all(len(verdicts) == 1 for verdicts in verdicts_by_source(published).values())
    assert len(published) == documents
    config = config or DetectionConfig(index_slots=SLOTS)
    batches = sequenced_batches(stage.bootstrap, sequenced, config)
    assert sum(len(b.entry.documents.ids) for b in batches) == documents
    assert {v["id"]: v for v in published} == one_process_verdicts(batches, config, stage)
    return published, batches


@pytest.mark.parametrize(
    ("detection", "duplicates"),
    [({}, 150), ({"method": "simhash", "max_hamming": 6, "max_bucket_size": 4}, 100)],
    ids=["minhash", "simhash"],
)
def test_a_signer_two_shards_and_a_judge_publish_what_one_process_would(
    stage: Stage, topic_factory: Callable[..., str], detection: dict[str, Any], duplicates: int
) -> None:
    corpus = make_clustered_corpus(1500, seed=31)
    messages = document_messages(corpus, partitions=3)
    produce(stage.bootstrap, stage.input_topic, messages)
    unique_topic = topic_factory(partitions=3)
    events = ShardTextReads()
    with a_signer_two_shards_and_a_judge(stage, events, unique_topic=unique_topic, **detection) as runners:
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
        sequenced = runners[0].settings.sequenced_topic
        config = runners[0].settings.detection
        forwarded = read_committed(stage.bootstrap, unique_topic, 1)

    published, batches = check_one_process_verdicts_once(stage, records, sequenced, len(corpus), config)
    # The signer sequenced the backlog in event-time order across partitions, as one process judges it.
    assert {v["id"]: {k: v[k] for k in VERDICT_CORE} for v in published} == expected_verdicts(corpus, config)
    check_unique_records_forwarded_once(published, messages, forwarded)
    assert sum(v["verdict"] == "duplicate" for v in published) > duplicates
    assert {r.key for r in records} == {v["id"].encode() for v in published}
    # Matches were found on both shards: the judge really merged.
    owners = ShardDetector(config, 0, 2).owners
    owner = {
        doc_id: int(shard)
        for batch in batches
        for doc_id, shard in zip(batch.entry.documents.ids, owners(batch.entry.documents), strict=True)
    }
    assert {owner[v["duplicate_of"]] for v in published if v["duplicate_of"]} == {0, 1}
    # A shard reads the texts of pairs near the threshold again: its batch's from the input topic, then
    # kept; never none, and never from a batch of its own (it reads signatures, not texts).
    if config.settles_with_texts:
        assert events.reads["kafka"] > 0 and events.reads["none"] == 0 and events.reads["batch"] == 0
        assert events.kept_in_memory > 0  # what was read is kept
    else:
        assert events.reads.total() == 0 and events.kept_in_memory == 0


def check_unique_records_forwarded_once(
    published: list[dict[str, Any]], messages: Sequence[Message], forwarded: list[Any]
) -> None:
    """The unique topic holds the input record of each document published unique (keyed by its id), once, key and
    value as sent."""
    unique = {v["id"].encode() for v in published if v["verdict"] == "unique"}
    expected = sorted((key, value) for key, value, *_ in messages if key in unique)
    assert sorted((r.key, r.value) for r in forwarded) == expected
    assert len(expected) > 100


def test_three_shards_and_a_judge_reading_a_workers_changelog_publish_the_workers_verdicts(
    stage: Stage, topic_factory: Callable[..., str]
) -> None:
    """The worker's changelog is a sequenced topic: a shard set can start from it and agree with the worker,
    and commit up to its end."""
    corpus = make_clustered_corpus(1200, seed=32)
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    # A slot admits one document per key here: caps bind (~700 skips over this corpus).
    worker = stage.settings("worker-1", batch_size=150, index_slots=SLOTS, max_bucket_size=4)
    with worker_thread(worker):
        by_worker = [json.loads(r.value) for r in read_committed(stage.bootstrap, stage.output_topic, len(corpus))]
        # Quiet, it commits past the input's markers: its changelog ends with a batch of no document.
        wait_until(
            lambda: set(lag_seen_from_outside(stage.bootstrap, stage.group_id, stage.input_topic).values()) == {0},
            60,
            "the worker to commit past the input's markers",
        )
    sharded_output = topic_factory(partitions=3)
    roles = dict(
        group_id=f"sharded-{stage.group_id}",
        output_topic=sharded_output,
        sequenced_topic=worker.changelog_topic,
        batch_size=150,
        index_slots=SLOTS,
        max_bucket_size=4,
        shards=3,
    )
    judge = stage.settings("judge-1", role="judge", **roles)
    with role_threads(
        *(stage.settings(f"shard-{k}", role="shard", shard_index=k, **roles) for k in range(3)),
        judge,
    ):
        by_shards = [json.loads(r.value) for r in read_committed(stage.bootstrap, sharded_output, len(corpus))]
        # A judge that left that batch out (no verdict to give) stayed before it and its marker for good.
        for topic in (worker.changelog_topic, judge.answers_topic):
            wait_until(
                lambda topic=topic: (
                    set(lag_seen_from_outside(stage.bootstrap, judge.role_group_id, topic).values()) == {0}
                ),
                30,
                f"the judge's committed offsets of {topic} to reach its ends",
            )

    assert len(by_shards) == len(by_worker) == len(corpus)
    assert {v["id"]: v for v in by_shards} == {v["id"]: v for v in by_worker}
    assert sum(v["verdict"] == "duplicate" for v in by_worker) > 150


def committed_offset(bootstrap: str, group: str, partition: TopicPartition) -> int | None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return consumer.committed(partition)
    finally:
        consumer.close()


def commit_offset(bootstrap: str, group: str, partition: TopicPartition, offset: int) -> None:
    """What ``kafka-consumer-groups.sh --reset-offsets --to-offset`` does, for a group with no member."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        consumer.assign([partition])
        consumer.commit({partition: OffsetAndMetadata(offset, "", -1)})
    finally:
        consumer.close()


def test_going_from_two_shards_to_three_as_documented_keeps_every_verdict_once_and_the_same(stage: Stage) -> None:
    """docs/scale-out.md, "Changing the number of shards": a new set rebuilds, then the judges switch."""
    corpus = make_clustered_corpus(1500, seed=33)
    messages = document_messages(corpus, partitions=3)
    old = dict(batch_size=50, index_slots=SLOTS, shards=2)
    new = dict(old, shards=3, group_id=f"{stage.group_id}-3", sequenced_topic=f"{stage.group_id}.sequenced")
    with contextlib.ExitStack() as running:
        running.enter_context(
            role_threads(
                stage.settings("signer-1", role="signer", **old),
                *(stage.settings(f"shard-{k}", role="shard", shard_index=k, **old) for k in range(2)),
            )
        )
        old_judge = contextlib.ExitStack()
        old_judge.enter_context(role_threads(stage.settings("judge-1", role="judge", **old)))
        produce(stage.bootstrap, stage.input_topic, messages[:600])
        read_committed(stage.bootstrap, stage.output_topic, 600, settle=0.5)
        # 1. The new set rebuilds from the sequenced topic while the old one keeps publishing.
        running.enter_context(
            role_threads(*(stage.settings(f"shard-{k}", role="shard", shard_index=k, **new) for k in range(3)))
        )
        produce(stage.bootstrap, stage.input_topic, messages[600:1000])
        # 2. The old judge stops at X; the new one starts from X.
        old_judge.close()
        sequenced = TopicPartition(f"{stage.group_id}.sequenced", 0)
        switch_at = committed_offset(stage.bootstrap, f"{stage.group_id}.judge", sequenced)
        assert switch_at is not None and switch_at > 0
        commit_offset(stage.bootstrap, f"{stage.group_id}-3.judge", sequenced, switch_at)
        running.enter_context(role_threads(stage.settings("judge-1", role="judge", **new)))
        produce(stage.bootstrap, stage.input_topic, messages[1000:])
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
        # 3. The old shards stop (here with everything else).

    published = [json.loads(r.value) for r in records]
    assert all(len(verdicts) == 1 for verdicts in verdicts_by_source(published).values())
    assert len(published) == len(corpus)
    config = DetectionConfig(index_slots=SLOTS)
    batches = sequenced_batches(stage.bootstrap, sequenced.topic, config)
    assert {v["id"]: v for v in published} == one_process_verdicts(batches, config, stage)
    # Both sets published: the switch happened mid-stream.
    assert 0 < switch_at < batches[-1].offset


def test_a_signer_of_other_signature_parameters_appends_nothing_to_the_sequenced_topic(stage: Stage) -> None:
    """An upgrade (a default that changed) or a changed setting must not leave records of two signature
    parameters in the sequenced topic: shards refuse the new ones, and going back to the old settings then
    meets them too, so that neither setting could run on (a new group_id the only way on)."""
    corpus = make_clustered_corpus(400, seed=37)
    messages = document_messages(corpus, partitions=3)
    produce(stage.bootstrap, stage.input_topic, messages[:300])
    signer = stage.settings("signer-1", role="signer", batch_size=100, shards=2, index_slots=SLOTS)
    config = signer.detection

    def sequenced_documents() -> int:
        batches = sequenced_batches(stage.bootstrap, signer.sequenced_topic, config)
        return sum(len(batch.entry.documents.ids) for batch in batches)

    with role_threads(signer):
        wait_until(lambda: sequenced_documents() == 300, 60, "the signer's 300 documents")
    produce(stage.bootstrap, stage.input_topic, messages[300:])
    changed = stage.settings("signer-1", role="signer", batch_size=100, shards=2, index_slots=SLOTS, shingle_size=4)

    failure = failure_of(changed, runner=role_runner)

    assert isinstance(failure, ChangelogError), failure
    assert f"topic {signer.sequenced_topic!r}" in str(failure)
    assert "other signature parameters" in str(failure) and "new group_id" in str(failure)
    assert sequenced_documents() == 300  # nothing appended: the old settings still run on
    with role_threads(signer):
        wait_until(lambda: sequenced_documents() == 400, 60, "the last 100 documents")
