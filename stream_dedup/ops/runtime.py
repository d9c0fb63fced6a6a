"""Wiring the worker's events to metrics, health checks, the status page and logs for a running process."""

import contextlib
import logging
import time
from collections.abc import Iterator, Mapping

from prometheus_client import Counter

from stream_dedup.errors import ConfigError
from stream_dedup.ops.http import AddressError, Health, OpsServer
from stream_dedup.ops.logs import configure_logging
from stream_dedup.ops.metrics import WorkerMetrics, observe_many
from stream_dedup.ops.status import MetricsHistory, RecentDuplicates
from stream_dedup.worker.events import BatchReport, ProbeCounts, Role, StepReport, WorkerEvents, latencies
from stream_dedup.worker.settings import WorkerSettings

log = logging.getLogger("stream_dedup.ops")


class MetricsEvents(WorkerEvents):
    """Turns what the worker reports into Prometheus metrics, health answers and the status page's history.

    The index's eviction and hot-bucket totals restart from a snapshot's
    values (or from 0 without one) when a session restores, and climb again
    as the index replays what came after; the counters count only what takes
    a total past the highest seen in this process, so they never go down (as
    Prometheus counters must not) and a replay does not count again what the
    process counted before (a shard's evictions doubled at each restart).
    """

    def __init__(self, metrics: WorkerMetrics, health: Health) -> None:
        self.metrics = metrics
        self.health = health
        self.history = MetricsHistory(metrics)
        self.duplicates = RecentDuplicates()
        self._evicted: int | None = None
        self._hot_skips: int | None = None

    def heartbeat(self) -> None:
        self.health.heartbeat()
        self.history.sample_if_due()

    def role_changed(self, role: Role, reason: str) -> None:
        self.metrics.set_role(role)
        self.health.set_state(role in ("active", "standby"), role, reason)
        if role == "restoring":
            self._holds_nothing()

    def _holds_nothing(self) -> None:
        """A restoring replica holds no partition: its session's consumer is closed, or not made yet.

        Why: after a Kafka error the replica restores (or waits for the brokers) for as long as they
        stay away, and the last session's lag series and partition count stood meanwhile: a replica
        that held nothing said it held every partition, beside the standby that took them over, the
        alerts summed its frozen lag with the new active's (a false StreamDedupNoProgress once the
        input went quiet), and the status page showed that lag as a fact.
        """
        self.metrics.assigned_partitions.set(0)
        self.metrics.consumer_lag.clear()
        self.metrics.buffered_records.set(0)
        self.metrics.merge_wait.set(0)

    def batch_committed(self, report: BatchReport) -> None:
        m = self.metrics
        for verdict, count in report.verdicts.items():
            m.documents.labels(verdict).inc(count)
        for reason, count in report.dead_letters.items():
            m.dead_letters.labels(reason).inc(count)
        # The single-process stage is every role at once: its documents count as the role "all".
        m.role_documents.labels("all").inc(sum(report.verdicts.values()))
        m.batch_duration.observe(report.seconds)
        m.batch_documents.observe(report.records)
        observe_many(m.end_to_end_latency, report.latencies)
        self._probes_found(
            ProbeCounts(
                report.candidates,
                report.candidate_pairs,
                report.verified_pairs,
                report.settled_by_text,
                report.unsettled,
                report.text_reads,
                report.text_kept_bytes,
            )
        )
        m.transactions.labels("committed").inc()
        m.last_commit.set(time.time())
        self._hot_skips = _count_increase(m.hot_bucket_skips, self._hot_skips, report.hot_bucket_skips)
        self.index_changed(report.indexed_documents, report.index_bytes, report.evicted_documents)
        self.duplicates.add(report.duplicates, report.committed_at)

    def transaction_aborted(self, reason: str) -> None:
        self.metrics.transactions.labels("aborted").inc()

    def partitions_assigned(self, count: int) -> None:
        """A new assignment: the lag series start again from the partitions now held (measured within a second).

        Why every assignment: a replica that gave some partitions up to another (a signer when a second one
        joins) kept their last lag beside the new holder's, so that an idle stage summed to a lag that never
        went, and a standby has no lag of its own. Likewise a judge's merge wait: one that stood by after
        waiting for a stuck shard kept its last wait for good (measured: 12.9 s, unchanged while it stood
        by with the shards back), and StreamDedupShardLagging fires per instance.
        """
        self.metrics.rebalances.inc()
        self.metrics.assigned_partitions.set(count)
        self.metrics.buffered_records.set(0)  # every assignment starts the event-time merge empty
        self.metrics.consumer_lag.clear()
        self.metrics.merge_wait.set(0)  # nothing read yet waits; an active judge measures again within a second

    def lag_measured(self, lag: dict[tuple[str, int], int]) -> None:
        for (topic, partition), records in lag.items():
            self.metrics.consumer_lag.labels(topic, str(partition)).set(records)

    def partition_waited(self, seconds: float) -> None:
        self.metrics.partition_wait.inc(seconds)

    def records_buffered(self, buffered: int, refetched: int) -> None:
        self.metrics.buffered_records.set(buffered)
        self.metrics.refetched_records.inc(refetched)

    def input_deleted(self, topic: str, partition: int, records: int) -> None:
        self.metrics.deleted_input_records.inc(records)

    def record_isolated(self, topic: str, partition: int, offset: int) -> None:
        self.metrics.isolated_records.inc()

    def signing_waited(self, seconds: float) -> None:
        self.metrics.signing_wait.inc(seconds)

    def signer_restarted(self) -> None:
        self.metrics.signer_restarts.inc()

    def replay_progress(self, documents: int, remaining_records: int) -> None:
        self.metrics.replayed_documents.inc(documents)
        self.metrics.replay_remaining.set(remaining_records)

    def index_changed(self, indexed_documents: int, index_bytes: int, evicted_documents: int) -> None:
        self.metrics.indexed_documents.set(indexed_documents)
        self.metrics.index_bytes.set(index_bytes)
        self._evicted = _count_increase(self.metrics.evicted_documents, self._evicted, evicted_documents)

    def snapshot_written(self, seconds: float, pause_seconds: float, size_bytes: int) -> None:
        self.metrics.snapshot_duration.observe(seconds)
        self.metrics.snapshot_pause.observe(pause_seconds)
        self.metrics.snapshot_size.set(size_bytes)
        self.metrics.snapshot_last_success.set(time.time())

    def snapshot_current(self, as_of: float) -> None:
        self.metrics.snapshot_last_success.set(as_of)

    def snapshot_failed(self, reason: str) -> None:
        self.metrics.snapshot_failures.inc()

    def step_committed(self, report: StepReport, seconds: float) -> None:
        m = self.metrics
        m.role_documents.labels(report.role).inc(report.documents)
        for verdict, count in report.verdicts.items():
            m.documents.labels(verdict).inc(count)
        for reason, count in report.dead_letters.items():
            m.dead_letters.labels(reason).inc(count)
        m.batch_duration.observe(seconds)
        m.batch_documents.observe(report.documents)
        m.transactions.labels("committed").inc()
        now = time.time()
        m.last_commit.set(now)
        if report.timestamps_ms is not None:
            observe_many(m.end_to_end_latency, latencies(report.timestamps_ms, now))
        if report.probes is not None:
            self._probes_found(report.probes)
        if report.indexed_documents is not None and report.index_bytes is not None:
            m.indexed_documents.set(report.indexed_documents)
            m.index_bytes.set(report.index_bytes)

    def _probes_found(self, probes: ProbeCounts) -> None:
        m = self.metrics
        observe_many(m.candidates_per_document, probes.candidates)
        m.candidates.inc(probes.candidate_pairs)
        m.verified_candidates.inc(probes.verified_pairs)
        m.text_verifications.labels("settled").inc(probes.settled_by_text)
        m.text_verifications.labels("unsettled").inc(probes.unsettled)
        for source, count in probes.text_reads.items():
            m.text_reads.labels(source).inc(count)
        for place, size in probes.text_kept_bytes.items():
            m.text_kept_bytes.labels(place).set(size)

    def merge_waited(self, seconds: float) -> None:
        self.metrics.merge_wait.set(seconds)


