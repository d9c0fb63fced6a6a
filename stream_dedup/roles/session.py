"""Running a role: sessions of poll, step, one transaction per step, until told to stop.

A role (:class:`RoleWork`) says which topics it reads, how it positions
itself when its group gives it partitions, and what one step makes of what
was polled: records to send and the consumed offsets they answer for
(:class:`Outgoing`). :class:`RoleRunner` does the rest, the same for every
role: a transactional producer whose id is the replica's, a static member of
the role's own group, and for each step::

    1. poll (which also heartbeats and runs the rebalance listener)
    2. take over on a new assignment, before anything else (the role seeks)
    3. step: what the role makes of the records polled (possibly nothing; the
       signer also takes what the client holds beyond them, :mod:`~stream_dedup.roles.held_records`);
       or, while another replica holds the partitions, stand by (a shard
       keeps a warm copy of its index)
    4. begin, send the records, send the offsets with the group's metadata, commit

A session's state lives in its :class:`RoleWork`, made fresh for every
session: after any failure the next session rebuilds it from the topics, so
an aborted transaction's effects are never trusted.

=========================================  ==================================  =========================================
failure                                    handled in                          what the operator sees
=========================================  ==================================  =========================================
Kafka error (broker down, producer         ``RoleRunner.run``: the session     ERROR "Kafka error, restarting the
fenced, transaction timed out, a lost      ends, a new one starts after 1-30   session in N s", ``transactions_total
join)                                      s with fresh state; the broker (or  {outcome="aborted"}``
                                           the next ``init_transactions``)
                                           aborts the open transaction
the brokers refuse one of our timeouts     ``raise_if_timeout_refused`` in     "stream-dedup: invalid setting
(their transaction.max.timeout.ms, or      ``RoleRunner.run``: exit 2, no new  'transaction_timeout_seconds'" (or
group.min/max.session.timeout.ms)          session (each would be refused      'session_timeout_seconds'), naming
                                           the same)                           the brokers' setting
an ACL missing (a topic, the group, the    ``RoleRunner.run`` raises the       "stream-dedup: cannot use Kafka: ...
transactional id, DescribeConfigs on a     ``AuthorizationError``: exit 4, no  refused access (...)", naming the
topic)                                     new session                         user and the ACLs to grant
another process under this replica's       ``raise_if_instance_taken`` (kafka. "stream-dedup: invalid setting
instance_id (it fenced this one: its       instance_clash) in                  'instance_id': another process
commit refused, and the group's member     ``RoleRunner.run``: exit 2, no new  joined group 'G' as instance_id
for the id is another process's)           session (it would fence the other   'I' and fenced this one ..."
                                           in turn, for ever)
a written topic (output, dead-letter,      ``commit_transaction`` (kafka.      ERROR "the transaction cannot commit:
unique) deleted while the role runs        bounded_commit) raises              output_topic 'T' does not exist";
                                           ``MissingTopicError``: new session, WARNING "... was deleted while the
                                           which creates it again              stage ran: creating it again"
                                           (``ensure_role_topics``)
the sequenced or answers topic deleted,    ``_Session.check_read_topics``:     ERROR "Kafka error, restarting the
the groups writing it having committed     at each rebalance and every 5 s     session ...: MissingTopicError(...
offsets                                    ends the session;                   sequenced_topic 'T' does not
                                           ``refuse_lost_history`` at the      exist", then "stream-dedup:
                                           start of every session: exit 1      sequenced_topic 'T' does not exist,
                                           (shards would replay nothing, the   but group 'G' has committed
                                           judge wait for lost answers)        offsets"
the input topic deleted and created again  ``_Session.check_read_topics``      "stream-dedup: input_topic 'T' was
under its name (signers read it)           (kafka.input_identity): exit 1      deleted and created again while the
                                                                               stage ran"
a record that is not ours, or of other     raised: the process exits 1         the message names the topic and the
signature parameters or shard count                                            setting
the group coordinator silent (its broker   ``_Session.check_coordinator``      ERROR "Kafka error, restarting the
stopped, or cut off): kafka-python looks   raises ``CoordinatorSilentError``   session ...: CoordinatorSilentError:
for it again and again, and the poll       when no heartbeat was answered for  no answer from the coordinator ...";
returns nothing, on a standby as on an     3 x ``session_timeout_seconds``; a  role ``restoring`` (``/readyz`` 503)
active replica                             new session rejoins                 until the brokers answer again
kill -9                                    the broker aborts the open          a standby, or the restarted process,
                                           transaction                         takes the partitions
SIGTERM, SIGINT                            ``request_stop``: step finished,    INFO "received SIGTERM", exit 0
                                           group left
=========================================  ==================================  =========================================
"""

