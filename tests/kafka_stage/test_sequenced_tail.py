"""A standby's reader of the sequenced topic on the real broker: never past its limit, never over a gap."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import OffsetOutOfRangeError

from stream_dedup.roles.sequenced_tail import SequencedTail

from .stage import Stage

pytestmark = pytest.mark.kafka


def produce_in_transactions(bootstrap: str, topic: str, transactions: list[list[bytes]]) -> None:
    """Each list of values in its own transaction: a commit marker follows each, taking an offset."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=f"tail-test-{topic}")
    producer.init_transactions()
    for values in transactions:
        producer.begin_transaction()
        for value in values:
            producer.send(topic, value=value, partition=0)
        producer.commit_transaction()
    producer.close()


def read_all(tail: SequencedTail, end: int) -> list[tuple[int, bytes]]:
    """What the tail gives up to ``end``, read until it stops giving (a few empty reads in a row)."""
    read: list[tuple[int, bytes]] = []
    empty = 0
    while empty < 10:
        records = tail.read(end, max_records=3)
        empty = 0 if records else empty + 1
        read += [(record.offset, record.value) for record in records]
    return read


def test_the_tail_reads_in_order_up_to_its_limit_and_goes_on_from_there(
    stage: Stage, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=1)
    # Offsets 0-4 and 6-10 hold records; 5 and 11 hold the commit markers.
    produce_in_transactions(stage.bootstrap, topic, [[b"a%d" % i for i in range(5)], [b"b%d" % i for i in range(5)]])
    tail = SequencedTail(stage.settings().connection(), topic)
    try:
        tail.seek(1)
        first = read_all(tail, end=8)
        assert first == [(1, b"a1"), (2, b"a2"), (3, b"a3"), (4, b"a4"), (6, b"b0"), (7, b"b1")]
        assert tail.position == 8
        assert read_all(tail, end=12) == [(8, b"b2"), (9, b"b3"), (10, b"b4")]
        tail.seek(6)
        assert read_all(tail, end=7) == [(6, b"b0")]
    finally:
        tail.close()


def test_a_position_deleted_by_retention_raises_instead_of_skipping_records(
    stage: Stage, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=1)
    produce_in_transactions(stage.bootstrap, topic, [[b"a%d" % i for i in range(5)]])
    admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap)
    admin.delete_records({TopicPartition(topic, 0): 3})
    admin.close()
    tail = SequencedTail(stage.settings().connection(), topic)
    try:
        tail.seek(1)
        with pytest.raises(OffsetOutOfRangeError):
            read_all(tail, end=5)
    finally:
        tail.close()
