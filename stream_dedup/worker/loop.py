"""The worker: restore, then consume, detect and publish in transactions, until told to stop.

A *session* is one connected lifetime: restore the index (newest valid
snapshot plus the changelog after it), connect, join the group, then go round
one loop (:meth:`Session.run <stream_dedup.worker.session.Session.run>`): poll; take over on a new assignment; then
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

Failures, where they are handled (``Session`` is :mod:`stream_dedup.worker.session`), and what the
operator sees (metric names without their ``stream_dedup_`` prefix):

=========================================  ==================================  =========================================
failure                                    handled in                          what the operator sees
=========================================  ==================================  =========================================
Kafka error in a batch (broker down,       ``Session.finish_commit`` aborts;  ERROR "batch failed, aborting its
producer fenced, transaction timed out)    ``Worker.run`` starts a new         transaction", ``transactions_total``
                                           session after 1-30 s                ``{outcome="aborted"}``, role
                                                                               ``restoring``
a transaction the brokers aborted while    ``commit_transaction`` (kafka.      the same, the error being
it committed (a record refused after it    bounded_commit) raises              ``AbortedCommitError``
outlived its timeout), which kafka-python  ``AbortedCommitError``; then as
3.0.12 calls committed                     any Kafka error in a batch
Kafka error outside a batch (poll, join,   ``Worker.run``: new session         ERROR "Kafka error, restarting the
takeover, restore)                                                             session in N s", role ``restoring``
                                                                               (not ready) until a session restores
an input record not read again to settle   ``RecordTexts`` raises a Kafka      ERROR "Kafka error, restarting the
a pair near the threshold (no broker, a    error: the batch is judged again    session in N s"; the verdicts are
fetch failed, 60 s of reads)               in a new session; a record gone     an uninterrupted run's
                                           (retention, or not given in 10      ``text_verifications_total{outcome=
                                           tries) is no failure: its pairs go  "unsettled"}`` counts those
                                           to the estimate
a group join that never completes          ``Session.check_join`` raises a    the same, after max(30 s, 3 x
(kafka-python can lose one)                Kafka error                         ``session_timeout_seconds``)
the group coordinator silent (its broker   ``Session.check_coordinator``      ERROR "Kafka error, restarting the
stopped, or cut off): kafka-python looks   raises ``CoordinatorSilentError``   session ...: CoordinatorSilentError:
for it again and again, and the poll       when no heartbeat was answered for  no answer from the coordinator ...";
returns nothing, on a standby as on an     3 x ``session_timeout_seconds``; a  role ``restoring`` (``/readyz`` 503)
active replica with a quiet input          new session rejoins                 until the brokers answer again
the brokers refuse one of our timeouts     ``raise_if_timeout_refused`` in     "stream-dedup: invalid setting
(their transaction.max.timeout.ms, or      ``Worker.run``: exit 2, no new      'transaction_timeout_seconds'" (or
group.min/max.session.timeout.ms)          session (each would be refused      'session_timeout_seconds'), naming
                                           the same)                           the brokers' setting
an ACL missing (a topic, the group, the    ``Worker.run`` raises the           "stream-dedup: cannot use Kafka: ...
transactional id; or DescribeConfigs on    ``AuthorizationError``: exit 4, no  refused access (...Authorization
a topic, kafka.topic_limits)               new session (each would be refused  FailedError: ... refused: R)", naming
                                           the same)                           the user and the ACLs to grant
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
a compressed input batch that would        ``QuickPartitionRecords`` (kafka.   WARNING "dead letter (batch_too_large)
decompress past n x (max_document_bytes    oversized_batches): not read; each  ... offsets B..L ...",
+ 64 KiB), at most 64 MiB (a zip bomb)     offset dead-lettered, unread        ``dead_letters_total{reason="batch_too_
                                                                               large"}``
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
the input topic deleted (not created       ``Session.check_input_exists``:     ERROR "... MissingTopicError(
again) while the stage runs, or before it  new session; ``refuse_deleted_      input_topic 'T' does not exist
started, its changelog holding batches     input`` at its start: exit 1, at    (deleted?))", then "stream-dedup:
                                           every restart too (the input is     input_topic 'T' does not exist, but
                                           not created again)                  changelog_topic 'C' holds batches"
the input topic deleted and created again  ``InputIdentity`` (kafka.          "stream-dedup: input_topic 'T' was
under its name (while the process runs,    input_identity), against the id     deleted and created again under its
or before it started), another cluster's   the changelog and snapshots note,   name, or is another cluster's copy
copy of it, or another topic named in      at every join and takeover: exit 1  of it, or input_topic was changed
``input_topic`` under the same group                                           under this group_id (Kafka topic id
                                                                               A when the stage judged it, now B)"
                                           (reading the new topic from the
                                           old offsets would skip its first
                                           records)
a commit that never returns (past the      ``commit_transaction``: a Kafka     ERROR "the transaction's commit has
transaction timeout + 30 s)                error, new session                  not completed after N s"
a batch failing for a reason other than    ``Session.process_batch`` (or      ERROR "judging a batch failed" (or
Kafka (a record that trips a bug), again   ``Session.judge`` if signing       "signing a batch failed"); then
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
the replacement fails the same batch       ``Session.judge``: a failing       ERROR "signing a batch failed", then
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
changelog behind the committed offsets     ``Session.take_over`` waits, then  WARNING "the changelog lags the
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
a snapshot write fails (disk full)         ``Session.snapshot_failed``:       ERROR "snapshot failed",
                                           logged, the loop goes on; written   ``snapshot_failures_total`` at
                                           again when next due, new batches    every due time until one is
                                           or not                              written (the last success stays old)
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

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.admin import MemberToRemove
from kafka.errors import AuthorizationError, KafkaError

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.engine.detector import make_detector
from stream_dedup.kafka.broker_limits import raise_if_timeout_refused
from stream_dedup.kafka.clients import (
    SessionBackoff,
    close_producer,
    end_offsets_reader,
    group_consumer,
    transactional_producer,
)
from stream_dedup.kafka.codec_check import raise_if_codec_missing
from stream_dedup.kafka.input_identity import InputIdentity
from stream_dedup.kafka.instance_clash import raise_if_instance_taken
from stream_dedup.kafka.record_texts import RecordTexts
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.isolation import BatchFailures
from stream_dedup.worker.replay import ChangelogReplay, ReplayStoppedError
from stream_dedup.worker.restore import restore
from stream_dedup.worker.session import BatchFailedError, Session
from stream_dedup.worker.settings import WorkerSettings
from stream_dedup.worker.signer_pool import SignerPool
from stream_dedup.worker.snapshot_store import SnapshotStore
from stream_dedup.worker.topics import ensure_stage_topics

log = logging.getLogger(__name__)


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
          a :class:`~stream_dedup.errors.ConfigError`, raised (exit 2); and an
          ACL missing: the :class:`~kafka.errors.AuthorizationError`, raised
          (exit 4, ``stream-dedup run`` naming what to grant).
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
                # So would a missing ACL: ends the process, exit 4 naming what to grant (cli.run_command).
                if isinstance(error, AuthorizationError):
                    raise
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
            except BatchFailedError:
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
                s.connection(),
                s.group_id,
                s.instance_id,
                s.session_timeout_seconds,
                s.batch_size,
                bound=s.input_bound(),
            )
            opened.callback(self._close_consumer, consumer)
            end_offsets = end_offsets_reader(s.connection())
            opened.callback(end_offsets.close)
            Session(self, replay, detector, schedule, producer, consumer, end_offsets, self.texts).run()

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
