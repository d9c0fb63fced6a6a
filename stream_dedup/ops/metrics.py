"""The worker's Prometheus metrics, in a registry of their own.

Names, types and labels are a contract with the dashboard and the alert rules:
change one only together with them. Every labelled series that can be known in
advance is created at construction, so that ``rate()`` and ``absent()`` work
from the first scrape instead of after the first event of each kind.

Example:
    >>> metrics = WorkerMetrics()
    >>> metrics.set_role("active")
    >>> metrics.documents.labels("unique").inc(980)
    >>> observe_many(metrics.batch_duration, np.array([0.012, 0.015]))
"""

from typing import get_args

import numpy as np
import numpy.typing as npt
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.documents import REASONS
from stream_dedup.engine.verdict import VerdictKind
from stream_dedup.kafka.oversized_batches import BATCH_TOO_LARGE
from stream_dedup.kafka.record_texts import TEXT_PLACES, TEXT_SOURCES
from stream_dedup.roles.unique_forwards import UNIQUE_RECORD_GONE
from stream_dedup.worker.batch import UNIQUE_TOO_LARGE, VERDICT_TOO_LARGE
from stream_dedup.worker.events import Role
from stream_dedup.worker.isolation import ISOLATED_REASON

#: What a replica is doing; exactly one has value 1 in ``stream_dedup_role``.
ROLES: tuple[Role, ...] = get_args(Role)

#: Why a record went to the dead-letter topic instead of being judged.
DEAD_LETTER_REASONS: tuple[str, ...] = (
    *REASONS,
    VERDICT_TOO_LARGE,
    UNIQUE_TOO_LARGE,
    UNIQUE_RECORD_GONE,
    ISOLATED_REASON,
    BATCH_TOO_LARGE,
)

_VERDICTS: tuple[VerdictKind, ...] = get_args(VerdictKind)
_TRANSACTION_OUTCOMES = ("committed", "aborted")