import contextlib
import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import AuthorizationError, KafkaError
from kafka.structs import OffsetAndMetadata

from stream_dedup.kafka.assignments import AssignmentNotes
from stream_dedup.kafka.bounded_commit import MissingTopicError, commit_transaction, send_offsets
from stream_dedup.kafka.broker_limits import raise_if_timeout_refused
from stream_dedup.kafka.clients import (
    SessionBackoff,
    close_producer,
    group_consumer,
    leave_group,
    log_offsets,
    transactional_producer,
)
from stream_dedup.kafka.codec_check import raise_if_codec_missing
from stream_dedup.kafka.coordinator_silence import check_heard_from_coordinator
from stream_dedup.kafka.group_offsets import committed_offset
from stream_dedup.kafka.input_identity import InputIdentity
from stream_dedup.kafka.instance_clash import raise_if_instance_taken
from stream_dedup.kafka.membership import current_membership
from stream_dedup.kafka.oversized_batches import BatchBound
from stream_dedup.kafka.processed_lag import ProcessedLag
from stream_dedup.kafka.record_fit import SizeLimit
from stream_dedup.kafka.sending import Send, send_all
from stream_dedup.roles.held_records import NOTHING_HELD, GroupHeldRecords, HeldRecords
from stream_dedup.roles.topics import ensure_role_topics
from stream_dedup.worker.events import StepReport, WorkerEvents
from stream_dedup.worker.settings import WorkerSettings

log = logging.getLogger(__name__)

_OBSERVE_EVERY_SECONDS = 1.0
_CHECK_READ_TOPICS_EVERY_SECONDS = 5.0


@dataclass(frozen=True)
class Outgoing:
    """What one transaction holds: the records a step sends and the consumed offsets it commits."""

    sends: list[Send]
    offsets: dict[TopicPartition, int]
    #: What the step did, reported once it is committed.
    report: StepReport


class RoleWork(ABC):
    """What one role does in a session; made fresh for each session."""

    #: Topics the role reads (its group's subscription).
    topics: list[str]
    #: What each written topic accepts (records to a narrow one are flushed one by one).
    limits: dict[str, SizeLimit]
    #: How far a fetched batch of those topics is decompressed (a role reading the input sets the input's).
    bound = BatchBound()

    @abstractmethod
    def take_over(self, consumer: KafkaConsumer, assigned: list[TopicPartition]) -> dict[TopicPartition, int]:
        """The group gave this replica ``assigned``: position the consumer and reset what depends on it.

        Returns where processing resumes in each partition (the group's committed offset): the role's lag
        counts from there, whatever it reads again before it.
        """

    @abstractmethod
    def step(self, polled: dict[TopicPartition, list[Any]], held: HeldRecords = NOTHING_HELD) -> Outgoing | None:
        """What to send and commit for the records polled (and anything still pending), or nothing.

        ``held`` gives what the client holds beyond ``polled``, for a role that needs it (the signer); after
        a poll of it rebalanced, the step must return nothing.
        """

    @abstractmethod
    def committed(self, outgoing: Outgoing) -> None:
        """``outgoing`` was committed."""

    @abstractmethod
    def observe(self, events: WorkerEvents) -> None:
        """Report what the role measures besides its steps (called about once a second while it is active)."""

    def stand_by(self, consumer: KafkaConsumer) -> None:  # noqa: B027 (most roles keep nothing warm)
        """Called after each poll while another replica holds the partitions: keep ready to take over."""

    def finish(self) -> None:  # noqa: B027 (most roles leave nothing behind)
        """The session is stopping cleanly (SIGTERM, SIGINT), after its last step: leave what a restart needs."""

    def close(self) -> None:  # noqa: B027 (most roles open nothing of their own)
        """The session ended, cleanly or not: close what the role opened itself."""


