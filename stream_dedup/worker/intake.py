"""From fetched records to the next batch: the event-time merge fed by the consumer, suspects judged alone.

The loop polls; this decides which of the records fetched so far are judged
next (:mod:`stream_dedup.worker.ordering`, with the fetch positions and end
offsets it needs from the consumer) and cuts a batch short before a record
suspected of failing its batches (:mod:`stream_dedup.worker.isolation`).
Records fetched but not taken stay here; the merge is emptied on every
takeover, since the consumer is then sought back to committed positions.
"""

import time
from collections.abc import Iterable
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.isolation import BatchFailures
from stream_dedup.worker.ordering import EventTimeMerge


class BatchIntake:
    """The input side of the active replica: records added as polled, taken as batches in event-time order."""

    def __init__(
        self,
        consumer: KafkaConsumer,
        topic: str,
        batch_size: int,
        max_idle_seconds: float,
        failures: BatchFailures,
        events: WorkerEvents,
    ) -> None:
        self.consumer = consumer
        self.topic = topic
        self.batch_size = batch_size
        self.failures = failures
        self.events = events
        self.merge = EventTimeMerge(max_idle_seconds)

    def restart(self, partitions: Iterable[TopicPartition]) -> None:
        """Start over at the consumer's positions of ``partitions``: records fetched before are dropped."""
        self.merge.assign({tp.partition: self.consumer.position(tp) for tp in partitions})

    def add(self, polled: dict[Any, list[Any]]) -> None:
        """Records of one poll."""
        self.merge.add(r for tp in sorted(polled) for r in polled[tp])

    def next_batch(self) -> list[Any]:
        """The next records to judge: a prefix of the merged order, at most ``batch_size``.

        Fetch positions can pass the records returned (transaction markers);
        a partition with nothing buffered that looks caught up gets its end
        offset asked for again (the last stable offset: read_committed), so
        that a partition whose records are on the way is waited for, not
        overtaken. Suspects of a failing batch are judged alone.
        """
        merge = self.merge
        parts = {p: TopicPartition(self.topic, p) for p in merge.partitions}
        merge.note_positions({p: self.consumer.position(tp) for p, tp in parts.items()})
        unsure = merge.unknown_or_caught_up()
        if unsure:
            ends = self.consumer.end_offsets([parts[p] for p in unsure])
            merge.note_ends({tp.partition: end for tp, end in ends.items() if end is not None})
        waited = merge.waited_seconds
        batch = merge.take(self.batch_size, time.monotonic())
        if merge.waited_seconds > waited:
            self.events.partition_waited(merge.waited_seconds - waited)
        batch, later = self.failures.cut(batch)
        merge.unread(later)
        return batch