def _count_increase(counter: Counter, highest: int | None, total: int) -> int:
    """Add what ``total`` passes ``highest`` by to ``counter``; return the new highest (the first total: none added)."""
    if highest is None:
        return total
    if total > highest:
        counter.inc(total - highest)
    return max(highest, total)


@contextlib.contextmanager
def observed_worker(
    settings: WorkerSettings, version: str, unused_settings: Mapping[str, str] | None = None
) -> Iterator[MetricsEvents]:
    """Logging configured, metrics registered and served: the events object to give the worker.

    ``unused_settings``: each setting given that the configuration does not
    read, with the sentence saying so, logged once as a WARNING and kept in
    ``stream_dedup_unused_settings`` (the status page names them).
    """
    configure_logging(settings.log_level, settings.log_format)
    metrics = WorkerMetrics()
    metrics.set_build_info(settings.detection, version)
    metrics.stage_role.labels(settings.role, str(settings.shard_index) if settings.role == "shard" else "").set(1)
    for name, message in (unused_settings or {}).items():
        log.warning("%s", message, extra={"setting": name})
        metrics.unused_settings.labels(name).set(1)
    events = MetricsEvents(metrics, Health())
    server = None
    if settings.metrics_port:
        server = OpsServer(
            settings.metrics_host, settings.metrics_port, metrics, events.health, events.history, events.duplicates
        )
        try:
            server.start()
        except AddressError as error:
            raise ConfigError(f"metrics_{error.part}", str(error)) from error
    log.info(
        "stream-dedup %s starting: %s -> %s; metrics %s",
        version,
        settings.input_topic,
        settings.output_topic,
        f"on http://{settings.metrics_host}:{server.port}/metrics, status page at /"
        if server
        else "off (metrics_port=0)",
        extra={"settings": repr(settings)},
    )
    try:
        yield events
    finally:
        if server is not None:
            server.close()
