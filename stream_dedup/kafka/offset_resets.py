"""Input positions that fell out of the log: noticed and named, never skipped in silence.

A group consumer asks for records at its position; if the partition no
longer holds that offset (records deleted by retention or
``kafka-delete-records`` while the stage was stopped or lagging, or a topic
deleted and created again under its name), the broker answers
OFFSET_OUT_OF_RANGE and kafka-python moves the position to the partition's
beginning (``auto_offset_reset = earliest``) with nothing but an INFO line
of its own. For the stage that means input records that never get a
verdict, which no metric showed: one verdict per record is its promise.

:func:`watch_offset_resets` notes each such reset as kafka-python requests
it: the fetcher (out of range, or a log truncated under the position) asks
for the consumer's *default* policy, whereas the stage's own
``seek_to_beginning`` names the policy, so only the former are noted, with
the position that fell out. The caller then asks the partition's beginning
and end and says what was lost (:class:`OffsetReset`).

A position past the partition's end is out of range too, and the stage
would read the partition again from its beginning: one the stage is to
resume at (the group's offsets moved past the end by an operator) is
brought back to the end first (:func:`within_the_log`).

kafka-python's ``SubscriptionState.request_offset_reset`` is private; the
version is pinned (pyproject), and tests/kafka_stage/test_deleted_input.py
provokes the reset against a real broker.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from stream_dedup.kafka.clients import log_offsets

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class OffsetReset:
    """A position that fell out of the log of ``partition``, and what the partition holds now."""

    partition: TopicPartition
    #: The offset the consumer asked for, which the partition no longer holds.
    position: int
    #: The partition's first and next offsets when asked (just after the reset was requested).
    beginning: int
    end: int

    @property
    def deleted(self) -> int:
        """Offsets between the position and the beginning: records deleted before they were read.

        Transaction markers count too (a marker per producer transaction and
        partition), so this is an upper bound. 0 for a position past the end.
        """
        return max(0, self.beginning - self.position)

    def describe(self) -> str:
        """A WARNING's text: what happened, what it costs, and the usual cause."""
        where = f"input {self.partition.topic} partition {self.partition.partition}"
        if self.position < self.beginning:
            return (
                f"{where}: offsets {self.position} to {self.beginning - 1} were deleted before the stage read them "
                f"(retention.ms or retention.bytes of the input topic, or kafka-delete-records): up to "
                f"{self.deleted} records get no verdict; reading on from offset {self.beginning}. Keep the "
                "input's retention longer than the stage can be stopped or lag"
            )
        return (
            f"{where}: offset {self.position} lies past the partition's end {self.end} (the topic deleted and "
            f"created again under its name, or its log truncated): reading it from its beginning, offset "
            f"{self.beginning}"
        )


def watch_offset_resets(consumer: KafkaConsumer) -> Callable[[], list[tuple[TopicPartition, int]]]:
    """Note every reset of ``consumer``'s positions by its default policy; returns ``take()``.

    ``take()`` gives the resets noted since it was last called, each as the
    partition and the position that fell out of its log. Anything else
    standing in for a consumer (the tests' fakes) is left alone and never
    gives any.
    """
    noted: list[tuple[TopicPartition, int]] = []

    def take() -> list[tuple[TopicPartition, int]]:
        taken = list(noted)
        noted.clear()
        return taken

    if not isinstance(consumer, KafkaConsumer):
        return take
    subscriptions = consumer._subscription
    request_offset_reset = subscriptions.request_offset_reset

    def noting(partition: TopicPartition, offset_reset_strategy: Any = None) -> None:
        if offset_reset_strategy is None:  # the fetcher's: the position is out of the log
            state = subscriptions.assignment.get(partition)
            position = None if state is None or state.position is None else state.position.offset
            if position is not None:
                noted.append((partition, int(position)))
        request_offset_reset(partition, offset_reset_strategy)

    subscriptions.request_offset_reset = noting
    return take


class DeletedInput:
    """The input records a consumer's positions skipped, deleted before they were read: each loss reported once."""

    def __init__(self, consumer: KafkaConsumer, offsets: KafkaConsumer) -> None:
        """Watch ``consumer``'s positions; ``offsets`` answers beginning and end offsets (may be ``consumer``)."""
        self._taken = watch_offset_resets(consumer)
        self._offsets = offsets
        #: Partition -> the position last reported out of the log: kafka-python can note one reset twice (two
        #: fetches in flight come back out of range), and one loss is one WARNING.
        self._reported: dict[TopicPartition, int] = {}

    def forget(self) -> None:
        """Drop the resets noted so far: the positions were sought anew since (a take-over).

        A reset kafka-python asked for before the seek is undone by it (its
        answer is dropped), so reporting it would name a loss that did not
        happen: the fetch of a take-over at offsets an operator committed past
        the end was said to read the partition from its beginning, though
        the take-over resumed at the end. A position still out of the log
        after the seek is noted again by its next fetch.
        """
        self._taken()

    def report(self, count: Callable[[str, int, int], None]) -> None:
        """Log a WARNING for each loss noted since the last call and ``count(topic, partition, records)`` it.

        The records can never get a verdict; the consumer reads on from the
        partition's beginning (kafka-python's ``auto_offset_reset``), as
        before, but ``stream_dedup_deleted_input_records_total`` counts them.
        """
        for partition, position in self._taken():
            if self._reported.get(partition) == position:
                continue
            self._reported[partition] = position
            beginning = log_offsets(self._offsets, [partition], end=False)[partition]
            end = log_offsets(self._offsets, [partition])[partition]
            reset = OffsetReset(partition, position, int(beginning), int(end))
            log.warning(
                reset.describe(),
                extra={"topic": partition.topic, "partition": partition.partition, "offset": position},
            )
            count(partition.topic, partition.partition, reset.deleted)


def within_the_log(consumer: KafkaConsumer, resume: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
    """``resume``, each offset past its partition's end brought back to the end, with a WARNING.

    The stage never commits past what it read, but an operator's tool may
    (the admin client's alter offsets does not check, as
    ``kafka-consumer-groups.sh`` does). A position past the end is out of
    range for the brokers, and the consumer then reads the partition from
    its beginning (``auto_offset_reset``): every record of it got a second
    verdict, a duplicate of itself, and the WARNING blamed a topic created
    again. The end is where the skipping the operator asked for ends.
    """
    if not resume:
        return resume
    ends = log_offsets(consumer, list(resume))
    past = {tp: (offset, ends[tp]) for tp, offset in resume.items() if offset > ends[tp]}
    for tp, (offset, end) in sorted(past.items()):
        log.warning(
            "input %s partition %d: the offset to resume at, %d, lies past the partition's end %d (the group's "
            "offsets moved past it by an operator?): resuming at the end, so that no record is read twice",
            tp.topic,
            tp.partition,
            offset,
            end,
            extra={"topic": tp.topic, "partition": tp.partition, "offset": offset},
        )
    return {tp: min(offset, ends[tp]) for tp, offset in resume.items()}
