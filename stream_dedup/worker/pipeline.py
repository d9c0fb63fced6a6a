"""The signing pipeline: the next batch is read and signed while the one before is judged and committed.

Reading and signing (:mod:`stream_dedup.worker.signing`) are pure functions
of the records, so they can run ahead, in other processes
(:class:`~stream_dedup.worker.signer_pool.SignerPool`), while the worker's
process does what must stay in one place and in order: Kafka I/O, the
event-time merge, the index (probe and insert) and the transaction. With
``signing_processes = 0`` the batch is signed in the worker's process when
its turn comes (:class:`LocalSigners`): the same steps, one after the other.

Exactly-once is untouched: a batch in flight is only records taken from the
merge. Nothing is produced for it before its own transaction, and its records
are not committed, so whatever drops it (a failed batch ending the session, a
rebalance, stopping) leaves them to be fetched again from the committed
offsets, and signed again.

At most one batch is in flight: deeper buys nothing while the worker's own
share of a batch is the larger one, and every batch in flight is taken from
the merge before the batch ahead of it commits.
"""

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.engine.documents import Refusal
from stream_dedup.errors import StreamDedupError
from stream_dedup.kafka.messages import InputReading
from stream_dedup.kafka.oversized_batches import UnreadRecord
from stream_dedup.worker.isolation import ISOLATED_REASON, Coordinates, coordinates
from stream_dedup.worker.signing import Outcome, SignedRecords, read_and_sign


class Signers(Protocol):
    """Where batches are signed: one batch at a time, collected in the order submitted."""

    def submit(self, records: list[Any]) -> None:
        """Start reading and signing ``records``."""

    def collect(self) -> SignedRecords:
        """The batch submitted last, read and signed (waits for it)."""

    def drop(self) -> None:
        """Forget the batch in flight, if any: it is never collected."""


class LocalSigners:
    """Signing in the worker's process, when the batch is collected (``signing_processes = 0``)."""

    def __init__(self, signer: DuplicateDetector, reading: InputReading) -> None:
        self.signer = signer
        self.reading = reading
        self._pending: list[Any] | None = None

    def submit(self, records: list[Any]) -> None:
        self._pending = records

    def collect(self) -> SignedRecords:
        assert self._pending is not None, "collect() without a batch submitted"
        records, self._pending = self._pending, None
        return read_and_sign(records, self.reading, self.signer, self.signer.config.settles_with_texts)

    def drop(self) -> None:
        self._pending = None


class SigningStoppedError(Exception):
    """The worker is stopping while the batch it waits for is being signed: that batch is dropped."""


class SigningFailedError(Exception):
    """Reading and signing a batch failed (a bug one of its records trips, a signer process that keeps dying).

    Handled like a batch that fails: the session ends, and after a few
    identical failures the records are judged one by one
    (:mod:`stream_dedup.worker.isolation`).
    """

    def __init__(self, records: list[Any], cause: Exception) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.records = records
        self.cause = cause


class SigningPipeline:
    """One batch in flight at the signers while the batch before it is judged and committed."""

    def __init__(self, signers: Signers, offenders: Mapping[Coordinates, str]) -> None:
        """``offenders`` (coordinates -> error) are records isolated as failing their batch: never signed."""
        self.signers = signers
        self.offenders = offenders
        self._in_flight: list[Any] = []
        self._refused: dict[int, Refusal] = {}

    @property
    def in_flight(self) -> int:
        """Records of the batch being signed."""
        return len(self._in_flight)

    def advance(self, taken: list[Any]) -> SignedRecords | None:
        """Start signing ``taken`` (possibly nothing); return the batch started before it, signed, if any.

        Raises :class:`SigningFailedError` (with that batch's records) if it
        could not be signed; ``taken`` is then not started.
        """
        signed = self._collect() if self._in_flight else None
        if taken:
            self._submit(taken)
        return signed

    def drop(self) -> None:
        """Forget the batch in flight: its records were never committed and will be fetched again."""
        if self._in_flight:
            self.signers.drop()
        self._in_flight, self._refused = [], {}

    def _submit(self, records: list[Any]) -> None:
        # Nearly always no record is an offender: the batch's records are then not looked at.
        refused = {i: self.offenders.get(coordinates(r)) for i, r in enumerate(records)} if self.offenders else {}
        self._refused = {
            i: Refusal(ISOLATED_REASON, f"its batch kept failing: {error}")
            for i, error in refused.items()
            if error is not None
        }
        # A stand-in for a record of a batch too large to read crosses to no signer process: the wire
        # carries keys and values only, and it would arrive there as a tombstone.
        self._refused |= {i: r.refusal for i, r in enumerate(records) if isinstance(r, UnreadRecord)}
        self._in_flight = records
        # A record isolated as failing its batch is never read or signed again.
        self.signers.submit([r for i, r in enumerate(records) if i not in self._refused])

    def _collect(self) -> SignedRecords:
        records, refused = self._in_flight, self._refused
        self._in_flight, self._refused = [], {}
        try:
            signed = self.signers.collect()
        except (StreamDedupError, SigningStoppedError):
            raise  # the signers cannot work at all (see SignerPool), or we stop: not this batch's fault
        except Exception as error:
            raise SigningFailedError(records, error) from error
        if not refused:
            return replace(signed, records=records)
        outcomes = iter(signed.outcomes)
        merged: list[Outcome] = [refused[i] if i in refused else next(outcomes) for i in range(len(records))]
        return replace(signed, records=records, outcomes=merged)
