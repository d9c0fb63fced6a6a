"""An operator moving the stopped stage's group offsets forward (``kafka-consumer-groups.sh --reset-offsets
--to-latest``, or the admin client's alter offsets): the skipped records get no verdict, as
docs/kafka-stage.md says, and the stage's own lag and its idle commits past the markers start from
the moved offsets, not from where its changelog last judged.
"""

from __future__ import annotations

import json
import logging

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from stream_dedup.worker.settings import WorkerSettings
from tests.corpus import make_clustered_corpus

from .stage import (
    Stage,
    document_messages,
    produce,
    read_committed,
    role_threads,
    verdicts_by_source,
    wait_until,
    worker_thread,
)
from .test_lag import LagReports, lag_seen_from_outside
from .test_roles import sequenced_batches

pytestmark = pytest.mark.kafka


def move_group_offsets(stage: Stage, offsets: dict[int, int], group: str | None = None) -> None:
    """What ``kafka-consumer-groups.sh --reset-offsets`` does to the stopped stage's group (or ``group``)."""
    consumer = KafkaConsumer(
        bootstrap_servers=stage.bootstrap, group_id=group or stage.group_id, enable_auto_commit=False
    )
    try:
        consumer.commit(
            {TopicPartition(stage.input_topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()}
        )
    finally:
        consumer.close()


def ends(stage: Stage) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=stage.bootstrap)
    try:
        partitions = [TopicPartition(stage.input_topic, p) for p in range(3)]
        return {tp.partition: int(o) for tp, o in consumer.end_offsets(partitions).items()}
    finally:
        consumer.close()


def on_partition(corpus: list[tuple[str, int]], first: int, partition: int) -> list[tuple[bytes, bytes, int, int]]:
    """``corpus`` as documents ``doc-first`` on, all on ``partition``."""
    padded = [("", 0)] * first + corpus
    return [(key, value, partition, stamp) for key, value, _, stamp in document_messages(padded, 3)[first:]]


def _judged_60(stage: Stage, corpus: list[tuple[str, int]]) -> WorkerSettings:
    """The stage's settings (batches of 20), once a worker has judged the corpus's first 60 over 3 partitions."""
    settings = stage.settings(batch_size=20)
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus[:60], partitions=3))
    with worker_thread(settings):
        read_committed(stage.bootstrap, stage.output_topic, 60, settle=1)
    return settings


def test_records_skipped_by_offsets_moved_forward_count_no_lag_once_other_partitions_commit(
    stage: Stage, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = make_clustered_corpus(150, seed=31)
    settings = _judged_60(stage, corpus)
    # 30 records more, on partition 0 only; the operator skips them.
    produce(stage.bootstrap, stage.input_topic, on_partition(corpus[60:90], 60, 0))
    move_group_offsets(stage, {0: ends(stage)[0]})
    lag = LagReports()
    with caplog.at_level(logging.WARNING, logger="stream_dedup"), worker_thread(settings, events=lag):
        # Records on the other partitions only: batches that do not move partition 0.
        produce(stage.bootstrap, stage.input_topic, on_partition(corpus[90:], 90, 1))
        verdicts = read_committed(stage.bootstrap, stage.output_topic, 120, settle=2)
        wait_until(lambda: lag.of(stage.input_topic) == {0: 0, 1: 0, 2: 0}, 30, "no lag on any partition")
        wait_until(
            lambda: lag_seen_from_outside(stage.bootstrap, stage.group_id, stage.input_topic) == {0: 0, 1: 0, 2: 0},
            30,
            "the group's committed offsets at the partitions' ends",
        )
    # Taken at once: the changelog, read to its end, has nothing more to come (the take-over waited 45 s for
    # it, transaction_timeout_seconds and 30 s, then said it lagged).
    assert "changelog lags" not in caplog.text
    grouped = verdicts_by_source([json.loads(v.value) for v in verdicts])
    assert len(verdicts) == 120 and all(len(given) == 1 for given in grouped.values())
    assert {json.loads(v.value)["id"] for v in verdicts}.isdisjoint({f"doc-{i}" for i in range(60, 90)})


def test_offsets_moved_past_the_end_resume_at_the_end_rather_than_judge_the_partition_again(
    stage: Stage, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = make_clustered_corpus(90, seed=31)
    settings = _judged_60(stage, corpus)
    # The admin client's alter offsets takes any offset (kafka-consumer-groups.sh would bring it back to the end).
    end = ends(stage)[0]
    move_group_offsets(stage, {0: end + 50})
    lag = LagReports()
    with caplog.at_level(logging.WARNING, logger="stream_dedup"), worker_thread(settings, events=lag):
        wait_until(lambda: lag.of(stage.input_topic) == {0: 0, 1: 0, 2: 0}, 30, "the stage active, lagging by nothing")
        produce(stage.bootstrap, stage.input_topic, on_partition(corpus[60:], 60, 0))
        verdicts = read_committed(stage.bootstrap, stage.output_topic, 90, settle=3)
        wait_until(
            lambda: lag_seen_from_outside(stage.bootstrap, stage.group_id, stage.input_topic) == {0: 0, 1: 0, 2: 0},
            30,
            "the group's committed offsets at the partitions' ends",
        )
    # Partition 0 was read again from its beginning: its 20 documents got second verdicts, duplicates of themselves,
    # with a WARNING blaming a topic created again. Records written past the end are read.
    grouped = verdicts_by_source([json.loads(v.value) for v in verdicts])
    assert len(verdicts) == 90 and len(grouped) == 90
    said = [r.getMessage() for r in caplog.records if "lies past the partition's end" in r.getMessage()]
    assert len(said) == 1 and f"partition 0: the offset to resume at, {end + 50}, " in said[0], caplog.text
    assert "reading it from its beginning" not in caplog.text


def test_a_signer_whose_offsets_were_moved_past_the_end_resumes_there_rather_than_sign_the_partition_again(
    stage: Stage, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = make_clustered_corpus(90, seed=31)
    signer = stage.settings("signer-1", role="signer", batch_size=20)
    config = signer.detection

    def signed() -> list[str]:
        return [
            i for b in sequenced_batches(stage.bootstrap, signer.sequenced_topic, config) for i in b.entry.documents.ids
        ]

    produce(stage.bootstrap, stage.input_topic, document_messages(corpus[:60], partitions=3))
    with role_threads(signer):
        wait_until(lambda: len(signed()) == 60, 60, "60 documents signed")
    end = ends(stage)[0]
    move_group_offsets(stage, {0: end + 50}, signer.role_group_id)
    lag = LagReports()
    with caplog.at_level(logging.WARNING, logger="stream_dedup"), role_threads(signer, events=lag):
        wait_until(lambda: lag.of(stage.input_topic) == {0: 0, 1: 0, 2: 0}, 30, "the signer active, lagging by nothing")
        produce(stage.bootstrap, stage.input_topic, on_partition(corpus[60:], 60, 0))
        wait_until(
            lambda: lag.of(stage.input_topic) == {0: 0, 1: 0, 2: 0} and len(signed()) >= 90, 30, "30 more signed"
        )
    # Partition 0 was read again from its beginning: its 20 documents were signed, so judged, a second time.
    assert sorted(signed()) == sorted(f"doc-{i}" for i in range(90))
    assert "reading it from its beginning" not in caplog.text and "lies past the partition's end" in caplog.text
