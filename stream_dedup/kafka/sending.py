"""Sending a transaction's records: keyed ones to the partition Kafka's partitioner picks, hashed per batch.

Both the worker and the roles send every record of a transaction through
:func:`send_all`. Where a record names no partition and has a key, the
partition is the one Kafka's default partitioner gives its key (so a verdict
lands where any producer would put the document's id), computed for all of a
topic's records at once (:mod:`stream_dedup.kafka.murmur2`) and named in the
send: kafka-python's own partitioner hashes each key in pure Python and reads
the topic's metadata for every record, a twentieth of the stage's process.
A record with neither goes where kafka-python puts it (any partition).
"""

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaProducer

from stream_dedup.kafka.clients import PRODUCER_TUNING
from stream_dedup.kafka.murmur2 import partitions_of
from stream_dedup.kafka.record_fit import OutgoingRecord, SizeLimit


@dataclass(frozen=True)
class Send:
    """One record of a transaction: to ``topic`` (and ``partition``, or by key)."""

    topic: str
    record: OutgoingRecord
    partition: int | None = None


def send_all(producer: KafkaProducer, sends: Sequence[Send], limits: Mapping[str, SizeLimit]) -> list[Any]:
    """Send ``sends`` in order (a transaction must be open); their futures, in the same order.

    kafka-python fills a batch up to its ``batch_size`` whatever the topic
    accepts, and the broker refuses a batch over the topic's limit (the
    transaction would fail at every retry): to a narrow topic (``limits``),
    each record travels alone.
    """
    partitions = keyed_partitions(producer, sends)
    futures = []
    for send, partition in zip(sends, partitions, strict=True):
        record = send.record
        futures.append(
            producer.send(send.topic, key=record.key, value=record.value, headers=record.headers, partition=partition)
        )
        limit = limits.get(send.topic)
        if limit is not None and limit.is_narrow(PRODUCER_TUNING["batch_size"]):
            producer.flush()
    return futures


def keyed_partitions(producer: KafkaProducer, sends: Sequence[Send]) -> list[int | None]:
    """Each send's partition: its own, else its key's (Kafka's default partitioner), else ``None``."""
    partitions: list[int | None] = [send.partition for send in sends]
    by_topic: defaultdict[str, list[int]] = defaultdict(list)
    for position, send in enumerate(sends):
        if send.partition is None and send.record.key is not None:
            by_topic[send.topic].append(position)
    for topic, positions in by_topic.items():
        # As kafka-python's partitioner: every partition of the topic, available or not, in order.
        known = sorted(producer.partitions_for(topic))
        keys = [sends[position].record.key or b"" for position in positions]
        for position, index in zip(positions, partitions_of(keys, len(known)).tolist(), strict=True):
            partitions[position] = known[index]
    return partitions
