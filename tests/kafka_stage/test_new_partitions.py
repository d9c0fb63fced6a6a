"""Partitions added to the input while the stage runs: read within seconds, each record judged once."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewPartitions

from stream_dedup.kafka.clients import INPUT_METADATA_MAX_AGE_MS, KafkaConnection
from stream_dedup.kafka.record_lookup import RecordGone, RecordLookup

from .clear_corpus import brute_force_verdicts, clear_corpus
from .stage import Message, make_stage, produce, read_committed, worker_thread

pytestmark = pytest.mark.kafka


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_partitions({topic: NewPartitions(total_count=total)})
    finally:
        admin.close()


def messages(corpus: list[tuple[str, int]], ids: range, partitions: int, first_ms: int) -> list[Message]:
    """The corpus's documents ``ids`` spread over ``partitions``, stamped in order."""
    record = {i: json.dumps({"id": f"doc-{i}", "text": corpus[i][0]}).encode() for i in ids}
    return [(f"doc-{i}".encode(), record[i], i % partitions, first_ms + i) for i in ids]


def test_partitions_added_while_running_are_read_within_the_metadata_refresh_and_judged_once(
    kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path
) -> None:
    """Kafka's default refresh (5 min) left their records unread that long: an original there came after its copy."""
    stage = make_stage(kafka_bootstrap, topic_factory, tmp_path)
    corpus = clear_corpus(originals=60, copies=60)
    now = int(time.time() * 1000)
    produce(kafka_bootstrap, stage.input_topic, messages(corpus, range(60), 3, now))
    with worker_thread(stage.settings(batch_size=20)):
        read_committed(kafka_bootstrap, stage.output_topic, 60, settle=0.5)
        add_partitions(kafka_bootstrap, stage.input_topic, 5)
        produce(kafka_bootstrap, stage.input_topic, messages(corpus, range(60, 120), 5, now + 1_000))
        started = time.monotonic()
        records = read_committed(kafka_bootstrap, stage.output_topic, 120, timeout=60, settle=2)
        waited = time.monotonic() - started

    verdicts = [json.loads(r.value) for r in records]
    assert sorted(v["id"] for v in verdicts) == sorted(f"doc-{i}" for i in range(120))
    assert {v["source"]["partition"] for v in verdicts} == {0, 1, 2, 3, 4}
    assert waited < 3 * INPUT_METADATA_MAX_AGE_MS / 1000 + 10
    truth = brute_force_verdicts([(f"doc-{i}", text) for i, (text, _) in enumerate(corpus)])
    assert {v["id"]: v["verdict"] for v in verdicts} == truth


def test_records_of_partitions_added_since_a_lookup_listed_the_topics_are_read_again(
    kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    """Its metadata was its last listing's (up to 10 s old): "no partition", for good, and a judge dead-lettered
    the unique documents read there as ``unique_record_gone`` instead of forwarding them."""
    topic = topic_factory(partitions=1)
    produce(kafka_bootstrap, topic, [(b"k", b"before", 0)])
    with RecordLookup(KafkaConnection(kafka_bootstrap), timeout_seconds=20) as lookup:
        assert lookup.fetch(topic, 0, 0).value == b"before"  # the topics listed
        assert len(lookup.records_between(topic, 0, 0, 1)) == 1  # and the metadata update it began, received
        add_partitions(kafka_bootstrap, topic, 2)
        produce(kafka_bootstrap, topic, [(b"k", b"spanned", 1)])
        assert [r.value for r in lookup.records_between(topic, 1, 0, 1)] == [b"spanned"]
        add_partitions(kafka_bootstrap, topic, 3)
        produce(kafka_bootstrap, topic, [(b"k", b"fetched", 2)])
        assert lookup.fetch(topic, 2, 0).value == b"fetched"
        assert isinstance(lookup.fetch(topic, 3, 0), RecordGone)
