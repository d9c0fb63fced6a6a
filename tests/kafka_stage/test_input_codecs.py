"""An input topic whose producers compress with any of Kafka's codecs, against the real broker.

Producers pick their own ``compression.type`` (Java clients, Connect and
Logstash often lz4 or snappy); the stage must read every one of them, and stop
with a message naming the codec, rather than restart for ever, on a batch it
cannot decompress. A batch that would decompress past what the stage reads (a
"zip bomb") is dead-lettered offset by offset, unread, and the stage goes on.
"""

from __future__ import annotations

import json

import pytest
from kafka import KafkaProducer

from stream_dedup.errors import UnreadableBatchError
from stream_dedup.kafka.oversized_batches import BATCH_TOO_LARGE, RECORD_OVERHEAD_BYTES
from stream_dedup.roles.launch import role_runner
from stream_dedup.worker.loop import Worker
from tests.corpus import make_clustered_corpus

from .stage import (
    VERDICT_CORE,
    Stage,
    document_messages,
    expected_verdicts,
    failure_of,
    produce_one_batch,
    read_committed,
    role_threads,
    worker_thread,
)
from .test_roles import sequenced_batches

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


def produce_bomb(stage: Stage, partition: int, records: int, value_bytes: int, timestamp: int) -> list[int]:
    """One zstd batch of ``records`` records of ``value_bytes`` zeros (a few KB on the wire); their offsets."""
    zeros = bytes(value_bytes)
    return produce_one_batch(stage.bootstrap, stage.input_topic, [(None, zeros)] * records, partition, timestamp)


@pytest.mark.parametrize("role", ["all", "signer"])
def test_a_batch_decompressing_past_its_bound_is_dead_lettered_offset_by_offset_and_the_stage_goes_on(
    stage: Stage, role: str
) -> None:
    corpus = make_clustered_corpus(90, seed=8)
    messages = document_messages(corpus, partitions=3)
    half = len(messages) // 2
    produce_compressed(stage, messages[:half], "zstd")
    # 4 records of 4 MiB in one batch, between the good ones; a stage reading documents of 64 KiB at most
    # decompresses a batch of 4 records to 4 x (64 KiB + the records' overhead) at most.
    offsets = produce_bomb(stage, 1, 4, 4 << 20, messages[half][3])
    produce_compressed(stage, messages[half:], "zstd")
    assert offsets == list(range(offsets[0], offsets[0] + 4))
    settings = stage.settings("signer-1" if role == "signer" else "worker-1", role=role, max_document_bytes=65536)

    if role == "all":
        with worker_thread(settings):
            verdicts = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
            letters = read_committed(stage.bootstrap, stage.dead_letter_topic, 4)
        published = [json.loads(r.value) for r in verdicts]
        assert len(published) == len(corpus)  # each once
        assert {v["id"]: {k: v[k] for k in VERDICT_CORE} for v in published} == expected_verdicts(corpus)
    else:
        with role_threads(settings):
            letters = read_committed(stage.bootstrap, stage.dead_letter_topic, 4)
            batches = sequenced_batches(stage.bootstrap, settings.sequenced_topic, settings.detection)
        sequenced = [doc_id for batch in batches for doc_id in batch.entry.documents.ids]
        assert sorted(sequenced) == sorted(f"doc-{i}" for i in range(len(corpus)))  # each once

    assert len(letters) == 4
    limit = 4 * (65536 + RECORD_OVERHEAD_BYTES)
    for letter, offset in zip(letters, offsets, strict=True):
        headers = dict(letter.headers)
        assert headers["stream-dedup-reason"] == BATCH_TOO_LARGE.encode()
        assert headers["stream-dedup-source-partition"] == b"1"
        assert headers["stream-dedup-source-offset"] == str(offset).encode()
        detail = headers["stream-dedup-error"].decode()
        assert f"partition 1 at offsets {offsets[0]}..{offsets[-1]}" in detail and "zstd" in detail
        assert f"more than {limit} bytes" in detail  # the bound: nothing past it was decompressed
        assert letter.key is None and not letter.value
