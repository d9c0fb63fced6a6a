"""The records the group consumer holds beyond a step's poll, for a role that merges its partitions.

kafka-python hands out at most ``max_poll_records`` a poll, one partition's
records after another's: with many partitions, most have records fetched but
not handed out yet. A role that merges its partitions in event time (the
signer, :meth:`~stream_dedup.worker.intake.BatchIntake.fill`) takes the rest
before it decides that a partition starves. Those polls run the rebalance
listener too: once one has revoked or assigned partitions, nothing more is
given and :attr:`HeldRecords.rebalanced` says so, and the step must produce
nothing (the loop takes over first), or it would commit a batch of
partitions the replica no longer holds.
"""

from typing import Any

from kafka import KafkaConsumer, TopicPartition

from stream_dedup.kafka.assignments import AssignmentNotes
from stream_dedup.kafka.processed_lag import ProcessedLag

Polled = dict[TopicPartition, list[Any]]


class HeldRecords:
    """None beyond the step's poll (what a step is given where nothing more is asked of the client)."""

    def poll(self) -> Polled:
        """The records the client holds, without waiting."""
        return {}

    @property
    def rebalanced(self) -> bool:
        """Whether a poll of this step revoked or assigned partitions."""
        return False


NOTHING_HELD = HeldRecords()


class GroupHeldRecords(HeldRecords):
    """What the session's group consumer holds, polled with no wait, until a rebalance."""

    def __init__(
        self, consumer: KafkaConsumer, assignments: AssignmentNotes, max_records: int, lag: ProcessedLag
    ) -> None:
        self.consumer = consumer
        self.assignments = assignments
        self.max_records = max_records
        self.lag = lag

    def poll(self) -> Polled:
        if self.rebalanced:
            return {}
        polled: Polled = self.consumer.poll(timeout_ms=0, max_records=self.max_records)
        if self.rebalanced:
            return {}  # polled with the new assignment: fetched again after the takeover's seeks
        self.lag.given(polled)
        return polled

    @property
    def rebalanced(self) -> bool:
        return not self.assignments.holding or self.assignments.pending
