"""Records sent by the stage land on the partition Kafka's own partitioner gives their key."""

from collections.abc import Callable

from kafka import KafkaProducer
from kafka.partitioner.default import murmur2

from stream_dedup.kafka.record_fit import OutgoingRecord
from stream_dedup.kafka.sending import Send, send_all


def test_keyed_records_go_where_kafka_pythons_partitioner_puts_them(
    kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    verdicts, other, reference = topic_factory(7), topic_factory(3), topic_factory(7)
    keys = [f"doc-{i}".encode() for i in range(300)] + [b"", "é-ü-漢字".encode(), b"x" * 333]
    sends = [Send(verdicts, OutgoingRecord(key, b"v", [])) for key in keys]
    # Interleaved: records of another topic, one with its own partition, one with no key.
    sends += [Send(other, OutgoingRecord(b"doc-1", b"o", [])), Send(other, OutgoingRecord(b"doc-1", b"p", []), 0)]
    sends += [Send(other, OutgoingRecord(None, b"n", []))]
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    try:
        ours = [future.get(30) for future in send_all(producer, sends, {})]
        theirs = [producer.send(reference, key=key, value=b"v").get(30) for key in keys]
    finally:
        producer.close()
    assert [m.topic for m in ours] == [s.topic for s in sends]
    assert [m.partition for m in ours[: len(keys)]] == [m.partition for m in theirs[: len(keys)]]
    assert len({m.partition for m in ours[: len(keys)]}) == 7
    assert ours[len(keys)].partition == (murmur2(b"doc-1") & 0x7FFFFFFF) % 3  # the other topic's own count
    assert ours[len(keys) + 1].partition == 0
