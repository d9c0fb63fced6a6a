"""The worker: restore, then consume, detect and publish in transactions, until told to stop.

A *session* is one connected lifetime: restore the index (newest valid
snapshot plus the changelog after it), connect, join the group, then go round
one loop (:meth:`_Session.run`): poll; take over on a new assignment; then
either, holding the partitions, take the next records in event-time order
across partitions (:mod:`stream_dedup.worker.intake`) and start reading and
signing them, while the batch taken before them, signed meanwhile
(:mod:`stream_dedup.worker.pipeline`), is judged, and the one judged before
that is committed in one transaction in the background (verdicts, dead
letters, changelog record and input offsets, see :mod:`stream_dedup.worker.batch`
and :mod:`stream_dedup.worker.committer`); or, standing by, tail the changelog;
and snapshot when due. Records fetched, being signed, or judged and not yet
committed are fetched again after a crash. Any Kafka failure ends the
session: its open transaction is aborted, and since the detector may already
hold the aborted batch (and the one judged after it), the next session
rebuilds the index from the snapshot and the changelog instead of trusting
memory.

Failures, where they are handled, and what the operator sees (metric names
without their ``stream_dedup_`` prefix):

=========================================  ==================================  =========================================
failure                                    handled in                          what the operator sees
=========================================  ==================================  =========================================
Kafka error in a batch (broker down,       ``_Session.finish_commit`` aborts;  ERROR "batch failed, aborting its
producer fenced, transaction timed out)    ``Worker.run`` starts a new         transaction", ``transactions_total``
                                           session after 1-30 s                ``{outcome="aborted"}``, role
                                                                               ``restoring``
Kafka error outside a batch (poll, join,   ``Worker.run``: new session         ERROR "Kafka error, restarting the
takeover, restore)                                                             session in N s", role ``restoring``
                                                                               (not ready) until a session restores
an input record not read again to settle   ``RecordTexts`` raises a Kafka      ERROR "Kafka error, restarting the
a pair near the threshold (no broker, a    error: the batch is judged again    session in N s"; the verdicts are
fetch failed, 60 s of reads)               in a new session; a record gone     an uninterrupted run's
                                           (retention, or not given in 10      ``text_verifications_total{outcome=
                                           tries) is no failure: its pairs go  "unsettled"}`` counts those
                                           to the estimate
a group join that never completes          ``_Session.check_join`` raises a    the same, after max(30 s, 3 x
(kafka-python can lose one)                Kafka error                         ``session_timeout_seconds``)
the group coordinator silent (its broker   ``_Session.check_coordinator``      ERROR "Kafka error, restarting the
stopped, or cut off): kafka-python looks   raises ``CoordinatorSilentError``   session ...: CoordinatorSilentError:
for it again and again, and the poll       when no heartbeat was answered for  no answer from the coordinator ...";
returns nothing, on a standby as on an     3 x ``session_timeout_seconds``; a  role ``restoring`` (``/readyz`` 503)
active replica with a quiet input          new session rejoins                 until the brokers answer again
the brokers refuse one of our timeouts     ``raise_if_timeout_refused`` in     "stream-dedup: invalid setting
(their transaction.max.timeout.ms, or      ``Worker.run``: exit 2, no new      'transaction_timeout_seconds'" (or
group.min/max.session.timeout.ms)          session (each would be refused      'session_timeout_seconds'), naming
                                           the same)                           the brokers' setting
another process under this replica's       ``raise_if_instance_taken`` (kafka. "stream-dedup: invalid setting
instance_id (it fenced this one: its       instance_clash) in ``Worker.run``:  'instance_id': another process
commit refused, and the group's member     exit 2, no new session (it would    joined group 'G' as instance_id
for the id is another process's)           fence the other in turn, for ever)  'I' and fenced this one ..."
a record that cannot be processed (any     ``read_and_sign``: dead-letter      WARNING "dead letter (reason)",
exception reading or signing it, too       topic, unchanged, with its reason   ``dead_letters_total{reason}``
deep, too long an id)
a record too large for its destination     ``record_fit``: a truncated copy    WARNING "dead letter (reason),
(dead letter, verdict, unique forward)     with its hash; a verdict or         truncated (...)",
                                           forward that does not fit: a dead   ``dead_letters_total{reason}``
                                           letter instead
a written topic with max.message.bytes     ``size_limits``: exit 1             the message names the topic and the
below 16 KiB                                                                   setting
a written topic (output, dead-letter,      ``commit_transaction`` (kafka.      ERROR "the transaction cannot commit:
unique) deleted while the stage runs       bounded_commit): a commit not       output_topic 'T' does not exist",
                                           done in 5 s looks for the topics,   "Kafka error, restarting the
                                           raises ``MissingTopicError``; the   session"; WARNING "output_topic 'T'
                                           batch is aborted, and the next      was deleted while the stage ran:
                                           session (``ensure_stage_topics``)   creating it again"; the batch is
                                           creates the topic again             published once, to the new topic
the changelog deleted (while the stage     ``refuse_lost_history`` at the      ERROR "... changelog_topic 'T' does
runs, or since), the group having          start of every session: exit 1,     not exist", then "stream-dedup:
committed offsets                          at every restart too (judging on    changelog_topic 'T' does not exist,
                                           would miss every earlier document)  but group 'G' has committed offsets"
the input topic deleted and created again  ``InputIdentity`` (kafka.          "stream-dedup: input_topic 'T' was
under its name (while the process runs,    input_identity), against the id     deleted and created again under its
or before it started), or another          the changelog and snapshots note,   name, or is another cluster's copy
cluster's copy of it                       at every join and takeover: exit 1  of it (Kafka topic id A when the
                                                                               stage judged it, now B)"
                                           (reading the new topic from the
                                           old offsets would skip its first
                                           records)
a commit that never returns (past the      ``commit_transaction``: a Kafka     ERROR "the transaction's commit has
transaction timeout + 30 s)                error, new session                  not completed after N s"
a batch failing for a reason other than    ``_Session.process_batch`` (or      ERROR "judging a batch failed" (or
Kafka (a record that trips a bug), again   ``_Session.judge`` if signing       "signing a batch failed"); then
and again                                  failed): nothing of it was begun;   ERROR "record T:P:O fails its
                                           ``Worker.run``: new session after   batch",
                                           1 s; after 3 identical failures
                                           its records are judged one per      ``isolated_records_total``,
                                           transaction (``BatchFailures``);    ``dead_letters_total{reason=
                                           the one failing alone is dead-      "processing_failed"}``
                                           lettered, unread
a signer process dies (kill -9, out of     ``SignerPool``: replaced; its       ERROR "signer process N (pid P) exited
memory, a crash) or answers nothing for    share of the batch is signed again  with code C (...); restarting it",
120 s                                      by the new one (nothing of the      ``signer_restarts_total``
                                           batch was produced yet)
the replacement fails the same batch       ``_Session.judge``: a failing       ERROR "signing a batch failed", then
                                           batch (row above), so a record      as a failing batch
                                           that kills signers is isolated
a signer process cannot start, or runs     ``SignerPool.start``: exit 1        the message says what to do
other detection settings                                                       (``signing_processes=0``)
a lagging input partition with nothing     ``EventTimeMerge.take`` waits (no   ``partition_wait_seconds_total``
fetched (event-time order)                 batch) up to                        grows; then the other partitions go
                                           ``max_partition_idle_ms``           on past it
input records deleted before they were     ``BatchIntake.report_resets``:      WARNING "... were deleted before the
read (retention, kafka-delete-records),    kafka-python reads on from the      stage read them ...", naming the
a position out of the log                  partition's beginning; the loss is  offsets; ``deleted_input_records_total
                                           named, never silent                 {topic,partition}``
an input partition far ahead in event      ``BatchIntake.add``: records past   ``refetched_records_total`` grows,
time (its records wait for an older        ``max_partition_buffered_records``  ``buffered_records`` stays bounded
backlog elsewhere)                         let go, fetched again later
changelog behind the committed offsets     ``_Session.take_over`` waits, then  WARNING "the changelog lags the
at a takeover                              resumes from the offsets            committed offsets"
corrupt, foreign or unusable snapshot      ``SnapshotStore.load_newest``:      ERROR "snapshot ... is unusable" or
                                           the one before, or a full replay    WARNING "... skipped"; a longer
                                                                               restore
snapshot or changelog of other signature   not handled: the process exits 1    the message names the parameter, file
parameters, or another input's changelog                                       or topic and what to do
changelog replay stuck (no broker serves   ``ReplayTimeoutError``: exit 1      "changelog ... replay stuck at offset"
it)
the text spool cannot write (disk full),   ``BlockSpool``: turned off (or the  WARNING "cannot spool texts" (or "a
or a spooled block reads back changed      block left out); the texts are      spooled block ... changed"),
                                           fetched from Kafka again            ``text_reads_total{source="kafka"}``
                                                                               grows
a snapshot write fails (disk full)         ``_Session.snapshot_failed``:       ERROR "snapshot failed",
                                           logged, the loop goes on            ``snapshot_failures_total``
SIGTERM, SIGINT                            ``Worker.request_stop``: batch      INFO "received SIGTERM", role
                                           finished (the one being signed is   ``stopping``, exit 0
                                           dropped, never committed), final
                                           snapshot, group left
shutdown grace period exceeded             ``stop_signals``                    ERROR "shutdown grace period
                                                                               exceeded", exit 1
the process paused past                    the broker: a commit under the old  ERROR "batch failed, aborting its
``session_timeout_seconds`` (GC, a frozen  generation is refused (KIP-447);    transaction: CommitFailedError(...
VM, a stopped container), the standby      ``current_membership``: none is     UnknownMemberIdError)" or "...
active meanwhile                           sent under the lost generation      no longer a member of group"; "Kafka
                                           kafka-python sets once it hears     error, restarting the session"; it
                                           (a group left empty would take      stands by again; nothing published
                                           it); a new session rejoins
kill -9, lost machine                      the broker aborts the open          a standby (or the restarted replica)
                                           transaction; the next active        goes active; nothing lost or twice
                                           replica restores; signer processes
                                           see their input close and exit
=========================================  ==================================  =========================================
"""

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import MemberToRemove
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.engine.detector import make_detector
from stream_dedup.kafka.broker_limits import raise_if_timeout_refused
from stream_dedup.kafka.clients import (
    SessionBackoff,
    close_producer,
    end_offsets_reader,
    group_consumer,
    log_offsets,
    transactional_producer,
)
from stream_dedup.kafka.codec_check import raise_if_codec_missing
from stream_dedup.kafka.coordinator_silence import check_heard_from_coordinator
from stream_dedup.kafka.group_offsets import committed_offset
from stream_dedup.kafka.input_identity import InputIdentity
from stream_dedup.kafka.instance_clash import raise_if_instance_taken
from stream_dedup.kafka.membership import current_membership
from stream_dedup.kafka.processed_lag import ProcessedLag
from stream_dedup.kafka.record_texts import RecordTexts
from stream_dedup.worker.batch import judge_batch
from stream_dedup.worker.committer import BackgroundCommit
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.intake import BatchIntake
from stream_dedup.worker.isolation import BatchFailures
from stream_dedup.worker.ordering import EventTimeMerge
from stream_dedup.worker.pipeline import LocalSigners, SigningFailedError, SigningPipeline, SigningStoppedError
from stream_dedup.worker.replay import ChangelogReplay, ReplayStoppedError
from stream_dedup.worker.restore import report_index, restore
from stream_dedup.worker.settings import WorkerSettings
from stream_dedup.worker.signer_pool import SignerPool
from stream_dedup.worker.signing import SignedRecords
from stream_dedup.worker.snapshot_store import SnapshotCoverage, SnapshotSchedule, SnapshotStore
from stream_dedup.worker.topics import ensure_stage_topics, stage_destinations

