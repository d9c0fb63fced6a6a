"""The test broker supports what the Kafka stage needs: exactly-once consume-transform-produce
(transactional writes + consumer offsets committed inside the transaction, read_committed)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.kafka

TIMEOUT_S = 30


def read_to_end(bootstrap: str, tp: TopicPartition, isolation_level: str) -> list[bytes]:
    """All values of partition `tp` up to its end (the last stable offset for read_committed)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation_level,
        enable_auto_commit=False,
    )
    try:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        # Compare positions, not counts: transaction markers take offsets too, and a
        # read_committed consumer skips aborted records without returning them.
        while consumer.position(tp) < end:
            assert time.monotonic() < deadline, f"stuck at {consumer.position(tp)} < {end}"
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        return values
    finally:
        consumer.close()


def test_transactions_commit_visible_abort_hidden(kafka_bootstrap: str, topic_factory: Callable[..., str]) -> None:
    in_tp = TopicPartition(topic_factory(partitions=1), 0)
    out_tp = TopicPartition(topic_factory(partitions=1), 0)
    group = f"tx-test-{uuid.uuid4().hex[:8]}"

    plain = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    for i in range(4):
        plain.send(in_tp.topic, f"in-{i}".encode())
    plain.flush()
    plain.close()

    consumer = KafkaConsumer(
        in_tp.topic,
        bootstrap_servers=kafka_bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    )
    producer = KafkaProducer(
        bootstrap_servers=kafka_bootstrap,
        transactional_id=f"tx-test-{uuid.uuid4().hex[:8]}",
        enable_idempotence=True,
    )
    try:
        inputs: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(inputs) < 4:
            assert time.monotonic() < deadline, f"consumed only {inputs}"
            for records in consumer.poll(timeout_ms=500).values():
                inputs.extend(r.value for r in records)
        assert inputs == [b"in-0", b"in-1", b"in-2", b"in-3"]

        def transaction(values: list[bytes], next_offset: int, commit: bool) -> None:
            producer.begin_transaction()
            for value in values:
                producer.send(out_tp.topic, value)
            # Group metadata (not just the group id) lets the broker fence zombies (KIP-447).
            producer.send_offsets_to_transaction(
                {in_tp: OffsetAndMetadata(next_offset, "", -1)}, consumer.group_metadata()
            )
            # abort_transaction() drops records still buffered in the client; flush so the
            # aborted ones really reach the log and the broker has something to hide.
            producer.flush()
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()

        producer.init_transactions()
        transaction([b"out-0", b"out-1"], next_offset=2, commit=True)
        assert consumer.committed(in_tp) == 2
        transaction([b"aborted-2", b"aborted-3"], next_offset=4, commit=False)
        assert consumer.committed(in_tp) == 2, "an aborted transaction committed its offsets"
        # The retry after the abort: a later commit must be readable past the aborted records.
        transaction([b"out-2", b"out-3"], next_offset=4, commit=True)
        assert consumer.committed(in_tp) == 4
    finally:
        producer.close()
        consumer.close()

    assert read_to_end(kafka_bootstrap, out_tp, "read_committed") == [
        b"out-0",
        b"out-1",
        b"out-2",
        b"out-3",
    ]
    # The aborted records were really written; only read_committed hides them.
    assert read_to_end(kafka_bootstrap, out_tp, "read_uncommitted") == [
        b"out-0",
        b"out-1",
        b"aborted-2",
        b"aborted-3",
        b"out-2",
        b"out-3",
    ]
