"""Records sent by the stage land, once and in order, on the partition Kafka's own partitioner gives their key."""

from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaProducer
from kafka.partitioner.default import murmur2

from stream_dedup.kafka.record_fit import OutgoingRecord, SizeLimit
from stream_dedup.kafka.sending import Send, send_all

from .stage import in_transaction, read_committed


def kafka_partition(key: bytes, partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def by_partition(records: list[Any]) -> dict[int, list[tuple[bytes | None, bytes]]]:
    placed = defaultdict(list)
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        placed[record.partition].append((record.key, record.value))
    return dict(placed)


def test_records_land_once_in_order_where_kafkas_partitioner_puts_their_keys(
    kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    verdicts, other = topic_factory(7), topic_factory(3)
    keys = [f"doc-{i}".encode() for i in range(300)] + [b"", "é-ü-漢字".encode(), b"x" * 333]
    sends = [Send(verdicts, OutgoingRecord(key, f"v{i}".encode(), [])) for i, key in enumerate(keys)]
    # Among them: a large record (kafka-python's send takes it), one with headers, and a
    # record of each other kind to another topic: by key, its own partition, no key at all.
    sends.insert(150, Send(verdicts, OutgoingRecord(b"doc-7", b"L" * 200_000, [])))
    sends.insert(10, Send(verdicts, OutgoingRecord(b"doc-7", b"h", [("reason", b"r"), ("none", None)])))
    sends += [Send(other, OutgoingRecord(b"doc-1", b"o", [])), Send(other, OutgoingRecord(b"doc-1", b"p", []), 0)]
    sends += [Send(other, OutgoingRecord(None, b"n", []))]

    def send(producer: KafkaProducer) -> None:
        producer.send(verdicts, key=b"doc-7", value=b"before", partition=kafka_partition(b"doc-7", 7))
        send_all(producer, sends, {})
        producer.send(verdicts, key=b"doc-7", value=b"after", partition=kafka_partition(b"doc-7", 7))

    in_transaction(kafka_bootstrap, send)
    written = by_partition(read_committed(kafka_bootstrap, verdicts, len(keys) + 4))
    expected = defaultdict(list)
    for s in sends[:-3]:
        expected[kafka_partition(s.record.key or b"", 7)].append((s.record.key, s.record.value))
    doc_7 = kafka_partition(b"doc-7", 7)
    expected[doc_7] = [(b"doc-7", b"before"), *expected[doc_7], (b"doc-7", b"after")]
    assert written == expected
    assert len(written) == 7
    assert [(r.partition, r.value) for r in read_committed(kafka_bootstrap, other, 3) if r.key is not None] == sorted(
        [(kafka_partition(b"doc-1", 3), b"o"), (0, b"p")]
    )


def test_a_header_without_a_value_is_sent_on_every_route_send_would_take(
    kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    """Java's and librdkafka's producers write headers without a value; kafka-python's ``send`` refuses them.

    A dead letter or unique forward copies its input record's headers, so each
    route that went through ``send`` (a large record, no key, a narrow topic)
    failed every batch holding such a record.
    """
    wide, narrow = topic_factory(3), topic_factory(1, {"max.message.bytes": str(64 * 1024)})
    headers = [("trace", None), ("kept", b"v")]
    sends = [
        Send(wide, OutgoingRecord(b"large", b"L" * 200_000, headers)),
        Send(wide, OutgoingRecord(None, b"no key", headers)),
        Send(narrow, OutgoingRecord(b"narrow", b"n", headers)),
    ]
    in_transaction(kafka_bootstrap, lambda producer: send_all(producer, sends, {narrow: SizeLimit(64 * 1024)}))
    written = read_committed(kafka_bootstrap, wide, 2) + read_committed(kafka_bootstrap, narrow, 1)
    assert sorted((r.key or b"", r.value[:6], r.headers) for r in written) == [
        (b"", b"no key", headers),
        (b"large", b"LLLLLL", headers),
        (b"narrow", b"n", headers),
    ]


def test_records_of_an_aborted_transaction_are_never_read(
    kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(3)
    sends = [Send(topic, OutgoingRecord(f"doc-{i}".encode(), b"aborted", [])) for i in range(500)]
    in_transaction(kafka_bootstrap, lambda producer: send_all(producer, sends, {}), commit=False)
    kept = [Send(topic, OutgoingRecord(b"doc-0", b"committed", []))]
    in_transaction(kafka_bootstrap, lambda producer: send_all(producer, kept, {}))
    assert [r.value for r in read_committed(kafka_bootstrap, topic, 1)] == [b"committed"]


def test_a_partition_the_topic_lacks_is_refused(kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(2)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    try:
        with pytest.raises(ValueError, match=f"topic {topic} has no partition 5"):
            send_all(producer, [Send(topic, OutgoingRecord(b"k", b"v", []), 5)], {})
    finally:
        producer.close()