log = logging.getLogger(__name__)

_LAG_EVERY_SECONDS = 1.0


class _BatchFailedError(Exception):
    """A batch failed for a reason other than Kafka; its transaction is aborted and the session ends."""


class Worker:
    """Runs the stage until :meth:`request_stop` (SIGTERM, SIGINT) is called."""

    def __init__(
        self,
        settings: WorkerSettings,
        events: WorkerEvents | None = None,
        detector_factory: Callable[[DetectionConfig], DuplicateDetector] = make_detector,
    ) -> None:
        """``detector_factory`` makes the empty index a restore starts from (one without a snapshot)."""
        self.settings = settings
        self.events = events or WorkerEvents()
        self.detector_factory = detector_factory
        self.store = SnapshotStore(settings.snapshot_dir, settings.snapshots_kept)
        #: Outlives sessions: a failing batch ends its session and comes back in the next.
        self.failures = BatchFailures()
        #: Outlives sessions too, when there are signer processes (started by run()).
        self.signer_pool: SignerPool | None = None
        #: Outlives sessions too (opened by run()): a batch that failed reading texts again finds those it read kept.
        self.texts: RecordTexts | None = None
        #: Outlives sessions too: an input topic created again under its name between two is refused.
        self.input_identity = InputIdentity(settings.input_topic)
        #: The member id this session's consumer was given at its last assignment (None before one).
        self.member_id: str | None = None
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
          changelog after a pause (1 s, doubling up to 30 s while sessions fail
          at once; 1 s again after one that ran 30 s or more). Except the
          brokers refusing ``transaction_timeout_seconds`` or
          ``session_timeout_seconds`` (:mod:`stream_dedup.kafka.broker_limits`):
          a :class:`~stream_dedup.errors.ConfigError`, raised (exit 2).
        - :class:`~stream_dedup.errors.StreamDedupError` (a changelog of other
          signature parameters or of another input, a snapshot of other
          parameters, :class:`~stream_dedup.errors.ReplayTimeoutError`, a
          signer process that cannot start): raised
          to the caller; ``stream-dedup run`` exits 1 with the message. Retrying
          in-process would meet the same changelog, snapshot or brokers.
        - A fetched batch compressed with a codec this installation cannot
          read: :class:`~stream_dedup.errors.UnreadableBatchError`, exit 1
          (:mod:`stream_dedup.kafka.codec_check`).
        - :class:`OSError` (the snapshot directory cannot be created or read):
          raised too, exit 1. A failed snapshot *write* is not an error: it is
          reported and the changelog keeps everything.
        - Any other exception while processing a batch: its transaction is
          aborted and a new session starts after 1 s; after a few identical
          failures the offending record is isolated and dead-lettered
          (:mod:`stream_dedup.worker.isolation`).
        - Anything else is a bug: raised with its traceback.
        """
        ensure_stage_topics(self.settings)
        with contextlib.ExitStack() as started:
            if self.settings.signing_processes > 0:
                # Started once, before the first session, and kept across sessions.
                self.signer_pool = self._start_signers()
                started.callback(self.signer_pool.close)
            self.texts = self.settings.record_texts(self.settings.snapshot_dir)
            if self.texts is not None:
                started.callback(self.texts.close)
            self._run_sessions()

    def _run_sessions(self) -> None:
        s = self.settings
        pause = SessionBackoff()
        first = True
        while not self.stopping:
            started = time.monotonic()
            try:
                if not first:
                    # A session can end on a written topic deleted under it: the next one needs it back.
                    ensure_stage_topics(s, deleted_if_missing=True)
                first = False
                self._run_session()
                pause.after_success()
            except KafkaError as error:
                # A timeout the brokers refuse would be refused again by every new session.
                raise_if_timeout_refused(error, s.transaction_timeout_seconds, s.session_timeout_seconds)
                # So would a batch compressed with a codec we cannot read, fetched again by every new session.
                raise_if_codec_missing(error)
                # Not ready until a new session has restored: while the brokers stay away, the next
                # restore is not even begun, and the role would say "active" for the whole outage.
                self.events.role_changed("restoring", "restarting after a Kafka error")
                # Another process under our instance_id: the next session would fence it, and it us, for ever.
                raise_if_instance_taken(error, s.connection(), s.group_id, s.instance_id, self.member_id)
                seconds = pause.after_failure(time.monotonic() - started)
                log.error("Kafka error, restarting the session in %.0f s: %r", seconds, error)
                # But alive: a session that ended (each Kafka call in it is bounded) is the loop at work.
                # Without it a broker away for two minutes had the pods restarted, and a restart finding
                # no broker exits 3 (CrashLoopBackOff, minutes more after the broker is back).
                self.events.heartbeat()
                self._stop.wait(seconds)
            except _BatchFailedError:
                # Not a broker fault: no reason to back off. It ends within a few
                # sessions, when the offending record is isolated (see isolation).
                self._stop.wait(1.0)
            except ReplayStoppedError as stopped:
                # Nothing judged on a partial index, nothing to snapshot: the next start restores again.
                log.info("%s; the next start restores again", stopped)

    def _start_signers(self) -> SignerPool:
        s = self.settings
        pool = SignerPool(s.signing_processes, s.detection, s.input_reading(), self.events, lambda: self.stopping)
        pool.start()
        return pool

    def _run_session(self) -> None:
        """Restore, connect, loop; every client is closed on the way out, the last opened first."""
        s = self.settings
        self.member_id = None
        with contextlib.ExitStack() as opened:
            replay = ChangelogReplay(
                s.connection(),
                s.changelog_topic,
                s.input_topic,
                s.detection.signature_fingerprint(),
                0,
                {},
                self.events,
                s.detection.verdict_settings(),
                lambda: self.stopping,
            )
            opened.callback(replay.close)
            # Restore before joining the group: a member that holds the
            # partitions must be able to process them at once.
            detector, schedule = restore(s, self.store, replay, self.events, self.detector_factory)
            self.input_identity.remember(replay.input_topic_id)  # checked against the brokers' at the join
            producer = transactional_producer(s.connection(), s.transactional_id, s.transaction_timeout_seconds)
            opened.callback(self._close_producer, producer)
            # Fences any earlier producer with this transactional id and aborts its
            # open transaction: a worker restarted after kill -9 starts clean.
            producer.init_transactions()
            consumer = group_consumer(
                s.connection(), s.group_id, s.instance_id, s.session_timeout_seconds, s.batch_size
            )
            opened.callback(self._close_consumer, consumer)
            end_offsets = end_offsets_reader(s.connection())
            opened.callback(end_offsets.close)
            _Session(self, replay, detector, schedule, producer, consumer, end_offsets, self.texts).run()

    def _close_consumer(self, consumer: KafkaConsumer) -> None:
        """Close the group consumer; when stopping, also leave the group, so a standby takes over at once."""
        if self.stopping:
            self.events.role_changed("stopping", "shutting down")
        consumer.close(timeout_ms=max(1000, int(min(5.0, self.remaining_grace()) * 1000)))
        if self.stopping:
            self._leave_group()

    def _close_producer(self, producer: KafkaProducer) -> None:
        close_producer(producer, max(1.0, min(5.0, self.remaining_grace())))

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
        self.session.joined_at = time.monotonic()  # the coordinator answered the join


class _Session:
    """One connected lifetime of the worker, from joining the group (see the module docstring)."""

    def __init__(
        self,
        worker: Worker,
        replay: ChangelogReplay,
        detector: DuplicateDetector,
        schedule: SnapshotSchedule,
        producer: KafkaProducer,
        consumer: KafkaConsumer,
        end_offsets: KafkaConsumer,
        texts: RecordTexts | None,
    ) -> None:
        self.worker = worker
        self.settings = s = worker.settings
        self.events = worker.events
        self.replay = replay
        self.detector = detector
        self.schedule = schedule
        self.producer = producer
        self.consumer = consumer
        #: Input records read again, for the pairs the sketch cannot judge (see kafka.record_texts).
        self.texts = texts
        self.signature_fingerprint = s.detection.signature_fingerprint()
        self.destinations = stage_destinations(s)
        # The producer learns the written topics' partitions while they exist: one deleted later fails the
        # next commit that writes to it, which names it within seconds (kafka.bounded_commit), where a first
        # send would wait max_block_ms (60 s) for partitions that never come.
        for topic in self.destinations.limits:
            producer.partitions_for(topic)
        self.active = False
        self.new_assignment: list[Any] | None = None
        #: Set while joining the group: kafka-python 3.0 can lose a join (see check_join).
        self.awaiting_assignment_since: float | None = time.monotonic()
        #: When the last join completed: a word from the group coordinator (see check_coordinator).
        self.joined_at = time.monotonic()
        #: Input partition -> next offset to read, as of the last committed batch.
        self.positions: dict[int, int] = {}
        #: The same as of the last batch judged: its commit may still be in flight.
        self.judged_positions: dict[int, int] = {}
        #: The transaction of the batch judged last, committed while the next one is judged.
        self.commits = BackgroundCommit(producer, self.destinations)
        self.failures = worker.failures
        #: Fetched records not yet judged, taken in event-time order (see ordering).
        merge = EventTimeMerge(
            s.max_partition_idle_ms / 1000.0, s.partition_buffer_limit, s.max_partition_buffered_bytes
        )
        self.intake = BatchIntake(consumer, end_offsets, s.input_topic, s.batch_size, merge, self.failures, self.events)
        #: The batch taken last, being read and signed while the one before it is judged and committed.
        signers = worker.signer_pool or LocalSigners(detector, s.input_reading())
        self.pipeline = SigningPipeline(signers, self.failures.offenders)
        #: Lag from the offsets committed, not from those fetched: batches in flight are not processed yet.
        self.lag = ProcessedLag()
        self._last_lag = 0.0

    def run(self) -> None:
        """Join the group and go round the loop until stopped; then write the final snapshot."""
        try:
            self._loop()
        finally:
            # The producer is closed next: not under a commit in flight (after an error).
            self.commits.close()

    def _loop(self) -> None:
        s = self.settings
        self.join()
        while not self.worker.stopping:
            # 1. Poll. The poll also heartbeats and runs the rebalance listener. With
            #    a batch in flight, only what has arrived: that batch is due now.
            wait_ms = 0 if self.pipeline.in_flight else s.batch_timeout_ms
            polled = self.consumer.poll(timeout_ms=wait_ms, max_records=s.batch_size)
            self.events.heartbeat()
            # 2. A join that never completes, or a coordinator silent too long, ends the session.
            self.check_join()
            self.check_coordinator()
            # 3. Take over on a new assignment, before processing anything: records
            #    polled with it started from the committed offsets, and the takeover
            #    may seek elsewhere, so they are dropped and fetched again.
            if self.new_assignment is not None:
                self.take_over(self.new_assignment)
                self.new_assignment = None
                continue
            # 4. Stop between batches: records not processed are fetched again by whoever runs next.
            if self.worker.stopping:
                break
            # 5. Active: take the next records in event-time order and start
            #    signing them; judge the batch signed meanwhile and commit it, in
            #    one transaction. Standby: what the active replica committed.
            if self.active:
                self.lag.given(polled)
                self.intake.add(polled)
                self.judge(self.intake.next_batch())
                if self.commits.finished:
                    # Collected as soon as it is done, not when the next batch
                    # comes: a quiet input must not hold back its report.
                    self.finish_commit()
            else:
                # Our last batch, if its commit is still in flight, must be
                # collected first: the changelog would otherwise give it twice.
                self.finish_commit()
                if self.replay.apply_available(self.detector):
                    report_index(self.events, self.detector)
            # 6. Between batches, so that a snapshot never holds half a batch.
            self.report_lag()
            self.snapshot_if_due()
        # Only after a clean exit from the loop: after a failed batch the index
        # holds the aborted batch, and a snapshot of it would hold documents whose
        # verdicts were never published (they would judge their own reprocessing).
        self.finish_commit()
        self.events.role_changed("stopping", "shutting down")
        self.final_snapshot()

    def join(self) -> None:
        """Subscribe to the input; the join itself happens in the first polls."""
        self.consumer.subscribe([self.settings.input_topic], listener=_Rebalance(self))
        # Fetch the metadata after subscribing and before joining: a group leader
        # that does not know the partitions yet assigns nothing, and the group then
        # sits with no active member until the next rebalance. After subscribing,
        # so that kafka-python records the input's partitions as the metadata the
        # assignment was made with: assigning from an empty record makes it rejoin
        # (a second rebalance, where it can lose the join) as soon as metadata
        # arrives. topics() always asks the broker; partitions_for_topic() may
        # answer from the cache.
        self.consumer.topics()
        self.worker.input_identity.check(self.consumer)
        # Not ready until the group answers: a standby is ready because it could take over, which a
        # replica not yet in the group cannot (brokers gone mid-join left it "ready" until the join check).
        self.events.role_changed("restoring", "restored; joining the group")

    def check_join(self) -> None:
        """End the session if a group join never completes.

        kafka-python 3.0.12 can lose a join whose response arrives between two
        polls: it never installs the assignment nor resumes heartbeats, and the
        worker would stand by silently forever. A fresh session joins again.
        """
        waited = self.awaiting_assignment_since
        limit = max(30.0, 3 * self.settings.session_timeout_seconds)
        if waited is not None and time.monotonic() - waited > limit:
            raise KafkaError(f"no partition assignment {limit:.0f} s after (re)joining the group")

    def check_coordinator(self) -> None:
        """End the session if the group coordinator stopped answering (the brokers away): else a standby
        said it was ready through the outage, as did an active replica with a quiet input (kafka.coordinator_silence).
        """
        if self.awaiting_assignment_since is None:
            check_heard_from_coordinator(self.consumer, self.joined_at, self.settings.session_timeout_seconds)

    def take_over(self, assigned: list[Any]) -> None:
        """Become active (or stay standby if nothing was assigned)."""
        self.finish_commit()  # before the committed offsets and the changelog are read
        self.worker.member_id = self.consumer.group_metadata().member_id
        self.events.partitions_assigned(len(assigned))
        if not assigned:
            self.active = False
            self.events.role_changed("standby", "standby: another replica holds the partitions")
            log.info("standby: another replica holds the partitions; tailing the changelog")
            return
        consumer, replay = self.consumer, self.replay
        # A deletion of the input makes the group rebalance, and so does the new topic of its name.
        self.worker.input_identity.check(consumer)
        # The committed offsets and the changelog are written in one transaction,
        # but become visible separately: wait until the changelog has caught up
        # with the offsets, or the index would miss batches whose verdicts were published.
        timeout = self.settings.transaction_timeout_seconds
        deadline = time.monotonic() + timeout + 30
        while True:
            replay.catch_up(self.detector)
            committed = {tp.partition: committed_offset(consumer, tp, timeout) for tp in assigned}
            behind = {p: c for p, c in committed.items() if c is not None and replay.positions.get(p, -1) < c}
            if not behind:
                break
            if time.monotonic() > deadline:
                log.warning("the changelog lags the committed offsets %s; resuming from the offsets", behind)
                break
            time.sleep(0.2)
        # Batches of another replica since this one restored say which topic their offsets are of, too.
        self.worker.input_identity.remember(replay.input_topic_id)
        self.note_offsets_reset_back(committed)
        resume = {}
        for tp in assigned:
            known = [o for o in (replay.positions.get(tp.partition), committed.get(tp.partition)) if o is not None]
            if known:
                resume[tp] = max(known)
        # Never committed: the whole partition is new. Its first offset asked with a bound (a seek to the
        # beginning leaves it to be settled by the next call that needs it, which waits for the brokers for ever).
        new = [tp for tp in assigned if tp not in resume]
        if new:
            resume.update(log_offsets(consumer, new, end=False))
        for tp, offset in resume.items():
            consumer.seek(tp, offset)
        self.positions = dict(replay.positions)
        self.judged_positions = dict(replay.positions)
        # Records fetched or taken before the takeover were dropped: the merge
        # starts empty, and a batch being signed is forgotten (never committed).
        self.intake.restart(assigned)
        self.lag.start(resume)
        self.pipeline.drop()
        self.active = True
        report_index(self.events, self.detector)
        self.events.role_changed("active", f"processing {len(assigned)} partitions")
        log.info("active: %d partitions of %s", len(assigned), self.settings.input_topic)

    def note_offsets_reset_back(self, committed: dict[int, int | None]) -> None:
        """Say so when the group's committed offsets lie behind what the changelog says was judged.

        Offsets and changelog are committed in one transaction, so only an
        operator (``kafka-consumer-groups.sh --reset-offsets``) puts the
        offsets behind. The stage resumes where its changelog says, as it
        always did: re-reading would judge each document against itself
        and publish second verdicts. The offsets stay where they were put
        until the next batch commits, so the group's lag seen from outside
        is wrong meanwhile: without this line the reset looks taken.
        """
        positions = self.replay.positions
        back = {p: (c, positions[p]) for p, c in committed.items() if c is not None and c < positions.get(p, c)}
        if back:
            log.warning(
                "the group's committed offsets of %s lie behind what its changelog says was judged "
                "(partition: committed, judged up to): %s; a reset of the group's offsets is not taken, the stage "
                "resumes where it judged up to, so that no document gets a second verdict. To judge the input "
                "again, run the stage with a new group_id (a new changelog and index)",
                self.settings.input_topic,
                ", ".join(f"{p}: {c}, {j}" for p, (c, j) in sorted(back.items())),
            )

    def judge(self, taken: list[Any]) -> None:
        """Start signing ``taken``; judge and commit the batch taken before it, signed meanwhile."""
        started = time.perf_counter()  # a batch's time includes waiting for its signing
        try:
            signed = self.pipeline.advance(taken)
        except SigningStoppedError:
            return  # stopping: the batch is dropped, its records are fetched again by whoever runs next
        except SigningFailedError as failure:
            # No transaction is open yet: the batch failed before any of it was produced.
            log.error("signing a batch failed: %s", failure)
            self.isolate(failure.records, failure.cause)
            raise _BatchFailedError(str(failure)) from failure
        if signed is not None:
            self.process_batch(signed, started)

    def process_batch(self, batch: SignedRecords, started: float) -> None:
        """Judge ``batch``, then commit it in the background once the batch before it is committed.

        Its transaction begins only then, so a failure while judging leaves
        nothing to abort; the session still ends, since the detector may hold
        part of the batch.
        """
        try:
            judged = judge_batch(
                batch,
                self.detector,
                self.judged_positions,
                self.destinations,
                self.signature_fingerprint,
                started,
                self.texts,
                self.worker.input_identity.seen,
            )
        except KafkaError:
            self.finish_commit()  # the session ends: the batch before it is collected first
            raise
        except Exception as error:
            # Not a broker fault (judging does not touch the producer): retrying
            # meets the same records in the same order. After a few identical failures its records are
            # judged one by one, and the one that fails alone is dead-lettered.
            log.error("judging a batch failed (no transaction was begun for it): %r", error)
            self.finish_commit()  # the batch before it is not at fault
            self.isolate(batch.records, error)
            raise _BatchFailedError(repr(error)) from error
        self.finish_commit()
        self.judged_positions = dict(judged.after)
        self.commits.start(judged, current_membership(self.consumer))

    def finish_commit(self) -> None:
        """Collect the batch whose commit is in flight, if any; a failed commit ends the session.

        The detector already holds that batch (and any judged after it), so
        only a restore gives back an index that matches what was committed.
        """
        in_flight = self.commits.in_flight
        try:
            done = self.commits.finish()
        except KafkaError as error:
            self.abort(error)
            raise
        except Exception as error:
            # Not a broker fault: the client failed on what the batch holds.
            self.abort(error)
            if in_flight is not None:
                self.isolate(in_flight.records, error)
            raise _BatchFailedError(repr(error)) from error
        if done is None:
            return
        judged, committed = done
        self.failures.succeeded(judged.records)
        self.positions.update(judged.after)
        self.lag.committed({TopicPartition(self.settings.input_topic, p): o for p, o in judged.after.items()})
        # Our own changelog records are in the detector already: the replay must not apply them again.
        self.replay.skip_to(committed.changelog_offset, self.positions, self.worker.input_identity.seen)
        self.events.batch_committed(committed.report)

    def isolate(self, records: list[Any], error: Exception) -> None:
        """Note the failure; name the record when this failure isolates it."""
        offender = self.failures.failed(records, error)
        if offender is None:
            return
        topic, partition, offset = offender
        log.error(
            "record %s:%d:%d fails its batch (%r): it goes to the dead-letter topic",
            topic,
            partition,
            offset,
            error,
            extra={"topic": topic, "partition": partition, "offset": offset},
        )
        self.events.record_isolated(topic, partition, offset)

    def abort(self, error: Exception) -> None:
        """Abort the open transaction if the brokers are reachable; else the next session's producer does.

        kafka-python 3.0's ``abort_transaction()`` takes no timeout and waits for
        the broker: after a Kafka error it could wait forever, so it is left to
        ``init_transactions()`` of the next session, which fences this producer
        and aborts its transaction.
        """
        log.error("batch failed, aborting its transaction: %r", error)
        self.events.transaction_aborted(type(error).__name__)
        if isinstance(error, KafkaError):
            return
        try:
            self.producer.flush(timeout=5)
            self.producer.abort_transaction()
        except KafkaError as abort_error:
            log.warning("could not abort (the transaction times out on the broker): %r", abort_error)

    def report_lag(self) -> None:
        """Records of each assigned partition not yet committed, at most once a second, when active."""
        if not self.active or time.monotonic() - self._last_lag < _LAG_EVERY_SECONDS:
            return
        self._last_lag = time.monotonic()
        self.events.lag_measured(self.lag.measure(self.consumer))

    def snapshot_if_due(self) -> None:
        """Start a background snapshot if one is due and none is being written."""
        store, replay = self.worker.store, self.replay
        if not self.schedule.due(self.detector) or store.writing:
            return
        # The detector holds the batch judged last: a snapshot of it needs its commit done.
        self.finish_commit()
        unchanged = replay.applied_offset == self.schedule.covered_offset
        self.schedule.covers(replay.applied_offset, self.detector)
        if unchanged:
            self.events.snapshot_current(time.time())  # nothing new: the last snapshot is still whole
            return
        coverage = self.coverage()
        store.write_in_background(self.detector, coverage, self.events.snapshot_written, self.snapshot_failed)

    def coverage(self) -> SnapshotCoverage:
        """What a snapshot taken now covers, and the settings its verdicts were made under."""
        return SnapshotCoverage(
            self.settings.changelog_topic,
            self.replay.applied_offset,
            dict(self.replay.positions),
            settings=self.settings.detection.verdict_settings(),
            topic_id=self.replay.topic_id(),
            input_topic_id=self.replay.input_topic_id,
        )

    def snapshot_failed(self, error: BaseException) -> None:
        directory = self.worker.store.directory
        log.error("snapshot failed in %s (the changelog still holds everything): %r", directory, error)
        self.events.snapshot_failed(type(error).__name__)

    def final_snapshot(self) -> None:
        """Snapshot on the way out, if anything is new and half the remaining grace period lets the last write end."""
        store, replay = self.worker.store, self.replay
        if not store.wait(max(0.0, self.worker.remaining_grace() / 2)):
            return
        if replay.applied_offset == self.schedule.covered_offset:
            return
        coverage = self.coverage()

        def written(seconds: float, pause: float, size: int) -> None:
            self.events.snapshot_written(seconds, pause, size)
            log.info("final snapshot at changelog offset %d (%.2f s)", coverage.changelog_offset, pause + seconds)

        store.write(self.detector, coverage, written, self.snapshot_failed)