def committed_or_beginning(
    consumer: KafkaConsumer, partition: TopicPartition, transaction_timeout_seconds: float
) -> int:
    """The group's committed offset of ``partition``, or the partition's first offset if none.

    Raises ``KafkaError`` if a hanging transaction holds it (:mod:`stream_dedup.kafka.group_offsets`).
    """
    committed = committed_offset(consumer, partition, transaction_timeout_seconds)
    if committed is not None:
        return committed
    return log_offsets(consumer, [partition], end=False)[partition]


class RoleRunner:
    """Runs one role until :meth:`request_stop` (SIGTERM, SIGINT)."""

    def __init__(
        self,
        settings: WorkerSettings,
        make_work: Callable[[], RoleWork],
        events: WorkerEvents | None = None,
        single_active: bool = True,
        max_poll_records: int = 100,
    ) -> None:
        """``single_active``: one member of the role's group holds every partition (shards, judge; signers
        unless ``parallel_signers``), else Kafka spreads them. ``max_poll_records`` bounds the records of one step."""
        self.settings = settings
        self.make_work = make_work
        self.events = events or WorkerEvents()
        self.single_active = single_active
        self.max_poll_records = max_poll_records
        #: Outlives sessions: an input topic created again under its name is refused (signers read it).
        self.input_identity = InputIdentity(settings.input_topic)
        #: The member id this session's consumer was given at its last assignment (None before one).
        self.member_id: str | None = None
        self._stop = threading.Event()

    def request_stop(self) -> None:
        """Finish the step in hand, leave the group and return."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run(self) -> None:
        """Sessions, one after another, until stopped.

        A :class:`KafkaError` ends the session and a new one starts after a
        pause (:class:`~stream_dedup.kafka.clients.SessionBackoff`), unless it is
        the brokers refusing one of our timeouts (a
        :class:`~stream_dedup.errors.ConfigError`, exit 2) or an ACL missing
        (the :class:`~kafka.errors.AuthorizationError`, raised: exit 4); anything else is raised (the
        process exits 1 with the message): retrying would meet the same
        records or settings.
        """
        ensure_role_topics(self.settings)
        pause = SessionBackoff()
        first = True
        while not self.stopping:
            started = time.monotonic()
            try:
                if not first:
                    # A session can end on a written topic deleted under it: the next one needs it back.
                    ensure_role_topics(self.settings, deleted_if_missing=True)
                first = False
                self._run_session()
            except KafkaError as error:
                # A timeout the brokers refuse would be refused again by every new session.
                s = self.settings
                raise_if_timeout_refused(error, s.transaction_timeout_seconds, s.session_timeout_seconds)
                # So would a batch compressed with a codec we cannot read, fetched again by every new session.
                raise_if_codec_missing(error)
                # So would a missing ACL: ends the process, exit 4 naming what to grant (cli.run_command).
                if isinstance(error, AuthorizationError):
                    raise
                self.events.role_changed("restoring", "restarting after a Kafka error")
                # Another process under our instance_id: the next session would fence it, and it us, for ever.
                raise_if_instance_taken(error, s.connection(), s.role_group_id, s.instance_id, self.member_id)
                seconds = pause.after_failure(time.monotonic() - started)
                log.error("Kafka error, restarting the session in %.0f s: %r", seconds, error)
                # Alive all the same: a broker away for minutes must not get the pod restarted (see worker.loop).
                self.events.heartbeat()
                self._stop.wait(seconds)
            else:
                pause.after_success()

    def _run_session(self) -> None:
        """Connect, loop; every client is closed on the way out, the last opened first."""
        s = self.settings
        self.member_id = None
        work = self.make_work()
        with contextlib.ExitStack() as opened:
            opened.callback(work.close)
            producer = transactional_producer(s.connection(), s.transactional_id, s.transaction_timeout_seconds)
            opened.callback(close_producer, producer, 5.0)
            # Fences any earlier producer with this transactional id and aborts its open transaction.
            producer.init_transactions()
            consumer = group_consumer(
                s.connection(),
                s.role_group_id,
                s.instance_id,
                s.session_timeout_seconds,
                self.max_poll_records,
                self.single_active,
                work.bound,
            )
            opened.callback(self._close_consumer, consumer)
            _Session(self, work, producer, consumer).run()

    def _close_consumer(self, consumer: KafkaConsumer) -> None:
        """Close the group consumer; when stopping, also leave the group, so a standby takes over at once."""
        consumer.close(timeout_ms=5000)
        if self.stopping:
            self.events.role_changed("stopping", "shutting down")
            s = self.settings
            leave_group(s.connection(), s.role_group_id, s.instance_id)


class _Session:
    """One connected lifetime of a role."""

    def __init__(self, runner: RoleRunner, work: RoleWork, producer: KafkaProducer, consumer: KafkaConsumer) -> None:
        self.runner = runner
        self.settings = runner.settings
        self.events = runner.events
        self.work = work
        self.producer = producer
        self.consumer = consumer
        self.assignments = AssignmentNotes()
        #: Lag from the offsets committed, not from those fetched: a judge holds batches until the shards answer.
        self.lag = ProcessedLag()
        self.held = GroupHeldRecords(consumer, self.assignments, runner.max_poll_records, self.lag)
        self._last_observed = 0.0
        self._last_topics_checked = time.monotonic()

    def run(self) -> None:
        s = self.settings
        self.consumer.subscribe(self.work.topics, listener=self.assignments)
        # Metadata after subscribing and before joining (see worker.session.Session.join).
        self.consumer.topics()
        self.check_read_topics()
        # Not ready until the group answers: a standby is ready because it could take over, which a
        # replica not yet in the group cannot (brokers gone mid-join left it "ready" until the join check).
        self.events.role_changed("restoring", "restored; joining the group")
        while not self.runner.stopping:
            # 1. Poll.
            polled = self.consumer.poll(timeout_ms=s.batch_timeout_ms)
            self.events.heartbeat()
            self.check_join()
            self.check_coordinator()
            self.check_read_topics_now_and_then()
            # 2. Take over first: what was polled with the assignment is fetched again after the role's seeks.
            assigned = self.assignments.take()
            if assigned is not None:
                self.take_over(assigned)
                continue
            if self.runner.stopping:
                continue
            if not self.assignments.holding:
                # Not while a join waits: a long restore there would count against the join's limit.
                if self.assignments.standing_by:
                    self.work.stand_by(self.consumer)
                continue
            # 3. Step, 4. one transaction for all it produced.
            started = time.perf_counter()
            self.lag.given(polled)
            outgoing = self.work.step(polled, self.held) or self.markers_passed()
            if outgoing is not None:
                self.commit(outgoing)
                self.events.step_committed(outgoing.report, time.perf_counter() - started)
            self.observe()
        # Only after a clean exit from the loop: after a failure the role's state may hold an aborted step.
        self.work.finish()

    def check_join(self) -> None:
        """End the session if a group join never completes (kafka-python 3.0 can lose one, see worker.loop)."""
        limit = max(30.0, 3 * self.settings.session_timeout_seconds)
        if self.assignments.join_waited() > limit:
            raise KafkaError(f"no partition assignment {limit:.0f} s after (re)joining the group")

    def check_coordinator(self) -> None:
        """End the session if the group coordinator stopped answering (the brokers away), on a standby as on an
        active replica: else a standby says it is ready through the outage (kafka.coordinator_silence)."""
        if self.assignments.joining_since is None:
            check_heard_from_coordinator(
                self.consumer, self.assignments.joined_at, self.settings.session_timeout_seconds
            )

    def check_read_topics(self) -> None:
        """End the session if a topic the role reads is gone, and the process if the input is a new topic of its
        name: the group rebalances when one is deleted under it, or created again (kafka.input_identity).

        The next session then refuses to go on without a history topic (exit 1,
        :func:`~stream_dedup.worker.topics.refuse_lost_history`) or creates the
        topic again. Without this, a judge whose answers topic was deleted took
        over with no answers partitions and exited 2 blaming the ``shards``
        setting, and one whose sequenced topic was deleted stood by for good.
        """
        if self.settings.input_topic in self.work.topics:
            self.runner.input_identity.check(self.consumer)
        names = self.settings.topic_settings()
        gone = [topic for topic in self.work.topics if not self.consumer.partitions_for_topic(topic)]
        if gone:
            raise MissingTopicError(
                "; ".join(f"{names.get(topic, 'topic')} {topic!r} does not exist (deleted?)" for topic in gone)
            )

    def check_read_topics_now_and_then(self) -> None:
        """:meth:`check_read_topics` every few seconds, rebalance or not (from the consumer's metadata: no request).

        The rebalance a deleted topic causes comes only from the member that
        computed the group's assignment: kafka-python rejoins when the metadata
        differs from what its own assignment saw. A static member that rejoins
        (a new session, after any Kafka error) is handed the assignment it had
        without computing it, so it never rejoined: a judge whose answers topic
        was deleted then waited for its lost answers for good, logging "not
        found in cluster metadata" twice a second, while the shards stopped.
        """
        if time.monotonic() - self._last_topics_checked < _CHECK_READ_TOPICS_EVERY_SECONDS:
            return
        self._last_topics_checked = time.monotonic()
        self.check_read_topics()

    def observe(self) -> None:
        """Records of each held partition not yet committed, and the role's own measures, at most once a second."""
        if time.monotonic() - self._last_observed < _OBSERVE_EVERY_SECONDS:
            return
        self._last_observed = time.monotonic()
        self.events.lag_measured(self.lag.measure(self.consumer))
        self.work.observe(self.events)

    def take_over(self, assigned: list[TopicPartition]) -> None:
        self.check_read_topics()
        self.runner.member_id = self.consumer.group_metadata().member_id
        self.events.partitions_assigned(len(assigned))
        if not assigned:
            self.events.role_changed("standby", "standby: another replica holds the partitions")
            log.info("standby for %s: another replica holds the partitions", self.settings.role_group_id)
            return
        self.lag.start(self.work.take_over(self.consumer, assigned))
        self.assignments.holding = True
        self.events.role_changed("active", f"{self.settings.role}: {len(assigned)} partitions")
        log.info("active: %s holds %d partitions", self.settings.role_group_id, len(assigned))

    def markers_passed(self) -> Outgoing | None:
        """Idle, every record given committed: the offsets past the transaction markers after the last commit,
        committed alone, so that the group's lag seen from outside is none (kafka.processed_lag)."""
        passed = self.lag.passed_markers(self.consumer)
        return Outgoing([], passed, StepReport(self.settings.role, 0)) if passed else None

    def commit(self, outgoing: Outgoing) -> None:
        """Send ``outgoing`` and its offsets in one transaction, or abort it and end the session."""
        producer = self.producer
        try:
            producer.begin_transaction()
            send_all(producer, outgoing.sends, self.work.limits)
            offsets = {tp: OffsetAndMetadata(offset, "", -1) for tp, offset in outgoing.offsets.items()}
            written = self.settings.written_topics(sorted({send.topic for send in outgoing.sends}))
            send_offsets(producer, offsets, current_membership(self.consumer), written)
            commit_transaction(producer, written)
        except KafkaError as error:
            # The next session's init_transactions() fences this producer and
            # aborts the transaction (abort_transaction() could wait forever here).
            log.error("step failed, its transaction is aborted: %r", error)
            self.events.transaction_aborted(type(error).__name__)
            raise
        except Exception as error:
            log.error("step failed, aborting its transaction: %r", error)
            self.events.transaction_aborted(type(error).__name__)
            with contextlib.suppress(KafkaError):
                producer.abort_transaction()
            raise
        self.work.committed(outgoing)
        self.lag.committed(outgoing.offsets)
