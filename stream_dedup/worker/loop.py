"""The worker: restore, then consume, detect and publish in transactions, until told to stop.

A *session* is one connected lifetime: restore the index (newest valid
snapshot plus the changelog after it), join the group, then either stand by
(tailing the changelog) or, holding the partitions, process batches. Any
Kafka failure ends the session: its open transaction is aborted, and since
the detector may already hold the aborted batch, the next session rebuilds
the index from the snapshot and the changelog instead of trusting memory.
"""

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import MemberToRemove
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import Detector
from stream_dedup.kafka.clients import group_consumer, transactional_producer
from stream_dedup.worker.batch import Destinations, publish_batch
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.replay import ChangelogReplay
from stream_dedup.worker.settings import WorkerSettings
from stream_dedup.worker.snapshot_store import SnapshotCoverage, SnapshotSchedule, SnapshotStore
from stream_dedup.worker.topics import ensure_stage_topics

log = logging.getLogger(__name__)

_MAX_BACKOFF_SECONDS = 30.0
_LAG_EVERY_SECONDS = 1.0


class Worker:
    """Runs the stage until :meth:`request_stop` (SIGTERM, SIGINT) is called."""

    def __init__(
        self,
        settings: WorkerSettings,
        events: WorkerEvents | None = None,
        detector_factory: Callable[[DetectionConfig], Detector] = Detector,
    ) -> None:
        """``detector_factory`` makes the empty index a restore starts from (one without a snapshot)."""
        self.settings = settings
        self.events = events or WorkerEvents()
        self.detector_factory = detector_factory
        self.store = SnapshotStore(settings.snapshot_dir, settings.snapshots_kept)
        self._stop = threading.Event()
        self._deadline: float | None = None

    def request_stop(self) -> None:
        """Finish the batch in hand, snapshot, leave the group and return, within the grace period."""
        if not self._stop.is_set():
            self._deadline = time.monotonic() + self.settings.shutdown_grace_seconds
            self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def remaining_grace(self) -> float:
        return float("inf") if self._deadline is None else self._deadline - time.monotonic()

    def run(self) -> None:
        """Sessions, one after another, until stopped.

        Which errors restart a session and which end the process:

        - :class:`KafkaError` (broker unavailable, producer fenced, transaction
          timed out, a lost group join): the session ends, its transaction is
          aborted, and a fresh session restores from the snapshot and the
          changelog after a pause (1 s, doubling up to 30 s).
        - :class:`~stream_dedup.errors.StreamDedupError` (a changelog of other
          signature parameters or of another input, a snapshot of other
          parameters, :class:`~stream_dedup.errors.ReplayTimeoutError`): raised
          to the caller; ``stream-dedup run`` exits 1 with the message. Retrying
          in-process would meet the same changelog, snapshot or brokers.
        - :class:`OSError` (the snapshot directory cannot be created or read):
          raised too, exit 1. A failed snapshot *write* is not an error: it is
          reported and the changelog keeps everything.
        - Anything else is a bug: raised with its traceback.
        """
        ensure_stage_topics(self.settings)
        backoff = 1.0
        while not self.stopping:
            session = _Session(self)
            try:
                session.run()
                backoff = 1.0
            except KafkaError as error:
                log.error("Kafka error, restarting the session in %.0f s: %r", backoff, error)
                self._stop.wait(backoff)
                backoff = min(2 * backoff, _MAX_BACKOFF_SECONDS)
            finally:
                session.close()


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """Notes assignments; the session acts on them after the poll (errors in a listener are swallowed)."""

    def __init__(self, session: "_Session") -> None:
        self.session = session

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.session.active = False
        self.session.awaiting_assignment_since = time.monotonic()

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.session.new_assignment = list(assigned)
        self.session.awaiting_assignment_since = None


