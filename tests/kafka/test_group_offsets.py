"""Committed offsets held by a hanging transaction end the wait with a Kafka error that says what to do."""

from typing import Any

import pytest
from kafka import TopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError

from stream_dedup.kafka.group_offsets import committed_offset


class Consumer:
    """Stands in for KafkaConsumer.committed: an offset, none, or UNSTABLE_OFFSET_COMMIT until the timeout."""

    def __init__(self, answer: int | type[Exception] | None) -> None:
        self.answer = answer
        self.timeouts: list[Any] = []

    def committed(self, partition: TopicPartition, timeout_ms: Any = None) -> int | None:
        self.timeouts.append(timeout_ms)
        if isinstance(self.answer, type):
            raise self.answer("Failed to get offsets by times in 45000 ms")
        return self.answer


def test_an_offset_is_read_with_a_wait_past_the_transaction_timeout() -> None:
    consumer = Consumer(12)
    assert committed_offset(consumer, TopicPartition("documents", 1), 15.0) == 12  # type: ignore[arg-type]
    assert consumer.timeouts == [45_000]  # the transaction timeout and 30 s: never None (wait for ever)
    assert committed_offset(Consumer(None), TopicPartition("documents", 1), 15.0) is None  # type: ignore[arg-type]


def test_an_offset_a_hanging_transaction_holds_ends_the_session_with_how_to_clear_it() -> None:
    with pytest.raises(KafkaError, match=r"documents partition 1 is not given after 45 s") as raised:
        committed_offset(Consumer(KafkaTimeoutError), TopicPartition("documents", 1), 15.0)  # type: ignore[arg-type]
    # The same timeout whether the brokers are away or a transaction hangs: the message names both.
    assert "brokers are unreachable" in str(raised.value) and "kafka-transactions.sh" in str(raised.value)
