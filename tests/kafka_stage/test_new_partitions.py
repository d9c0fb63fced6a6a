"""Partitions added to the input while the stage runs: read within seconds, each record judged once."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import NewPartitions

from stream_dedup.kafka.clients import INPUT_METADATA_MAX_AGE_MS

from .clear_corpus import brute_force_verdicts, clear_corpus
from .stage import Message, make_stage, produce, read_committed, worker_thread

pytestmark = pytest.mark.kafka


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
        admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        admin.create_partitions({stage.input_topic: NewPartitions(total_count=5)})
        admin.close()
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