class _Session:
    """One connected lifetime of the worker (see the module docstring)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.settings = s = worker.settings
        self.events = worker.events
        self.signature_fingerprint = s.detection.signature_fingerprint()
        self.active = False
        self.new_assignment: list[Any] | None = None
        #: Set while joining the group: kafka-python 3.0 can lose a join (see _check_join).
        self.awaiting_assignment_since: float | None = time.monotonic()
        self.positions: dict[int, int] = {}
        self.destinations = Destinations(s.output_topic, s.dead_letter_topic, s.changelog_topic, s.unique_topic)
        self.replay: ChangelogReplay | None = None
        self.producer: KafkaProducer | None = None
        self.consumer: KafkaConsumer | None = None
        self.detector = worker.detector_factory(s.detection)
        self.schedule = SnapshotSchedule(s.snapshot_interval_seconds, s.snapshot_every_documents)
        self._last_lag = 0.0

    def run(self) -> None:
        self._restore()
        s = self.settings
        self.producer = transactional_producer(s.connection(), s.transactional_id, s.transaction_timeout_seconds)
        # Fences any earlier producer with this transactional id and aborts its
        # open transaction: a worker restarted after kill -9 starts clean.
        self.producer.init_transactions()
        self.consumer = group_consumer(
            s.connection(), s.group_id, s.instance_id, s.session_timeout_seconds, s.batch_size
        )
        self.consumer.subscribe([s.input_topic], listener=_Rebalance(self))
        # Fetch the metadata after subscribing and before joining: a group leader
        # that does not know the partitions yet assigns nothing, and the group then
        # sits with no active member until the next rebalance. After subscribing,
        # so that kafka-python records the input's partitions as the metadata the
        # assignment was made with: assigning from an empty record makes it rejoin
        # (a second rebalance, where it can lose the join) as soon as metadata
        # arrives. topics() always asks the broker; partitions_for_topic() may
        # answer from the cache.
        self.consumer.topics()
        self.events.role_changed("standby", "joining the group")
        while not self.worker.stopping:
            polled = self.consumer.poll(timeout_ms=s.batch_timeout_ms, max_records=s.batch_size)
            self.events.heartbeat()
            self._check_join()
            if self.new_assignment is not None:
                # Records polled with the new assignment started from the committed
                # offsets; the takeover may seek elsewhere, so they are dropped and fetched again.
                self._take_over(self.new_assignment)
                self.new_assignment = None
                continue
            if self.worker.stopping:
                break  # unprocessed records are simply fetched again by whoever runs next
            records = [r for tp in sorted(polled) for r in polled[tp]]
            if records and self.active:
                self._publish(records)
            elif not self.active and self.replay_or_fail().apply_available(self.detector):
                self._report_index()  # a standby's index grows as it tails the changelog
            self._report_lag()
            self._maybe_snapshot()

    def _check_join(self) -> None:
        """End the session if a group join never completes.

        kafka-python 3.0.12 can lose a join whose response arrives between two
        polls: it never installs the assignment nor resumes heartbeats, and the
        worker would stand by silently forever. A fresh session joins again.
        """
        waited = self.awaiting_assignment_since
        limit = max(30.0, 3 * self.settings.session_timeout_seconds)
        if waited is not None and time.monotonic() - waited > limit:
            raise KafkaError(f"no partition assignment {limit:.0f} s after (re)joining the group")

    def replay_or_fail(self) -> ChangelogReplay:
        assert self.replay is not None, "the session restores before it polls"
        return self.replay

    def _restore(self) -> None:
        """Newest usable snapshot, then the changelog after it."""
        s = self.settings
        self.events.role_changed("restoring", "restoring state from snapshot and changelog")
        started = time.perf_counter()
        self.replay = replay = ChangelogReplay(
            s.connection(), s.changelog_topic, s.input_topic, self.signature_fingerprint, 0, {}, self.events
        )
        first, end = replay.bounds()

        def usable(coverage: SnapshotCoverage) -> str | None:
            if coverage.changelog_offset > end:
                return f"it covers changelog offset {coverage.changelog_offset}, past the changelog's end {end}"
            if coverage.changelog_offset < first:
                return f"the changelog no longer holds offsets {coverage.changelog_offset}..{first} after it"
            return None

        loaded = self.worker.store.load_newest(s.detection, s.changelog_topic, usable)
        if loaded is None:
            log.info("no usable snapshot: replaying the whole changelog (offsets %d..%d)", first, end)
            replay.skip_to(first, {})
        else:
            self.detector, coverage = loaded
            replay.skip_to(coverage.changelog_offset, coverage.positions)
            self.schedule.covers(coverage.changelog_offset, self.detector)
            self.events.snapshot_current(coverage.written_at)
        replayed = replay.catch_up(self.detector)
        if len(self.detector) == 0:
            self.schedule.covers(replay.applied_offset, self.detector)  # nothing worth a snapshot yet
            self.events.snapshot_current(time.time())  # an empty index needs no snapshot to be whole
        self._report_index()
        log.info(
            "restored %d documents (%d replayed from the changelog) in %.2f s",
            len(self.detector),
            replayed,
            time.perf_counter() - started,
        )

    def _take_over(self, assigned: list[Any]) -> None:
        """Become active (or stay standby if nothing was assigned)."""
        self.events.partitions_assigned(len(assigned))
        if not assigned:
            self.active = False
            self.events.role_changed("standby", "standby: another replica holds the partitions")
            log.info("standby: another replica holds the partitions; tailing the changelog")
            return
        consumer, replay = self.consumer, self.replay_or_fail()
        assert consumer is not None
        # The committed offsets and the changelog are written in one transaction,
        # but become visible separately: wait until the changelog has caught up
        # with the offsets, or the index would miss batches whose verdicts were published.
        deadline = time.monotonic() + self.settings.transaction_timeout_seconds + 30
        while True:
            replay.catch_up(self.detector)
            committed = {tp.partition: consumer.committed(tp) for tp in assigned}
            behind = {p: c for p, c in committed.items() if c is not None and replay.positions.get(p, -1) < c}
            if not behind:
                break
            if time.monotonic() > deadline:
                log.warning("the changelog lags the committed offsets %s; resuming from the offsets", behind)
                break
            time.sleep(0.2)
        for tp in assigned:
            known = [o for o in (replay.positions.get(tp.partition), committed.get(tp.partition)) if o is not None]
            if known:
                consumer.seek(tp, max(known))
            else:
                consumer.seek_to_beginning(tp)  # never committed: the whole partition is new
        self.positions = dict(replay.positions)
        self.active = True
        self._report_index()
        self.events.role_changed("active", f"processing {len(assigned)} partitions")
        log.info("active: %d partitions of %s", len(assigned), self.settings.input_topic)

    def _report_index(self) -> None:
        self.events.index_changed(
            len(self.detector), self.detector.memory_bytes(), self.detector.index.evicted_documents
        )

    def _publish(self, records: list[Any]) -> None:
        assert self.producer is not None and self.consumer is not None
        started = time.perf_counter()
        try:
            committed = publish_batch(
                records,
                self.detector,
                self.producer,
                self.consumer.group_metadata(),
                self.positions,
                self.settings.input_reading(),
                self.destinations,
                self.signature_fingerprint,
                started,
            )
        except KafkaError as error:
            self._abort(error)
            raise
        self.replay_or_fail().skip_to(committed.changelog_offset, self.positions)
        self.events.batch_committed(committed.report)

    def _abort(self, error: KafkaError) -> None:
        """Abort the open transaction if the producer still can; the broker aborts it otherwise."""
        log.error("batch failed, aborting its transaction: %r", error)
        self.events.transaction_aborted(type(error).__name__)
        assert self.producer is not None
        try:
            self.producer.flush(timeout=5)
            self.producer.abort_transaction(timeout_ms=5000)
        except KafkaError as abort_error:
            log.warning("could not abort (the transaction times out on the broker): %r", abort_error)

    def _report_lag(self) -> None:
        if not self.active or time.monotonic() - self._last_lag < _LAG_EVERY_SECONDS:
            return
        assert self.consumer is not None
        self._last_lag = time.monotonic()
        lag = {}
        for tp in self.consumer.assignment():
            end = self.consumer.highwater(tp)
            if end is not None:
                lag[(tp.topic, tp.partition)] = max(0, end - self.consumer.position(tp))
        self.events.lag_measured(lag)

    def _maybe_snapshot(self) -> None:
        store, replay = self.worker.store, self.replay_or_fail()
        if not self.schedule.due(self.detector) or store.writing:
            return
        unchanged = replay.applied_offset == self.schedule.covered_offset
        self.schedule.covers(replay.applied_offset, self.detector)
        if unchanged:
            self.events.snapshot_current(time.time())  # nothing new: the last snapshot is still whole
            return
        coverage = SnapshotCoverage(self.settings.changelog_topic, replay.applied_offset, dict(replay.positions))
        store.write_in_background(self.detector, coverage, self.events.snapshot_written, self._snapshot_failed)

    def _snapshot_failed(self, error: BaseException) -> None:
        log.error("snapshot failed (the changelog still holds everything): %r", error)
        self.events.snapshot_failed(type(error).__name__)

    def close(self) -> None:
        """Release everything; when stopping, snapshot first if the grace period allows and leave the group."""
        if self.worker.stopping:
            self.events.role_changed("stopping", "shutting down")
            self._final_snapshot()
        if self.consumer is not None:
            self.consumer.close(timeout_ms=max(1000, int(min(5.0, self.worker.remaining_grace()) * 1000)))
            if self.worker.stopping:
                self._leave_group()
        if self.producer is not None:
            self.producer.close(timeout=max(1.0, min(5.0, self.worker.remaining_grace())))
        if self.replay is not None:
            self.replay.close()

    def _final_snapshot(self) -> None:
        store, replay = self.worker.store, self.replay
        if replay is None or not store.wait(max(0.0, self.worker.remaining_grace() / 2)):
            return
        if replay.applied_offset == self.schedule.covered_offset:
            return
        coverage = SnapshotCoverage(self.settings.changelog_topic, replay.applied_offset, dict(replay.positions))

        def written(seconds: float, pause: float, size: int) -> None:
            self.events.snapshot_written(seconds, pause, size)
            log.info("final snapshot at changelog offset %d (%.2f s)", coverage.changelog_offset, pause + seconds)

        store.write(self.detector, coverage, written, self._snapshot_failed)

    def _leave_group(self) -> None:
        """A static member does not leave the group on close; remove it, so a standby takes over at once."""
        s = self.settings
        try:
            admin = KafkaAdminClient(**s.connection().options())
            try:
                admin.remove_group_members(s.group_id, [MemberToRemove(group_instance_id=s.instance_id)])
            finally:
                admin.close()
        except KafkaError as error:
            log.warning("could not leave the group (the session times out instead): %r", error)


def install_stop_signals(worker: Worker) -> None:
    """SIGTERM and SIGINT ask the worker to stop; past the grace period the process exits regardless."""
    import signal

    def on_signal(signum: int, _frame: object) -> None:
        log.info(
            "received %s: stopping within %.0f s", signal.Signals(signum).name, worker.settings.shutdown_grace_seconds
        )
        worker.request_stop()
        timer = threading.Timer(worker.settings.shutdown_grace_seconds, _exit_late)
        timer.daemon = True
        timer.start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def _exit_late() -> None:
    # Safe at any moment: whatever was not committed is aborted by the broker
    # and processed again by the next worker, like after kill -9.
    log.error("shutdown grace period exceeded: exiting without a clean shutdown")
    os._exit(1)
