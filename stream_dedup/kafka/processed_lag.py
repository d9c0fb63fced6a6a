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

The group's committed offsets, which monitors outside the stage read
(Burrow, ``kafka-consumer-groups.sh --describe``), stand before those
markers too: every batch commits the offset after its last record. An idle
stage fed by a transactional producer would show a lag of one per partition
that never moves, which Burrow calls a stalled consumer. So once a stage has
been given nothing for :data:`IDLE_SECONDS`, :meth:`ProcessedLag.passed_markers`
names the positions it may commit on their own (Kafka Streams does the same
when a partition's queue is empty, KAFKA-6607). A stage fed without pause
never needs it: its commits move on with every batch.

Example::

    lag = ProcessedLag()
    lag.start({partition: consumer.position(partition)})   # after the take-over's seeks
    polled = consumer.poll(...)
    lag.given(polled)
    ...                                                    # process, commit
    lag.committed({partition: next_offset})
    events.lag_measured(lag.measure(consumer))
    passed = lag.passed_markers(consumer)                  # idle: commit these offsets alone
"""

import time
from collections.abc import Mapping, Sequence
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from stream_dedup.kafka.coordinator_silence import heard_from_coordinator_lately

#: Seconds with no record given before the markers past the last commit are committed on their own: a
#: transaction more only when the input pauses, never one per batch of a trickle.
IDLE_SECONDS = 5.0


class ProcessedLag:
    """Per partition held: where its committed processing ends, and the offset after the last record given."""

    def __init__(self) -> None:
        self._committed: dict[TopicPartition, int] = {}
        self._given: dict[TopicPartition, int] = {}
        #: When a record was last given (monotonic seconds), or the assignment started.
        self._given_at = time.monotonic()

    def start(self, resume_offsets: Mapping[TopicPartition, int]) -> None:
        """A new assignment: processing resumes at these offsets (everything before them is committed)."""
        self._committed = dict(resume_offsets)
        self._given = dict(resume_offsets)
        self._given_at = time.monotonic()

    def given(self, polled: Mapping[TopicPartition, Sequence[Any]]) -> None:
        """``poll()`` returned these records (in offset order within each partition)."""
        for partition, records in polled.items():
            if records and partition in self._given:
                self._given[partition] = max(self._given[partition], records[-1].offset + 1)
                self._given_at = time.monotonic()

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
            done = max(done, self._position_past_commit(consumer, partition) or done)
            behind[(partition.topic, partition.partition)] = max(0, end - done)
        return behind

    def passed_markers(self, consumer: KafkaConsumer) -> dict[TopicPartition, int]:
        """Offsets to commit alone, past the markers after the last commit, once nothing was given for a while.

        Only partitions whose every record given is committed: between the
        commit and the position lie markers (or aborted records) only.
        Empty while records come, once these are committed, and while the
        group coordinator is silent (the brokers away: a transaction would wait).
        """
        if time.monotonic() - self._given_at < IDLE_SECONDS or not heard_from_coordinator_lately(consumer):
            return {}
        passed = {}
        for partition in consumer.assignment():
            position = self._position_past_commit(consumer, partition)
            if position is not None and position > self._committed[partition]:
                passed[partition] = position
        return passed

    def _position_past_commit(self, consumer: KafkaConsumer, partition: TopicPartition) -> int | None:
        """The consumer's position of ``partition`` if every record given of it is committed, else ``None``.

        Nothing held then: what lies between the last record and the position
        is markers. The position as it stands: without a timeout, one being
        reset or validated (kafka-python starts that by itself once a leader's
        connection breaks) waits for the brokers as long as they stay away.
        """
        done = self._committed.get(partition)
        if done is None or done < self._given[partition]:
            return None
        position = consumer.position(partition, timeout_ms=0)
        return None if position is None else int(position)
