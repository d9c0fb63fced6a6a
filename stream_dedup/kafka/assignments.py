"""What the group decided, noted while polling and acted on after the poll.

kafka-python runs a rebalance listener inside ``poll()`` and swallows its
errors, so the listener only takes notes; the loop reads them after the
poll, where a failure ends the session as it should. It also notes since
when a join has been waiting: kafka-python 3.0 can lose a join and never
assign anything, which the loop then treats as a Kafka error; and when the
last one completed, a word from the group coordinator
(:mod:`stream_dedup.kafka.coordinator_silence`).
"""

import time
from typing import Any

from kafka import TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener


class AssignmentNotes(ConsumerRebalanceListener):  # type: ignore[misc]
    """The latest assignment not yet taken, whether the partitions are held, since when a join waits, and when
    the last one completed."""

    def __init__(self) -> None:
        self.holding = False
        self.joining_since: float | None = time.monotonic()
        self.joined_at = time.monotonic()
        self._new: list[TopicPartition] | None = None

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.holding = False
        self.joining_since = time.monotonic()

    def on_partitions_assigned(self, assigned: Any) -> None:
        self._new = list(assigned)
        self.joining_since = None
        self.joined_at = time.monotonic()

    def take(self) -> list[TopicPartition] | None:
        """The assignment made since the last call, once (``None`` if there was none)."""
        new, self._new = self._new, None
        return new

    @property
    def pending(self) -> bool:
        """An assignment was made that :meth:`take` has not given yet."""
        return self._new is not None

    @property
    def standing_by(self) -> bool:
        """The group's last assignment gave this member nothing, and no new join is under way."""
        return not self.holding and self.joining_since is None

    def join_waited(self) -> float:
        """Seconds the current join has waited for an assignment (0 when none is waiting)."""
        return 0.0 if self.joining_since is None else time.monotonic() - self.joining_since
