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

import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from kafka import KafkaProducer, TopicPartition
from kafka.errors import KafkaTimeoutError

from stream_dedup.kafka.clients import PRODUCER_TUNING
from stream_dedup.kafka.murmur2 import partitions_of
from stream_dedup.kafka.record_batches import append_batches
from stream_dedup.kafka.record_fit import OutgoingRecord, SizeLimit, record_bytes

#: Records larger than this (``record_bytes``) go through kafka-python's ``send``, which checks their size.
_LARGE_RECORD = PRODUCER_TUNING["batch_size"] // 4


class Send(NamedTuple):
    """One record of a transaction: to ``topic`` (and ``partition``, or by key).

    A named tuple: one is made for every record sent, and it is made three times faster than a frozen dataclass.
    """

    topic: str
    record: OutgoingRecord
    partition: int | None = None


def send_all(producer: KafkaProducer, sends: Sequence[Send], limits: Mapping[str, SizeLimit]) -> None:
    """Send ``sends`` (a transaction must be open), in order within each partition.

    Records of a known partition are queued a partition at a time as whole
    batches (:mod:`stream_dedup.kafka.record_batches`). kafka-python's
    ``send`` takes the others:

    * records with neither a partition nor a key (it picks a partition);
    * large records (it checks them against ``max_request_size``);
    * records to a narrow topic (``limits``). kafka-python fills a batch up
      to its ``batch_size`` whatever the topic accepts, and the broker refuses
      a batch over the topic's limit (the transaction would fail at every
      retry), so each of these travels alone.

    Before such a record goes, the topic's queued records go, so a partition
    keeps the order of ``sends``. One with a header without a value (which
    ``send`` refuses) is queued alone as a batch of its own instead, on a
    partition of the topic picked at random if it has neither, as ``send``
    picks. A producer other than kafka-python's own (a test's fake, a
    wrapper) gets every record through its ``send``.
    """
    batched = isinstance(producer, KafkaProducer)
    narrow_topics = {topic for topic, limit in limits.items() if limit.is_narrow(PRODUCER_TUNING["batch_size"])}
    pending: defaultdict[TopicPartition, list[OutgoingRecord]] = defaultdict(list)
    for send, partition in zip(sends, keyed_partitions(producer, sends), strict=True):
        record = send.record
        narrow = send.topic in narrow_topics
        if batched and partition is not None and not narrow and record_bytes(record) <= _LARGE_RECORD:
            pending[TopicPartition(send.topic, partition)].append(record)
            continue
        for queued in [tp for tp in pending if tp.topic == send.topic]:
            append_batches(producer, queued, pending.pop(queued))
        if batched and any(value is None for _, value in record.headers):
            # kafka-python's send refuses a header without a value, which Java's and librdkafka's
            # producers write: a dead letter or forward of such an input record failed every batch
            # holding it, the stage retrying it for ever. Encoded here, it still travels alone.
            target = partition if partition is not None else random.choice(sorted(_partitions_of(producer, send.topic)))
            append_batches(producer, TopicPartition(send.topic, target), [record])
        else:
            producer.send(send.topic, key=record.key, value=record.value, headers=record.headers, partition=partition)
        if narrow:
            producer.flush()
    for queued, records in pending.items():
        append_batches(producer, queued, records)


def keyed_partitions(producer: KafkaProducer, sends: Sequence[Send]) -> list[int | None]:
    """Each send's partition: its own (which must exist), else its key's (Kafka's partitioner), else ``None``."""
    partitions: list[int | None] = [send.partition for send in sends]
    by_topic: defaultdict[str, list[int]] = defaultdict(list)
    for position, send in enumerate(sends):
        by_topic[send.topic].append(position)
    for topic, positions in by_topic.items():
        # As kafka-python's partitioner: every partition of the topic, available or not, in order.
        known = sorted(_partitions_of(producer, topic))
        unknown = sorted(str(p) for p in {sends[q].partition for q in positions} - {None, *known})
        if unknown:
            raise ValueError(f"topic {topic} has no partition {', '.join(unknown)} (its partitions: {known})")
        keyed = [p for p in positions if partitions[p] is None and sends[p].record.key is not None]
        keys = [sends[position].record.key or b"" for position in keyed]
        for position, index in zip(keyed, partitions_of(keys, len(known)).tolist(), strict=True):
            partitions[position] = known[index]
    return partitions


def _partitions_of(producer: KafkaProducer, topic: str) -> set[int]:
    """The partitions of ``topic``; a topic the brokers do not know (deleted) is named when the wait ends."""
    try:
        return set(producer.partitions_for(topic))
    except KafkaTimeoutError as error:
        raise KafkaTimeoutError(f"no partitions of topic {topic!r} known (does it exist?): {error}") from error
