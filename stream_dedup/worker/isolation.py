"""Isolating a record that keeps failing its batch, so that one record never stalls the stage.

A batch that fails for a reason other than a broker fault (a bug the record
triggers in the detector, say) fails again on every retry: the session
restarts, restores, and meets the same records in the same order. After
``limit`` consecutive failures with the same error, the records those batches
had in common are *suspects*: each is then judged in a transaction of its
own. A suspect that fails alone is the *offender*: the next time it comes up
it goes to the dead-letter topic (reason :data:`ISOLATED_REASON`) instead of
being judged. Everything else is judged as usual, in the same order.

The failures are remembered by the worker across sessions (a failed batch
ends its session, because the detector may hold part of it).
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

#: The dead-letter reason of a record isolated as the one that made its batch fail.
ISOLATED_REASON = "processing_failed"

Coordinates = tuple[str, int, int]


def coordinates(record: Any) -> Coordinates:
    return (record.topic, record.partition, record.offset)


@dataclass
class BatchFailures:
    """Consecutive identical batch failures, the suspects they point at, and the offenders found.

    Args:
        limit: identical failures in a row before the batch's records are judged one by one.
    """

    limit: int = 3
    #: Records to judge alone, each in its own transaction.
    suspects: set[Coordinates] = field(default_factory=set)
    #: Records that failed alone: coordinates -> the error, for the dead letter.
    offenders: dict[Coordinates, str] = field(default_factory=dict)
    _error: str | None = None
    _streak: int = 0
    _common: set[Coordinates] = field(default_factory=set)

    def failed(self, records: Sequence[Any], error: BaseException) -> Coordinates | None:
        """Note a failed batch; return the offender's coordinates if this failure isolates one."""
        described = f"{type(error).__name__}: {error}"
        batch = {coordinates(r) for r in records}
        if len(batch) == 1 and batch <= self.suspects:
            (offender,) = batch
            self.offenders[offender] = described
            self._reset()
            return offender
        if described == self._error:
            self._streak += 1
            self._common &= batch
        else:
            self._error, self._streak, self._common = described, 1, batch
        if self._streak >= self.limit:
            # Records the failed batches had in common, or (a failure that moves around) the last batch's.
            self.suspects |= self._common or batch
            self._reset()
        return None

    def succeeded(self, records: Sequence[Any]) -> None:
        """A batch committed: its records are no longer suspect, and the streak is broken."""
        # Nearly always nothing is suspect: the batch's records are then not looked at.
        if self.suspects or self.offenders:
            for record in records:
                self.suspects.discard(coordinates(record))
                self.offenders.pop(coordinates(record), None)
        self._reset()

    def cut(self, batch: list[Any]) -> tuple[list[Any], list[Any]]:
        """Split ``batch`` so that a suspect is judged alone: (to judge now, to put back)."""
        if not self.suspects:
            return batch, []
        for i, record in enumerate(batch):
            if coordinates(record) in self.suspects:
                return (batch[:1], batch[1:]) if i == 0 else (batch[:i], batch[i:])
        return batch, []

    def _reset(self) -> None:
        self._error, self._streak, self._common = None, 0, set()
