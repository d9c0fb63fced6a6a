"""A standby shard's reader of the sequenced topic: up to an offset it is given, and never past it.

A standby indexes only what its active replica has answered and committed
(everything before the group's committed offset): its index must be, at
take-over, a prefix the active one had, since the batches after it are
answered from that prefix. The group consumer cannot read a partition the
group gave another member, so the standby reads with a consumer of no group.
"""

from typing import Any

from kafka import KafkaConsumer, TopicPartition

from stream_dedup.kafka.clients import KafkaConnection, partition_reader

#: Longest one poll waits for records to arrive (the standby's loop also polls its group consumer).
_POLL_MS = 50


class SequencedTail:
    """Reads the sequenced topic's single partition from :meth:`seek`'s offset on, in order, up to a limit.

    ``read_committed``: records of aborted transactions are never indexed.
    Its offset is never reset by the client: a position deleted by retention
    raises :class:`~kafka.errors.OffsetOutOfRangeError` instead of silently
    skipping documents the index must hold.
    """

    def __init__(self, connection: KafkaConnection, topic: str) -> None:
        self.connection = connection
        self.partition = TopicPartition(topic, 0)
        #: Where the next read starts: every record before it was returned (or was a transaction marker).
        self.position = 0
        self._consumer: KafkaConsumer | None = None

    def seek(self, offset: int) -> None:
        self.position = offset
        if self._consumer is not None:
            self._consumer.seek(self.partition, offset)

    def read(self, end: int, max_records: int) -> list[Any]:
        """The records from :attr:`position` that arrive within a moment, all before offset ``end``."""
        if self.position >= end:
            return []
        consumer = self._open()
        fetched = consumer.poll(timeout_ms=_POLL_MS, max_records=max_records).get(self.partition, [])
        before = [record for record in fetched if record.offset < end]
        if len(before) < len(fetched):
            # Fetched past the limit: only transaction markers lie between the last record kept and `end`.
            self.seek(end)
        else:
            self.position = min(end, int(consumer.position(self.partition)))
        return before

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None

    def _open(self) -> KafkaConsumer:
        if self._consumer is None:
            self._consumer = partition_reader(self.connection, self.partition, self.position, "none")
        return self._consumer
