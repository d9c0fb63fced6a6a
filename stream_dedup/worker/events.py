"""What the worker reports as it runs, for metrics and health checks to listen to.

The worker calls these hooks; :mod:`stream_dedup.ops` turns them into
Prometheus metrics and health answers. The base class does nothing, so the
worker runs the same without them (in tests, in benchmarks).
"""

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from stream_dedup.engine.verdict import Verdict
from stream_dedup.kafka.messages import Source

Role = Literal["restoring", "standby", "active", "stopping"]


class PublishedDuplicate(NamedTuple):
    """A duplicate verdict that was committed, and the record it was given for."""

    verdict: Verdict
    source: Source


@dataclass(frozen=True)
class BatchReport:
    """One committed batch.

    Attributes:
        verdicts: documents by verdict (``unique``, ``duplicate``).
        dead_letters: dead letters by reason.
        seconds: from the end of the poll to the end of the commit.
        committed_at: when the transaction committed (unix seconds).
        timestamps_ms: per document, the record's Kafka timestamp (-1: none).
        candidates: per document, candidate pairs verified.
        candidate_pairs, verified_pairs: totals of the batch.
        indexed_documents, index_bytes: the index after the batch.
        evicted_documents, hot_bucket_skips: running totals of the index.
        duplicates: the duplicate verdicts published, in the order judged
            (for the status page's list of the last duplicates found).
        settled_by_text, unsettled: pairs too near the threshold for the
            sketch, judged by their texts, or left to the estimate for want
            of a text (see engine.text_verification).
        text_reads: the texts those pairs asked for, by where each came from
            (``kafka.record_texts.TEXT_SOURCES``).
        text_kept_bytes: what the texts kept for them take after the batch, by place
            (``kafka.record_texts.TEXT_PLACES``); empty when no text is kept.
    """

    verdicts: Counter[str]
    dead_letters: Counter[str]
    seconds: float
    committed_at: float
    timestamps_ms: npt.NDArray[np.int64]
    candidates: npt.NDArray[np.int64]
    candidate_pairs: int
    verified_pairs: int
    indexed_documents: int
    index_bytes: int
    evicted_documents: int
    hot_bucket_skips: int
    duplicates: Sequence[PublishedDuplicate] = ()
    settled_by_text: int = 0
    unsettled: int = 0
    text_reads: Counter[str] = field(default_factory=Counter)
    text_kept_bytes: Mapping[str, int] = field(default_factory=dict)

    @property
    def latencies(self) -> npt.NDArray[np.float64]:
        return latencies(self.timestamps_ms, self.committed_at)

    @property
    def records(self) -> int:
        return sum(self.verdicts.values()) + sum(self.dead_letters.values())


def latencies(timestamps_ms: npt.NDArray[np.int64], committed_at: float) -> npt.NDArray[np.float64]:
    """Seconds from each document's record timestamp to the commit; records without one (-1) are left out."""
    stamps = timestamps_ms[timestamps_ms >= 0]
    return committed_at - stamps / 1000.0


@dataclass(frozen=True)
class ProbeCounts:
    """What a shard's probes found in a step, as one process's batch reports it (see :class:`BatchReport`)."""

    candidates: npt.NDArray[np.int64]
    candidate_pairs: int
    verified_pairs: int
    settled_by_text: int
    unsettled: int
    #: The texts asked for, by where each came from, and what the kept texts take (see :class:`BatchReport`).
    text_reads: Counter[str] = field(default_factory=Counter)
    text_kept_bytes: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class StepReport:
    """One committed step of a role of a sharded stage (``docs/scale-out.md``).

    Attributes:
        role: ``signer``, ``shard`` or ``judge``.
        documents: documents the step signed, answered for, or judged.
        verdicts: the judge's verdicts, by kind.
        dead_letters: the signer's dead letters, by reason.
        indexed_documents, index_bytes: a shard's index after the step.
        timestamps_ms: the judge's: each judged document's record timestamp (end-to-end latency).
        probes: a shard's: what its probes found in the batches it answered.
    """

    role: str
    documents: int
    verdicts: Counter[str] = field(default_factory=Counter)
    dead_letters: Counter[str] = field(default_factory=Counter)
    indexed_documents: int | None = None
    index_bytes: int | None = None
    timestamps_ms: npt.NDArray[np.int64] | None = None
    probes: ProbeCounts | None = None


class WorkerEvents:
    """Hooks called by the worker; override the ones you need."""

    def heartbeat(self) -> None:
        """The loop went round (called at least every poll)."""

    def role_changed(self, role: Role, reason: str) -> None:
        """The replica is now restoring, standing by, active or stopping."""

    def batch_committed(self, report: BatchReport) -> None:
        """A batch's verdicts, dead letters, changelog and offsets were committed."""

    def transaction_aborted(self, reason: str) -> None:
        """A batch's transaction was aborted; its state is rebuilt from the changelog."""

    def partitions_assigned(self, count: int) -> None:
        """A rebalance finished with ``count`` input partitions for this replica."""

    def lag_measured(self, lag: dict[tuple[str, int], int]) -> None:
        """Records behind the end of each assigned input partition (topic, partition)."""

    def partition_waited(self, seconds: float) -> None:
        """The loop held back ``seconds`` more, waiting for a lagging partition (event-time order)."""

    def records_buffered(self, buffered: int, refetched: int) -> None:
        """After a poll: ``buffered`` records are fetched and not yet judged (every partition's).

        ``refetched`` records of that poll found their partition's buffer full
        (``max_partition_buffered_records``) and were let go, to be fetched again.
        """

    def input_deleted(self, topic: str, partition: int, records: int) -> None:
        """Up to ``records`` input records were deleted before they were read: they get no verdict."""

    def record_isolated(self, topic: str, partition: int, offset: int) -> None:
        """A record that kept failing its batch was isolated and sent to the dead-letter topic."""

    def signing_waited(self, seconds: float) -> None:
        """The loop waited ``seconds`` for the signer processes to finish the batch it was about to judge."""

    def signer_restarted(self) -> None:
        """A signer process had died (or stopped answering) and was replaced."""

    def replay_progress(self, documents: int, remaining_records: int) -> None:
        """``documents`` more were re-indexed from the changelog; ``remaining_records`` to go."""

    def index_changed(self, indexed_documents: int, index_bytes: int, evicted_documents: int) -> None:
        """The index changed outside a batch (restored, replayed)."""

    def snapshot_written(self, seconds: float, pause_seconds: float, size_bytes: int) -> None:
        """A snapshot was written: time to write, time the loop paused to capture it, file size."""

    def snapshot_current(self, as_of: float) -> None:
        """The newest snapshot on disk holds the whole index as of ``as_of`` (unix time).

        Called after a restore from a snapshot, and when a snapshot is due but
        nothing changed since the last one (an idle stage is not a stale one).
        """

    def snapshot_failed(self, reason: str) -> None:
        """Writing a snapshot failed (the previous ones are kept)."""

    def step_committed(self, report: StepReport, seconds: float) -> None:
        """A role's step was committed, ``seconds`` after its poll."""

    def merge_waited(self, seconds: float) -> None:
        """The judge: its oldest batch read has waited ``seconds`` for every shard's answers."""
