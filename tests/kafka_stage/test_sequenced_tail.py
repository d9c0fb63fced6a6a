"""A standby's reading of the sequenced topic on the real broker: never past its limit, never over a gap."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import OffsetOutOfRangeError
from kafka.structs import OffsetAndMetadata

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from stream_dedup.kafka.changelog import ChangelogEntry, encode_entry
from stream_dedup.kafka.sequenced import newest_record
from stream_dedup.lsh import IndexedBatch
from stream_dedup.roles.sequenced_tail import SequencedTail
from stream_dedup.roles.shard import Shard
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.snapshot_store import SnapshotStore
from tests.corpus import make_corpus

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


def test_a_standby_shard_that_retention_overtook_says_so_and_rebuilds_from_what_is_left(
    stage: Stage, topic_factory: Callable[..., str], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    topic = topic_factory(partitions=1)
    config = DetectionConfig()
    # Three batches of ten documents, one sequenced record each (offsets 0, 1, 2).
    producer = KafkaProducer(bootstrap_servers=stage.bootstrap)
    for number in range(3):
        texts = make_corpus(10, seed=number)
        documents = IndexedBatch(
            [f"b{number}-{i}" for i in range(10)],
            make_detector(config).sign(texts),
            np.zeros(10),
            np.arange(10, dtype=np.uint64),
        )
        (value,) = encode_entry(ChangelogEntry(documents, stage.input_topic, {0: 10}), config.signature_fingerprint())
        producer.send(topic, value=value, partition=0)
    producer.flush()
    producer.close()
    settings = stage.settings("shard-standby", role="shard", sequenced_topic=topic)
    shard = Shard(settings, SnapshotStore(tmp_path, 2), WorkerEvents())
    group = KafkaConsumer(bootstrap_servers=stage.bootstrap, group_id=settings.role_group_id, enable_auto_commit=False)
    try:
        shard.stand_by(group)  # nothing committed yet: an empty index, nothing to tail
        assert (len(shard.index), shard.covered) == (0, 0)
        # The active replica answered everything; then retention deleted the first batch, still unread here.
        group.commit({TopicPartition(topic, 0): OffsetAndMetadata(3, "", -1)})
        admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap)
        admin.delete_records({TopicPartition(topic, 0): 1})
        admin.close()
        time.sleep(1.1)  # the standby asks the committed offset again once a second
        deadline = time.monotonic() + 30
        while shard.covered != 3 and time.monotonic() < deadline:
            with caplog.at_level(logging.WARNING):
                shard.stand_by(group)
    finally:
        shard.close()
        group.close()
    assert any("deleted by retention" in record.getMessage() for record in caplog.records)
    assert shard.covered == 3 and len(shard.index) == 20, "rebuilt from the first offset left, not silently skipped"


def test_the_newest_record_is_found_behind_aborted_transactions_longer_than_the_first_look(
    stage: Stage, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=1)
    partition = TopicPartition(topic, 0)
    consumer = KafkaConsumer(bootstrap_servers=stage.bootstrap, isolation_level="read_committed")
    try:
        assert newest_record(consumer, partition) is None  # an empty topic
        produce_in_transactions(stage.bootstrap, topic, [[b"a%d" % i for i in range(5)], [b"last"]])
        producer = KafkaProducer(bootstrap_servers=stage.bootstrap, transactional_id=f"aborting-{topic}")
        producer.init_transactions()
        for _ in range(3):  # 3 x 100 records and markers, none committed: several times the first look back
            producer.begin_transaction()
            for i in range(100):
                producer.send(topic, value=b"aborted %d" % i, partition=0)
            producer.abort_transaction()
        producer.close()
        newest = newest_record(consumer, partition)
    finally:
        consumer.close()
    assert newest is not None and (newest.offset, newest.value) == (6, b"last")
