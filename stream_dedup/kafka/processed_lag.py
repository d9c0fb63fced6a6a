"""Consumer lag counted from the records a stage has processed, not from those it has fetched.

kafka-python's ``position`` is the offset of the next record ``poll()`` will
return: records returned and still held (the single-process stage's batches
in the event-time merge, being signed, judged or committed; a judge's batches
waiting for every shard's answers) already count as read. A stage stuck on a
backlog it had fetched showed no lag at all, and ``StreamDedupNoProgress``,
which needs lag, never fired. Here a partition's lag runs from the offset its
last committed transaction ends at (where a restart would read again) to the
partition's end.

Transaction markers take offsets too, and no record ``poll()`` returns ever
has them: a stage that has committed everything it was given still stands
before the marker that follows its last record, and would lag by one marker
per transaction forever. So once every record given has been committed, the
partition counts as processed up to the consumer's position, which has
passed the markers. While records are held, the markers among them count
(at most one per producer transaction).

Example::

    lag = ProcessedLag()
    lag.start({partition: consumer.position(partition)})   # after the take-over's seeks
    polled = consumer.poll(...)
    lag.given(polled)
    ...                                                    # process, commit
    lag.committed({partition: next_offset})
    events.lag_measured(lag.measure(consumer))
"""

from collections.abc import Mapping, Sequence
from typing import Any

from kafka import KafkaConsumer, TopicPartition


class ProcessedLag:
    """Per partition held: where its committed processing ends, and the offset after the last record given."""

    def __init__(self) -> None:
        self._committed: dict[TopicPartition, int] = {}
        self._given: dict[TopicPartition, int] = {}

    def start(self, resume_offsets: Mapping[TopicPartition, int]) -> None:
        """A new assignment: processing resumes at these offsets (everything before them is committed)."""
        self._committed = dict(resume_offsets)
        self._given = dict(resume_offsets)

    def given(self, polled: Mapping[TopicPartition, Sequence[Any]]) -> None:
        """``poll()`` returned these records (in offset order within each partition)."""
        for partition, records in polled.items():
            if records and partition in self._given:
                self._given[partition] = max(self._given[partition], records[-1].offset + 1)

    def committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """A transaction committed these consumed offsets: everything before them is processed."""
        for partition, offset in offsets.items():
            if partition in self._committed:
                self._committed[partition] = offset

    def measure(self, consumer: KafkaConsumer) -> dict[tuple[str, int], int]:
        """Records not yet processed by (topic, partition), for each partition whose end the consumer knows."""
        behind = {}
        for partition in consumer.assignment():
            done = self._committed.get(partition)
            end = consumer.highwater(partition)
            if done is None or end is None:
                continue
            if done >= self._given[partition]:
                # Nothing held: what lies between the last record and the position is markers. The position
                # as it stands: without a timeout, one being reset or validated (kafka-python starts that by
                # itself once a leader's connection breaks) waits for the brokers as long as they stay away.
                position = consumer.position(partition, timeout_ms=0)
                done = max(done, position if position is not None else done)
            behind[(partition.topic, partition.partition)] = max(0, end - done)
        return behind
