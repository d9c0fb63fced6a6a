"""From fetched records to the next batch: the event-time merge fed by the consumer, suspects judged alone.

The loop polls; this decides which of the records fetched so far are judged
next (:mod:`stream_dedup.worker.ordering`, with the fetch positions and end
offsets it needs from the consumer) and cuts a batch short before a record
suspected of failing its batches (:mod:`stream_dedup.worker.isolation`).
Records fetched but not taken stay here; the merge is emptied on every
takeover, since the consumer is then sought back to committed positions.

Each partition holds at most ``max_partition_buffered_records`` of them, so
that memory stays bounded whatever the skew in event time between partitions.
Records of a partition polled past that are let go, and the consumer is sought
back to the first of them: they stay in Kafka and are fetched again once the
merge has taken that partition's older records. kafka-python's pause() is not
used for this: 3.0.12 can stall a paused partition for good after its resume
(it parks the records fetched for it and gives them back only while no other
record set is in line). A seek needs none of that: kafka-python discards
whatever it holds or has in flight for the partition from before the seek,
since its fetch offset no longer matches the position (``Fetcher._append``,
``_parse_fetched_data``).
"""

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from stream_dedup.kafka.clients import log_offsets
from stream_dedup.kafka.offset_resets import DeletedInput
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.isolation import BatchFailures
from stream_dedup.worker.ordering import EventTimeMerge

log = logging.getLogger(__name__)


class BatchIntake:
    """The input side of the active replica: records added as polled, taken as batches in event-time order."""

    def __init__(
        self,
        consumer: KafkaConsumer,
        end_offsets: KafkaConsumer,
        topic: str,
        batch_size: int,
        merge: EventTimeMerge,
        failures: BatchFailures,
        events: WorkerEvents,
        span_ms: int | None = None,
    ) -> None:
        """``merge`` holds the event-time order's settings: the idle time and the records per partition.

        ``span_ms`` bounds the event time a batch spans (``WorkerSettings.batch_span_ms``): no record of a
        batch is stamped more than that after its first record.

        ``end_offsets`` answers the end offsets: a client of its own, not the
        group consumer (see :func:`~stream_dedup.kafka.clients.end_offsets_reader`).
        """
        self.consumer = consumer
        self.end_offsets = end_offsets
        self.topic = topic
        self.batch_size = batch_size
        self.span_ms = span_ms
        self.merge = merge
        self.failures = failures
        self.events = events
        #: Positions kafka-python found out of the log and moved to the beginning (see kafka.offset_resets).
        self._deleted = DeletedInput(consumer, end_offsets)

    def restart(self, partitions: Iterable[TopicPartition]) -> None:
        """Start over at the consumer's positions of ``partitions``: records fetched before are dropped, and
        positions found out of the log before, sought anew since, are forgotten."""
        self._deleted.forget()
        self.merge.assign({tp.partition: self.consumer.position(tp) for tp in partitions})

    def add(self, polled: dict[Any, list[Any]]) -> None:
        """Records of one poll; those past a full partition buffer are fetched again later."""
        self._deleted.report(self.events.input_deleted)
        merge = self.merge
        before = sum(merge.buffered().values())
        refused = merge.add(r for tp in sorted(polled) for r in polled[tp])
        for partition, offset in refused.items():
            # Before the consumer's position is read again (next_batch): it lies
            # past the records let go, and the merge would count them as fetched.
            self.consumer.seek(TopicPartition(self.topic, partition), offset)
        after = sum(merge.buffered().values())
        polled_count = sum(len(records) for records in polled.values())
        self.events.records_buffered(after, polled_count - (after - before))

    def fill(self, polled: dict[Any, list[Any]], poll: Callable[[], dict[Any, list[Any]]]) -> None:
        """Add ``polled``, then what ``poll()`` gives (the client's records, no wait) while partitions starve.

        kafka-python hands out at most ``batch_size`` records a poll, one
        partition's after another: with many partitions, most have records
        fetched already but not handed out yet. The merge would take those as
        starving, hold the batch back for them, and past
        ``max_partition_idle_ms`` judge past them, out of event-time order (a
        backlog of 30k over 128 partitions on a loaded machine: 80 originals
        judged copies of their later copies). A poll that comes back short
        means the client holds nothing more; at most one poll a partition.
        A partition with nothing buffered counts whether it lags or not: its
        lag may not be known yet (the first batch of a session).
        """
        self.add(polled)
        for _ in self.merge.partitions:
            if sum(len(records) for records in polled.values()) < self.batch_size or all(
                self.merge.buffered().values()
            ):
                return
            polled = poll()
            self.add(polled)

    def next_batch(self) -> list[Any]:
        """The next records to judge: a prefix of the merged order, at most ``batch_size`` spanning ``span_ms``.

        Fetch positions can pass the records returned (transaction markers);
        a partition that looks caught up (or was never asked) gets its end
        offset asked for again (the last stable offset: read_committed), so
        that a partition whose records are on the way is waited for, not
        overtaken, even when its buffer runs dry within the batch. Suspects
        of a failing batch are judged alone.
        """
        merge = self.merge
        parts = {p: TopicPartition(self.topic, p) for p in merge.partitions}
        merge.note_positions({p: self.consumer.position(tp) for p, tp in parts.items()})
        unsure = merge.unknown_or_caught_up()
        if unsure:
            ends = log_offsets(self.end_offsets, [parts[p] for p in unsure])
            merge.note_ends({tp.partition: end for tp, end in ends.items() if end is not None})
        waited = merge.waited_seconds
        batch = merge.take(self.batch_size, time.monotonic())
        if merge.waited_seconds > waited:
            self.events.partition_waited(merge.waited_seconds - waited)
        batch, later = self.failures.cut(batch)
        if self.span_ms is not None and batch:
            # Retention by age forgets between batches, at a batch's first record: a batch spanning more
            # would match documents further apart in event time than max_age_seconds.
            last = batch[0].timestamp + self.span_ms
            within = next((i for i, record in enumerate(batch) if record.timestamp > last), len(batch))
            batch, later = batch[:within], batch[within:] + later
        merge.unread(later)
        return batch
