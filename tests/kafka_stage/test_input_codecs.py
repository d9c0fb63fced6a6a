"""An input topic whose producers compress with any of Kafka's codecs, against the real broker.

Producers pick their own ``compression.type`` (Java clients, Connect and
Logstash often lz4 or snappy); the stage must read every one of them, and stop
with a message naming the codec, rather than restart for ever, on a batch it
cannot decompress.
"""

from __future__ import annotations

import json

import pytest
from kafka import KafkaProducer

from stream_dedup.errors import UnreadableBatchError
from stream_dedup.roles.launch import role_runner
from stream_dedup.worker.loop import Worker
from tests.corpus import make_clustered_corpus

from .stage import VERDICT_CORE, Stage, document_messages, expected_verdicts, failure_of, read_committed, worker_thread

pytestmark = pytest.mark.kafka

CODECS = ("gzip", "snappy", "lz4", "zstd")


def produce_compressed(stage: Stage, messages: list[tuple[bytes, bytes, int, int]], codec: str) -> None:
    producer = KafkaProducer(bootstrap_servers=stage.bootstrap, compression_type=codec, linger_ms=20)
    try:
        for key, value, partition, timestamp in messages:
            producer.send(stage.input_topic, key=key, value=value, partition=partition, timestamp_ms=timestamp)
        producer.flush(60)
    finally:
        producer.close()


def test_records_compressed_with_every_codec_get_the_verdicts_of_one_run(stage: Stage) -> None:
    corpus = make_clustered_corpus(400, seed=5)
    messages = document_messages(corpus, partitions=3)
    # Consecutive slices: each partition holds batches of every codec, near-copies across codecs.
    size = -(-len(messages) // len(CODECS))
    for start, codec in zip(range(0, len(messages), size), CODECS, strict=True):
        produce_compressed(stage, messages[start : start + size], codec)

    with worker_thread(stage.settings(batch_size=100)):
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))

    expected = expected_verdicts(corpus)
    published = {v["id"]: {k: v[k] for k in VERDICT_CORE} for v in (json.loads(r.value) for r in records)}
    assert len(records) == len(corpus)
    assert published == expected
    assert sum(v["verdict"] == "duplicate" for v in expected.values()) > 50


@pytest.mark.parametrize("role", ["all", "signer"])
def test_a_batch_of_a_codec_this_installation_cannot_read_stops_the_stage_naming_it(
    stage: Stage, monkeypatch: pytest.MonkeyPatch, role: str
) -> None:
    corpus = make_clustered_corpus(20, seed=6)
    produce_compressed(stage, document_messages(corpus, partitions=3), "lz4")
    # As on an installation without the lz4 library (kafka-python's lz4 is an optional extra).
    monkeypatch.setattr("kafka.codec.has_lz4", lambda: False)

    failure = failure_of(stage.settings(role=role, batch_size=10), runner=role_runner if role == "signer" else Worker)

    assert isinstance(failure, UnreadableBatchError)
    assert "lz4" in str(failure) and "kafka-python[crc32c,lz4,snappy,zstd]" in str(failure)
