"""One session of the worker: from joining the group to the last commit, one named step at a time.

A session is one connected lifetime of :class:`~stream_dedup.worker.loop.Worker`
(its module docstring tells the loop and tabulates its failures): join;
then, round the loop, poll, take over on a new assignment, and either judge
the next batch in event-time order while the one before it is committed in
the background, or, standing by, tail the changelog; snapshot when due. The
Worker owns what outlives a session (signer processes, the texts kept, the
failing records' count); the session owns its clients, which are never
``None`` while it runs.
"""

import functools
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaError

from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.kafka.bounded_commit import MissingTopicError
from stream_dedup.kafka.clients import log_offsets
from stream_dedup.kafka.coordinator_silence import check_heard_from_coordinator
from stream_dedup.kafka.group_offsets import committed_offset
from stream_dedup.kafka.membership import current_membership
from stream_dedup.kafka.offset_resets import within_the_log
from stream_dedup.kafka.processed_lag import ProcessedLag
from stream_dedup.kafka.record_texts import RecordTexts
from stream_dedup.worker.batch import judge_batch
from stream_dedup.worker.committer import BackgroundCommit
from stream_dedup.worker.intake import BatchIntake
from stream_dedup.worker.ordering import EventTimeMerge
from stream_dedup.worker.pipeline import LocalSigners, SigningFailedError, SigningPipeline, SigningStoppedError
from stream_dedup.worker.replay import ChangelogReplay
from stream_dedup.worker.restore import report_index
from stream_dedup.worker.signing import SignedRecords
from stream_dedup.worker.snapshot_store import SnapshotCoverage, SnapshotSchedule, write_failure
from stream_dedup.worker.topics import stage_destinations

if TYPE_CHECKING:
    from stream_dedup.worker.loop import Worker

log = logging.getLogger(__name__)

_LAG_EVERY_SECONDS = 1.0
_CHECK_INPUT_EVERY_SECONDS = 5.0


class BatchFailedError(Exception):
    """A batch failed for a reason other than Kafka; its transaction is aborted and the session ends."""


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """Notes assignments; the session acts on them after the poll (errors in a listener are swallowed)."""

    def __init__(self, session: "Session") -> None:
        self.session = session

    def on_partitions_revoked(self, revoked: Any) -> None:
        self.session.active = False
        self.session.awaiting_assignment_since = time.monotonic()

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.session.new_assignment = list(assigned)
        self.session.awaiting_assignment_since = None
        self.session.joined_at = time.monotonic()  # the coordinator answered the join


