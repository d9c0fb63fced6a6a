"""Hostile records against the real broker: poison pills and records too large for the dead-letter topic."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import pytest
import xxhash
from kafka import KafkaProducer

from tests.corpus import make_clustered_corpus

from .stage import Stage, produce, read_committed, worker_thread

pytestmark = pytest.mark.kafka

#: Below the producer's batch size (256 KiB): the stage must also flush records to it one by one.
DEAD_LETTER_MAX_MESSAGE_BYTES = 64 * 1024


def test_poison_pills_and_dead_letters_too_large_for_their_topic_never_stall_the_stage(
    stage: Stage, topic_factory: Callable[..., str]
) -> None:
    stage.dead_letter_topic = topic_factory(
        partitions=1, configs={"max.message.bytes": str(DEAD_LETTER_MAX_MESSAGE_BYTES)}
    )
    incompressible = os.urandom(300_000)  # fits the input topic, not the dead-letter topic, even compressed
    hostile: list[tuple[bytes, bytes | None, str]] = [
        (b"deep", b"[" * 100_000 + b"]" * 100_000, "too_deep"),
        (b"huge-number", b'{"id": "n", "text": "t", "n": ' + b"9" * 5000 + b"}", "invalid_json"),
        (b"incompressible", incompressible, "invalid_utf8"),
        (b"long-id", json.dumps({"id": "i" * 5000, "text": "some words"}).encode(), "id_too_long"),
    ]
    good = make_clustered_corpus(10, seed=21)
    messages: list[tuple[bytes | None, bytes | None, int | None]] = []
    for i, (key, value, _) in enumerate(hostile):
        messages.append((f"good-{i}".encode(), json.dumps({"text": good[i][0]}).encode(), 0))
        messages.append((key, value, 0))
    messages.append((b"good-last", json.dumps({"text": good[-1][0]}).encode(), 0))
    produce(stage.bootstrap, stage.input_topic, messages)

    with worker_thread(stage.settings()):
        verdicts = read_committed(stage.bootstrap, stage.output_topic, len(hostile) + 1)
        letters = read_committed(stage.bootstrap, stage.dead_letter_topic, len(hostile))

    assert sorted(r.key for r in verdicts) == sorted(
        [*(f"good-{i}".encode() for i in range(len(hostile))), b"good-last"]
    )
    assert [letter.key for letter in letters] == [key for key, _, _ in hostile]
    for letter, (_, value, reason) in zip(letters, hostile, strict=True):
        headers = dict(letter.headers)
        assert headers["stream-dedup-reason"].decode() == reason
        if letter.key == b"incompressible":
            assert headers["stream-dedup-truncated"] == b"value"
            assert headers["stream-dedup-original-bytes"] == b"300000"
            assert headers["stream-dedup-original-xxh3-128"] == xxhash.xxh3_128_hexdigest(value).encode()
            assert value.startswith(letter.value) and len(letter.value) < DEAD_LETTER_MAX_MESSAGE_BYTES
        else:
            assert letter.value == value and "stream-dedup-truncated" not in headers


class _BytesName(str):
    """A header name kafka-python writes as the given bytes: as librdkafka and Go clients may, not UTF-8."""

    def __new__(cls, raw: bytes) -> _BytesName:
        name = super().__new__(cls, raw.decode("utf-8", "replace"))
        name.raw = raw
        return name

    def encode(self, encoding: str = "utf-8", errors: str = "strict") -> bytes:
        return self.raw


def test_a_header_name_that_is_not_utf8_is_read_as_java_reads_it_and_forwarded(
    stage: Stage, topic_factory: Callable[..., str]
) -> None:
    unique_topic = topic_factory(partitions=1)
    texts = ["a first record, about one thing", "a second, about another", "and a third, of its own"]
    producer = KafkaProducer(bootstrap_servers=stage.bootstrap)
    for i, text in enumerate(texts):
        headers = [(_BytesName(b"\xff\xfetrace"), b"1")] if i == 1 else []
        producer.send(stage.input_topic, key=f"doc-{i}".encode(), value=text.encode(), partition=0, headers=headers)
    producer.flush(30)
    producer.close()

    with worker_thread(stage.settings(input_format="text", unique_topic=unique_topic)):
        verdicts = read_committed(stage.bootstrap, stage.output_topic, len(texts))
        forwarded = read_committed(stage.bootstrap, unique_topic, 1)

    assert sorted(r.key for r in verdicts) == [b"doc-0", b"doc-1", b"doc-2"]
    assert [r.headers for r in forwarded if r.key == b"doc-1"] == [[("\ufffd\ufffdtrace", b"1")]]
