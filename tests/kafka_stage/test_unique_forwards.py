"""A judge's forwards on the real broker: records read again as they were, dead letters for what cannot be forwarded."""

from __future__ import annotations

import base64
import random
from collections.abc import Callable

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError

from stream_dedup.kafka.messages import Source
from stream_dedup.kafka.oversized_batches import BATCH_BYTES_CAP, BatchBound
from stream_dedup.kafka.record_fit import SizeLimit
from stream_dedup.roles.unique_forwards import UniqueForwards

from .stage import Stage, produce_one_batch

pytestmark = pytest.mark.kafka


def test_forwards_are_the_input_records_and_what_cannot_be_forwarded_is_dead_lettered_with_why(
    stage: Stage, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=2)
    producer = KafkaProducer(bootstrap_servers=stage.bootstrap)
    values = [f'{{"id": "d{i}", "text": "document {i}"}}'.encode() for i in range(6)]
    values[4] = b'{"id": "d4", "text": "' + base64.b64encode(random.Random(4).randbytes(12_000)) + b'"}'
    for i, value in enumerate(values):
        producer.send(topic, key=f"d{i}".encode(), value=value, partition=i % 2, headers=[("origin", b"crawler")])
    producer.flush()
    producer.close()
    # Retention deleted partition 0's first record (d0) while the judge lagged.
    admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap)
    admin.delete_records({TopicPartition(topic, 0): 1})
    admin.close()
    forwards = UniqueForwards(stage.settings().connection(), "uniques", "letters", BatchBound())
    uniques = [(f"d{i}", Source(topic, i % 2, i // 2, 0)) for i in (0, 1, 2, 3, 4, 5)]

    try:
        sends, reasons = forwards.sends(uniques, {"uniques": SizeLimit(message_bytes=4096)})
    finally:
        forwards.close()

    assert reasons == ["unique_record_gone", "unique_too_large"]
    assert [(s.topic, s.record.key) for s in sends] == [
        ("letters", b"d0"),
        ("uniques", b"d1"),
        ("uniques", b"d2"),
        ("uniques", b"d3"),
        ("letters", b"d4"),
        ("uniques", b"d5"),
    ]
    for send in sends[1:4] + sends[5:]:
        number = int(send.record.key.decode()[1:])
        assert send.record.value == values[number] and send.record.headers == [("origin", b"crawler")]
    gone = dict(sends[0].record.headers)
    assert sends[0].record.value is None
    assert gone["stream-dedup-reason"] == b"unique_record_gone"
    assert b"deleted by the topic's retention" in gone["stream-dedup-error"]
    assert (gone["stream-dedup-source-partition"], gone["stream-dedup-source-offset"]) == (b"0", b"0")
    too_large = dict(sends[4].record.headers)
    assert too_large["stream-dedup-reason"] == b"unique_too_large" and sends[4].record.value == values[4]
    # Worded as by the single-process stage: a sharded stage's dead letters are the same.
    assert too_large["stream-dedup-error"] == (
        b"the forward does not fit topic 'uniques' (its max.message.bytes or the producer's max_request_size)"
    )


def test_a_record_that_could_not_be_read_now_fails_the_step_instead_of_being_dead_lettered(
    stage: Stage, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=1)
    forwards = UniqueForwards(stage.settings().connection(), "uniques", "letters", BatchBound())
    try:
        with pytest.raises(KafkaError, match=r"'d9' not read again to forward: .* has no offset 9 yet"):
            forwards.sends([("d9", Source(topic, 0, 9, 0))], {})
    finally:
        forwards.close()


def test_a_document_of_a_batch_its_signer_read_is_read_again_however_far_that_batch_decompresses(
    stage: Stage, topic_factory: Callable[..., str]
) -> None:
    """With ``max_document_bytes`` past 16 MiB a signer reads compressed batches past the 64 MiB the stage's own
    topics are read to: the judge reads them again as far, rather than forward stand-ins without key or value
    (which kafka-python refuses to send: the judge failed that step at every restart)."""
    topic = topic_factory(partitions=1)
    # 7 documents of 10 MiB in one zstd batch: 70 MiB decompressed, a few KB on the wire.
    values = [b'{"id": "big-%d", "text": "' % i + b"w%d " % i * ((10 << 20) // 3) + b'"}' for i in range(7)]
    assert sum(map(len, values)) > BATCH_BYTES_CAP
    produce_one_batch(stage.bootstrap, topic, [(f"big-{i}".encode(), v) for i, v in enumerate(values)], 0)
    settings = stage.settings(role="judge", input_topic=topic, unique_topic="uniques", max_document_bytes=100 << 20)
    forwards = UniqueForwards.of(settings)
    assert forwards is not None

    try:
        sends, reasons = forwards.sends([(f"big-{i}", Source(topic, 0, i, 0)) for i in range(7)], {})
    finally:
        forwards.close()

    assert reasons == []
    assert [(s.topic, s.record.key, s.record.value) for s in sends] == [
        ("uniques", f"big-{i}".encode(), value) for i, value in enumerate(values)
    ]