class Session:
    """One connected lifetime of the worker, from joining the group (see the module docstring)."""

    def __init__(
        self,
        worker: "Worker",
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
        self.intake = BatchIntake(
            consumer, end_offsets, s.input_topic, s.batch_records, merge, self.failures, self.events, s.batch_span_ms
        )
        #: The batch taken last, being read and signed while the one before it is judged and committed.
        signers = worker.signer_pool or LocalSigners(detector, s.input_reading())
        self.pipeline = SigningPipeline(signers, self.failures.offenders)
        #: Lag from the offsets committed, not from those fetched: batches in flight are not processed yet.
        self.lag = ProcessedLag()
        self._last_lag = 0.0
        self._last_input_checked = time.monotonic()

    def run(self) -> None:
        """Join the group and go round the loop until stopped; then write the final snapshot."""
        try:
            self._loop()
        finally:
            # The producer is closed next: not under a commit in flight (after an error).
            self.commits.close()

    def poll_held(self) -> dict[Any, list[Any]]:
        """The records the client holds, without waiting; none once a poll revoked or assigned partitions.

        Records polled with a new assignment are dropped, as in the loop: the takeover seeks.
        """
        if not self.active or self.new_assignment is not None:
            return {}
        polled: dict[Any, list[Any]] = self.consumer.poll(timeout_ms=0, max_records=self.settings.batch_size)
        if not self.active or self.new_assignment is not None:
            return {}
        self.lag.given(polled)
        return polled

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
            self.check_input_now_and_then()
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
                self.intake.fill(polled, self.poll_held)
                if not self.active or self.new_assignment is not None:
                    continue  # a poll of fill's revoked or assigned partitions: no batch before the takeover
                self.judge(self.intake.next_batch())
                if self.commits.finished:
                    # Collected as soon as it is done, not when the next batch
                    # comes: a quiet input must not hold back its report.
                    self.finish_commit()
                self.commit_passed_markers()
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
        if waited is not None:
            self.check_input_exists()  # a join waiting on a deleted input's metadata waits the limit below
        limit = max(30.0, 3 * self.settings.session_timeout_seconds)
        if waited is not None and time.monotonic() - waited > limit:
            raise KafkaError(f"no partition assignment {limit:.0f} s after (re)joining the group")

    def check_input_exists(self) -> None:
        """End the session if the input topic is gone: the next one stops the process, naming it
        (:func:`~stream_dedup.worker.topics.refuse_deleted_input`).

        Without this, a sole replica whose input was deleted said "standby:
        another replica holds the partitions" for good, or, its join never
        completing, created the input again at the next session.
        """
        if not self.consumer.partitions_for_topic(self.settings.input_topic):
            raise MissingTopicError(f"input_topic {self.settings.input_topic!r} does not exist (deleted?)")

    def check_input_now_and_then(self) -> None:
        """Every few seconds, rebalance or not, end the session if the input is gone, and the process if it is a
        new topic of its name (from the consumer's metadata: no request).

        The rebalance a deleted input causes comes only from the member that
        computed the group's assignment: kafka-python rejoins when the metadata
        differs from what its own assignment saw. A static member rejoining (a
        new session, after any Kafka error) is handed the assignment it had
        without computing it, so it never rejoined: a stage whose input was
        deleted and created again went on judging the new topic against the
        old topic's index, with nothing said.
        """
        if time.monotonic() - self._last_input_checked < _CHECK_INPUT_EVERY_SECONDS:
            return
        self._last_input_checked = time.monotonic()
        self.check_input_exists()
        self.worker.input_identity.check(self.consumer)

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
            self.check_input_exists()  # the group rebalances when the input is deleted: no replica holds it
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
            if not behind or replay.holds_everything_written():
                break  # caught up; or nothing more to come: offsets an operator moved forward
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
        resume = within_the_log(consumer, resume)
        # Never committed: the whole partition is new. Its first offset asked with a bound (a seek to the
        # beginning leaves it to be settled by the next call that needs it, which waits for the brokers for ever).
        new = [tp for tp in assigned if tp not in resume]
        if new:
            resume.update(log_offsets(consumer, new, end=False))
        for tp, offset in resume.items():
            consumer.seek(tp, offset)
        # Where processing resumes, offsets moved forward by an operator included: batches then carry them
        # (changelog, lag), not the changelog's older positions of a partition they do not move. Else its lag
        # counted the skipped records, and no idle commit passed its markers, until a record of it came.
        self.positions = {**replay.positions, **{tp.partition: offset for tp, offset in resume.items()}}
        self.judged_positions = dict(self.positions)
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
            raise BatchFailedError(str(failure)) from failure
        if signed is not None:
            self.process_batch(signed, started)

    def commit_passed_markers(self) -> None:
        """Idle, every record given committed: commit the offsets past the transaction markers after the last batch.

        So that the group's lag seen from outside is none (kafka.processed_lag).
        A batch of no record: its changelog record carries the positions too,
        since a takeover waits until the changelog has reached the committed offsets.
        """
        if self.commits.in_flight is not None:
            return
        passed = self.lag.passed_markers(self.consumer)
        if passed:
            no_records = SignedRecords([], [], self.detector.sign([], normalized=True), [], [])
            self.process_batch(no_records, time.perf_counter(), passed)

    def process_batch(
        self, batch: SignedRecords, started: float, passed: Mapping[TopicPartition, int] | None = None
    ) -> None:
        """Judge ``batch``, then commit it in the background once the batch before it is committed.

        Its transaction begins only then, so a failure while judging leaves
        nothing to abort; the session still ends, since the detector may hold
        part of the batch. ``passed``: see :func:`~stream_dedup.worker.batch.judge_batch`.
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
                passed,
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
            raise BatchFailedError(repr(error)) from error
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
            raise BatchFailedError(repr(error)) from error
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
        self.schedule.started(self.detector)
        if replay.applied_offset == self.schedule.covered_offset:
            self.events.snapshot_current(time.time())  # nothing new: the last snapshot is still whole
            return
        coverage = self.coverage()
        store.write_in_background(
            self.detector, coverage, functools.partial(self.snapshot_written, coverage), self.snapshot_failed
        )

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

    def snapshot_written(self, coverage: SnapshotCoverage, seconds: float, pause: float, size: int) -> None:
        self.schedule.written(coverage.changelog_offset)
        self.events.snapshot_written(seconds, pause, size)

    def snapshot_failed(self, error: BaseException) -> None:
        directory = self.worker.store.directory
        log.error("snapshot failed in %s (the changelog still holds everything): %s", directory, write_failure(error))
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
            self.snapshot_written(coverage, seconds, pause, size)
            log.info("final snapshot at changelog offset %d (%.2f s)", coverage.changelog_offset, pause + seconds)

        store.write(self.detector, coverage, written, self.snapshot_failed)
