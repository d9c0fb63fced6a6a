"""What the status page shows beyond the metrics of the moment: their recent past, and the last duplicates found.

Both are bounded, so a worker that runs for months holds the same few
kilobytes: :class:`MetricsHistory` keeps one sample of the document counters
every few seconds for the last quarter of an hour, :class:`RecentDuplicates`
the last few duplicate verdicts committed. The worker's loop thread writes
them (through :class:`~stream_dedup.ops.runtime.MetricsEvents`), the HTTP
threads read them: each holds a lock, so a reader never sees a half-added batch.

Example:
    >>> history = MetricsHistory(WorkerMetrics(), clock=iter([0.0, 5.0, 6.0]).__next__)
    >>> history.sample_if_due(); history.sample_if_due(); history.sample_if_due()
    >>> [sample.at for sample in history.samples()]
    [0.0, 5.0]
"""

import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from stream_dedup.ops.metrics import WorkerMetrics
from stream_dedup.worker.events import PublishedDuplicate

#: One sample per this many seconds ...
SAMPLE_SECONDS = 5.0
#: ... for the last 15 minutes.
SAMPLES_KEPT = 180
#: Duplicates listed on the page.
DUPLICATES_KEPT = 20


@dataclass(frozen=True)
class Sample:
    """The document counters at one moment (``at``: monotonic seconds)."""

    at: float
    documents: float
    duplicates: float


@dataclass(frozen=True)
class Rate:
    """What happened between two samples: documents handled (judged) per second, and the share of them duplicates."""

    at: float
    documents_per_second: float
    duplicate_share: float | None  # None: no document judged in the interval


class MetricsHistory:
    """The document counters of a :class:`WorkerMetrics`, sampled at most once per ``interval_seconds``.

    Args:
        metrics: whose document counters are sampled (the numbers ``/metrics`` shows; see :func:`handled_documents`).
        interval_seconds: the least time between two samples (default 5).
        keep: samples kept, the oldest dropped first (default 180: 15 minutes of 5 s).
        clock: monotonic seconds; replaceable in tests.
    """

    def __init__(
        self,
        metrics: WorkerMetrics,
        interval_seconds: float = SAMPLE_SECONDS,
        keep: int = SAMPLES_KEPT,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.metrics = metrics
        self.interval_seconds = interval_seconds
        self.clock = clock
        self._samples: deque[Sample] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def sample_if_due(self) -> None:
        """Take a sample if the last one is ``interval_seconds`` old; cheap otherwise (call it every loop)."""
        now = self.clock()
        with self._lock:
            if self._samples and now - self._samples[-1].at < self.interval_seconds:
                return
        documents, duplicates = handled_documents(self.metrics)
        with self._lock:
            self._samples.append(Sample(now, documents, duplicates))

    def samples(self) -> list[Sample]:
        """The samples kept, oldest first."""
        with self._lock:
            return list(self._samples)


#: The parts of a sharded stage that give no verdict: their documents are those they sign or answer for.
PARTS_WITHOUT_VERDICTS = ("signer", "shard")


def stage_part(metrics: WorkerMetrics) -> tuple[str, str]:
    """``(stage_role, shard)`` of the process, as ``stream_dedup_stage_role`` says; ``("all", "")`` if unset."""
    for family in metrics.stage_role.collect():
        for sample in family.samples:
            if sample.value == 1:
                return sample.labels["stage_role"], sample.labels["shard"]
    return "all", ""


def handled_documents(metrics: WorkerMetrics) -> tuple[float, float]:
    """(documents this part of the stage handled, of them duplicates), as ``/metrics`` counts them.

    The single-process stage and a judge: the documents judged, every verdict kind
    (``sum(stream_dedup_documents_total)``). With ``containment_threshold`` set,
    documents judged ``contained`` or ``contains`` are judged documents too; counting only
    ``unique`` and ``duplicate`` showed fewer documents, a lower throughput and a higher
    duplicate share than ``/metrics`` and the dashboard.

    A signer or a shard judges nothing: its documents are those it signed or answered for
    (``stream_dedup_role_documents_total``), and none of them is a duplicate of its own.
    Why: counting their verdicts, the page of a signer signing 50 documents a second said
    "0 documents judged, throughput 0.0 documents/s", as of a stage standing still.
    """
    role, _ = stage_part(metrics)
    documents = duplicates = 0.0
    if role in PARTS_WITHOUT_VERDICTS:
        for family in metrics.role_documents.collect():
            for sample in family.samples:
                if sample.name == "stream_dedup_role_documents_total" and sample.labels["stage_role"] == role:
                    documents += sample.value
        return documents, duplicates
    for family in metrics.documents.collect():
        for sample in family.samples:
            if sample.name == "stream_dedup_documents_total":
                documents += sample.value
                duplicates += sample.value if sample.labels.get("verdict") == "duplicate" else 0.0
    return documents, duplicates


def rates(samples: Sequence[Sample]) -> list[Rate]:
    """The rate of each interval between consecutive samples, stamped with the interval's end."""
    return [_rate(before, after) for before, after in itertools.pairwise(samples)]


def recent_rate(samples: Sequence[Sample], seconds: float = 60.0) -> Rate | None:
    """The rate over the last ``seconds`` of samples (fewer if the history is shorter); None with under two."""
    if len(samples) < 2:
        return None
    newest = samples[-1]
    start = next((s for s in reversed(samples[:-1]) if newest.at - s.at >= seconds), samples[0])
    return _rate(start, newest)


def _rate(before: Sample, after: Sample) -> Rate:
    documents = after.documents - before.documents
    seconds = after.at - before.at
    share = (after.duplicates - before.duplicates) / documents if documents > 0 else None
    return Rate(after.at, documents / seconds if seconds > 0 else 0.0, share)


@dataclass(frozen=True)
class FoundDuplicate:
    """A duplicate verdict as the page lists it: the verdict, its record, and when it was committed (unix time)."""

    published: PublishedDuplicate
    committed_at: float


class RecentDuplicates:
    """The last ``keep`` duplicate verdicts committed, newest first."""

    def __init__(self, keep: int = DUPLICATES_KEPT) -> None:
        self._found: deque[FoundDuplicate] = deque(maxlen=keep)
        self._lock = threading.Lock()

    def add(self, published: Sequence[PublishedDuplicate], committed_at: float) -> None:
        """Add a committed batch's duplicates; only the last ``keep`` of a large batch are looked at."""
        maximum = self._found.maxlen or 0
        newest = [FoundDuplicate(each, committed_at) for each in published[-maximum:]] if maximum else []
        with self._lock:
            self._found.extend(newest)

    def newest_first(self) -> list[FoundDuplicate]:
        with self._lock:
            return list(reversed(self._found))