_BATCH_SECONDS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_BATCH_DOCUMENTS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000)
_END_TO_END_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
_CANDIDATES = (0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
_SNAPSHOT_WRITE_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class WorkerMetrics:
    """Every metric the Kafka worker exports, as public attributes.

    Each instance owns its ``registry`` (a :class:`CollectorRegistry`), never the
    global default one, so that tests and two workers in one process do not
    collide on metric names. Serve it with :class:`stream_dedup.ops.http.OpsServer`.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry

        self.build_info = Gauge(
            "stream_dedup_build_info",
            "Constant 1; the labels are the version and the detection parameters.",
            [
                "version",
                "fingerprint",
                "method",
                "threshold",
                "num_perm",
                "sketch_bits",
                "bands",
                "rows_per_band",
                "scheme",
                "shingle_unit",
                "shingle_size",
                "verification",
                "max_hamming",
            ],
            registry=r,
        )
        self.role = Gauge(
            "stream_dedup_role", "1 for the replica's current role, 0 for the others.", ["role"], registry=r
        )

        self.documents = Counter(
            "stream_dedup_documents_total", "Documents judged, by verdict.", ["verdict"], registry=r
        )
        self.dead_letters = Counter(
            "stream_dedup_dead_letters_total", "Records sent to the dead-letter topic.", ["reason"], registry=r
        )
        self.batch_duration = Histogram(
            "stream_dedup_batch_duration_seconds",
            "Time from poll to commit of one batch.",
            buckets=_BATCH_SECONDS,
            registry=r,
        )
        self.batch_documents = Histogram(
            "stream_dedup_batch_documents", "Records per batch.", buckets=_BATCH_DOCUMENTS, registry=r
        )
        self.end_to_end_latency = Histogram(
            "stream_dedup_end_to_end_latency_seconds",
            "Commit time minus the record's Kafka timestamp.",
            buckets=_END_TO_END_SECONDS,
            registry=r,
        )
        self.consumer_lag = Gauge(
            "stream_dedup_consumer_lag_records",
            "Records of the partition not yet processed: from the last committed offset to its end.",
            ["topic", "partition"],
            registry=r,
        )
        self.assigned_partitions = Gauge("stream_dedup_assigned_partitions", "Input partitions assigned.", registry=r)

        self.indexed_documents = Gauge("stream_dedup_indexed_documents", "Documents in the index.", registry=r)
        self.index_bytes = Gauge("stream_dedup_index_bytes", "Memory held by the index.", registry=r)
        self.evicted_documents = Counter(
            "stream_dedup_evicted_documents_total", "Documents dropped from the index by retention.", registry=r
        )
        self.candidates_per_document = Histogram(
            "stream_dedup_candidates_per_document",
            "Candidate documents verified per document.",
            buckets=_CANDIDATES,
            registry=r,
        )
        self.candidates = Counter("stream_dedup_candidates_total", "Candidate pairs verified.", registry=r)
        self.verified_candidates = Counter(
            "stream_dedup_verified_candidates_total", "Candidate pairs that passed verification.", registry=r
        )
        self.text_verifications = Counter(
            "stream_dedup_text_verifications_total",
            "Candidate pairs too near the threshold for the sketch: settled by their texts, or unsettled (no text).",
            ["outcome"],
            registry=r,
        )
        self.text_reads = Counter(
            "stream_dedup_text_reads_total",
            "Texts of input records read again for pairs settled by text, by where each came from: "
            "batch, memory (text_cache_mb), disk (text_spool_mb), kafka (fetched), none (gone).",
            ["source"],
            registry=r,
        )
        self.text_kept_bytes = Gauge(
            "stream_dedup_text_kept_bytes",
            "Texts of input records kept for pairs settled by text, by place: memory (compressed, "
            "text_cache_mb) and disk (the spool, text_spool_mb).",
            ["place"],
            registry=r,
        )
        self.hot_bucket_skips = Counter(
            "stream_dedup_hot_bucket_skips_total",
            "Band entries skipped or displaced by the hot-bucket cap (a band keeps a key's newest documents).",
            registry=r,
        )

        self.snapshot_duration = Histogram(
            "stream_dedup_snapshot_duration_seconds",
            "Time to write a snapshot file.",
            buckets=_SNAPSHOT_WRITE_SECONDS,
            registry=r,
        )
        self.snapshot_pause = Histogram(
            "stream_dedup_snapshot_pause_seconds",
            "How long the processing loop paused to capture a snapshot.",
            buckets=_BATCH_SECONDS,
            registry=r,
        )
        self.snapshot_size = Gauge("stream_dedup_snapshot_size_bytes", "Size of the last snapshot file.", registry=r)
        self.snapshot_last_success = Gauge(
            "stream_dedup_snapshot_last_success_timestamp_seconds",
            "Unix time of the last snapshot written.",
            registry=r,
        )
        self.snapshot_failures = Counter("stream_dedup_snapshot_failures_total", "Snapshots that failed.", registry=r)

        self.transactions = Counter(
            "stream_dedup_transactions_total", "Kafka transactions, by outcome.", ["outcome"], registry=r
        )
        self.rebalances = Counter("stream_dedup_rebalances_total", "Consumer group rebalances.", registry=r)
        self.replayed_documents = Counter(
            "stream_dedup_replayed_documents_total",
            "Changelog documents re-indexed at restore or by a standby.",
            registry=r,
        )
        self.replay_remaining = Gauge(
            "stream_dedup_replay_remaining_records", "Changelog records still to replay.", registry=r
        )
        self.partition_wait = Counter(
            "stream_dedup_partition_wait_seconds_total",
            "Time the loop held back, waiting for a lagging input partition (event-time order).",
            registry=r,
        )
        self.buffered_records = Gauge(
            "stream_dedup_buffered_records",
            "Input records fetched and not yet judged, waiting in the event-time merge (all partitions).",
            registry=r,
        )
        self.refetched_records = Counter(
            "stream_dedup_refetched_records_total",
            "Input records let go at a full partition buffer (max_partition_buffered_records), to be fetched again.",
            registry=r,
        )
        self.deleted_input_records = Counter(
            "stream_dedup_deleted_input_records_total",
            "Input records deleted (retention, kafka-delete-records) before they were read: no verdict (at most).",
            # No labels: a series from the start, 0 until a loss (the WARNING names the partition and offsets).
            registry=r,
        )
        self.isolated_records = Counter(
            "stream_dedup_isolated_records_total",
            "Records that kept failing their batch, isolated and sent to the dead-letter topic.",
            registry=r,
        )
        self.signing_wait = Counter(
            "stream_dedup_signing_wait_seconds_total",
            "Time the loop waited for the signer processes to finish the batch it was about to judge.",
            registry=r,
        )
        self.signer_restarts = Counter(
            "stream_dedup_signer_restarts_total",
            "Signer processes that died or stopped answering and were replaced.",
            registry=r,
        )
        self.last_commit = Gauge(
            "stream_dedup_last_commit_timestamp_seconds", "Unix time of the last committed transaction.", registry=r
        )

        self.stage_role = Gauge(
            "stream_dedup_stage_role",
            "Constant 1; the labels say which part of the stage the process runs (all, signer, shard, judge).",
            ["stage_role", "shard"],
            registry=r,
        )
        self.unused_settings = Gauge(
            "stream_dedup_unused_settings",
            "1 per setting given explicitly that this process's configuration does not read (its start-up log "
            "says why).",
            ["setting"],
            registry=r,
        )
        self.role_documents = Counter(
            "stream_dedup_role_documents_total",
            "Documents a role of a sharded stage signed, answered for or judged, in committed steps.",
            ["stage_role"],
            registry=r,
        )
        self.merge_wait = Gauge(
            "stream_dedup_merge_wait_seconds",
            "The judge: how long the oldest batch read has waited for every shard's answers (0: none waits).",
            registry=r,
        )

        for verdict in _VERDICTS:
            self.documents.labels(verdict)
        for reason in DEAD_LETTER_REASONS:
            self.dead_letters.labels(reason)
        for outcome in _TRANSACTION_OUTCOMES:
            self.transactions.labels(outcome)
        for outcome in ("settled", "unsettled"):
            self.text_verifications.labels(outcome)
        for source in TEXT_SOURCES:
            self.text_reads.labels(source)
        for place in TEXT_PLACES:
            self.text_kept_bytes.labels(place)
        self.set_role("restoring")

    def set_build_info(self, config: DetectionConfig, version: str) -> None:
        """Export ``version`` and the detection parameters as the labels of one constant series."""
        banding = config.banding()
        # One series only: a second call replaces the first instead of adding to it.
        self.build_info.clear()
        self.build_info.labels(
            version=version,
            fingerprint=config.fingerprint(),
            method=config.method,
            threshold=str(config.threshold),
            num_perm=str(config.num_perm),
            sketch_bits=str(config.sketch_bits),
            bands=str(banding.bands),
            rows_per_band=str(banding.rows_per_band),
            scheme=config.scheme,
            shingle_unit=config.shingle_unit,
            shingle_size=str(config.shingle_size),
            verification=config.verification,
            max_hamming=str(config.max_hamming),
        ).set(1)

    def set_role(self, role: Role) -> None:
        """Set ``role`` to 1 and the other roles to 0."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
        for each in ROLES:
            self.role.labels(each).set(1 if each == role else 0)


def observe_many(histogram: Histogram, values: npt.ArrayLike) -> None:
    """Add every value to ``histogram`` at once; the same as ``histogram.observe(v)`` for each.

    Why: the worker observes about a thousand values per batch, and a thousand
    ``observe()`` calls (each a Python loop over the buckets, under a lock) cost
    more than the numpy work they measure. Here one ``searchsorted`` finds every
    value's bucket and each bucket is incremented once.

    prometheus_client has no public bulk API, so this reads three attributes of
    an unlabelled (or ``.labels()``-ed) histogram that its own ``observe`` uses:
    ``_upper_bounds`` (sorted, ending in +Inf), ``_buckets`` (one non-cumulative
    count per bound) and ``_sum``; it increments them only through their public
    ``inc``. The tests compare the exposed text with ``observe`` to catch a
    change of those internals.

    Bucket counts are exactly those of ``observe`` (a value goes to the first
    bound ``>=`` it; NaN to no bucket). The sum is the same up to the order of
    the floating-point additions: it is added as one total, so its last digit
    can differ from a value-by-value sum.

    Args:
        histogram: a histogram without labels, or one child from ``.labels()``.
        values: the observations, any shape; converted to ``float64``.
    """
    amounts = np.asarray(values, dtype=np.float64).ravel()
    if amounts.size == 0:
        return
    if not hasattr(histogram, "_buckets"):
        raise ValueError("observe_many needs a histogram without labels, or a child from .labels(...)")
    bounds = np.asarray(histogram._upper_bounds, dtype=np.float64)
    # side="left": the first bound with amount <= bound, as in Histogram.observe.
    # NaN sorts after +Inf and so lands at len(bounds), outside every bucket.
    positions = np.searchsorted(bounds, amounts, side="left")
    counts = np.bincount(positions, minlength=len(bounds) + 1)[: len(bounds)]
    # inf + -inf is NaN and a big sum may overflow, as with observe(), which does not warn either.
    with np.errstate(invalid="ignore", over="ignore"):
        total = float(amounts.sum())
    histogram._sum.inc(total)
    for bucket, count in zip(histogram._buckets, counts.tolist(), strict=True):
        if count:
            bucket.inc(count)
