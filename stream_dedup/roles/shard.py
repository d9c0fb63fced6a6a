"""A shard: the whole sequenced topic in, this shard's best match for every document out.

Shard ``shard_index`` of ``shards`` (group ``GROUP_ID.shard-K``, one active
replica and standbys) reads every batch of the sequenced topic in order and
asks its :class:`~stream_dedup.engine.sharding.ShardDetector` for the best
match of each document among the documents it owns, then indexes the ones it
owns. One step is one transaction: one answer record (in parts if large) to
partition K of the answers topic, covering the sequenced offsets the step
read, and the sequenced offset after them, committed for the shard's group.

Its index is a function of the sequenced topic's prefix, so the sequenced
topic is its changelog. Taking over, a shard starts from the newest usable
snapshot in its own directory (``SNAPSHOT_DIR/shard-K``), or from an empty
index at the topic's first offset, reads the topic from there, and answers
only from the group's committed offset on (the batches before it were
answered by an earlier session, whose answers are committed). A standby
(a replica the group gave nothing) keeps a warm copy instead: it restores
the same way, then tails the sequenced topic up to the group's committed
offset, so that its take-over replays only the last few batches. Between steps
it writes a snapshot when the worker's schedule says one is due
(``snapshot_interval_seconds``, ``snapshot_every_documents`` counted over the
whole stream, which is what a restart replays), and a last one when stopped.

=========================================  ==================================  =========================================
failure                                    handled in                          what the operator sees
=========================================  ==================================  =========================================
a snapshot of another ``shards``,          ``SnapshotStore.load_newest``:      WARNING "snapshot ... skipped" naming
``shard_index``, ``index_slots`` or        the one before, or a replay from    the setting; a longer take-over
signature parameters, a whole index's      the topic's first offset
a corrupt snapshot (truncated, flipped     ``SnapshotStore.load_newest``:      ERROR "snapshot ... is unusable"
bit)                                       the one before, or a full replay
a snapshot past the committed offset, or   ``Shard.restore``: not used         WARNING "snapshot ... skipped" with why
one whose continuation retention deleted
a snapshot write fails (disk full)         ``Shard.snapshot_failed``: logged,  ERROR "snapshot failed",
                                           the shard goes on                   ``snapshot_failures_total``
retention deleted sequenced records a      ``Shard.stand_by``: restores again  WARNING "standby ... deleted by
standby had not tailed yet                 (a snapshot or a rebuild)           retention"
=========================================  ==================================  =========================================
"""

import functools
import logging
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import OffsetOutOfRangeError

from stream_dedup.engine.sharding import ShardAnswer, ShardDetector
from stream_dedup.engine.snapshot import load_shard_snapshot
from stream_dedup.errors import ConfigError
from stream_dedup.kafka.answers import AnswerRecord, encode_answers
from stream_dedup.kafka.clients import topic_id
from stream_dedup.kafka.record_fit import OutgoingRecord
from stream_dedup.kafka.record_texts import RecordTexts
from stream_dedup.kafka.sending import Send
from stream_dedup.kafka.sequenced import BatchAssembly, SequencedBatch
from stream_dedup.roles.held_records import NOTHING_HELD, HeldRecords
from stream_dedup.roles.sequenced_tail import SequencedTail
from stream_dedup.roles.session import Outgoing, RoleWork, committed_or_beginning
from stream_dedup.worker.events import ProbeCounts, StepReport, WorkerEvents
from stream_dedup.worker.restore import warn_of_changed_settings
from stream_dedup.worker.settings import WorkerSettings
from stream_dedup.worker.snapshot_store import (
    SnapshotCoverage,
    SnapshotSchedule,
    SnapshotStore,
    continued_by,
    write_failure,
)
from stream_dedup.worker.working_heartbeat import heartbeats_while_working

log = logging.getLogger(__name__)

#: Documents a shard reads per step (and per answer record), and a standby per read.
_DOCUMENTS_PER_STEP = 10_000
#: How often a standby that has caught up asks the group's committed offset again.
_STANDBY_REFRESH_SECONDS = 1.0
#: Longest a standby tails in one go: its loop must also poll its group consumer (heartbeats, take-over).
_STANDBY_READ_SECONDS = 0.5


def records_per_step(settings: WorkerSettings) -> int:
    """Sequenced records a shard reads per step: each holds up to ``batch_size`` documents."""
    return max(1, _DOCUMENTS_PER_STEP // settings.batch_size)


def snapshot_directory(settings: WorkerSettings) -> Path:
    """``SNAPSHOT_DIR/shard-K``: shards sharing a volume never load or prune each other's snapshots."""
    return Path(settings.snapshot_dir) / f"shard-{settings.shard_index}"


class Shard(RoleWork):
    """One session of a shard; ``store`` outlives sessions, so that only one snapshot is ever being written.

    ``texts`` (outliving sessions too) reads input records again for the
    pairs the sketch cannot judge; a replay, whose answers were given
    before, asks for none.
    """

    def __init__(
        self, settings: WorkerSettings, store: SnapshotStore, events: WorkerEvents, texts: RecordTexts | None = None
    ) -> None:
        self.settings = settings
        self.texts = texts
        self.store = store
        self.events = events
        self.topics = [settings.sequenced_topic]
        self.limits = {}
        self.digest = settings.detection.signature_fingerprint()
        self.verdict_settings = settings.detection.verdict_settings()
        self.partition = TopicPartition(settings.sequenced_topic, 0)
        self.index = ShardDetector(settings.detection, settings.shard_index, settings.shards)
        self.assembly = BatchAssembly(self.digest, settings.sequenced_topic)
        self.schedule = SnapshotSchedule(settings.snapshot_interval_seconds, settings.snapshot_every_documents)
        #: Sequenced offset the index covers: every batch before it is indexed, none after (None: not restored yet).
        self.covered: int | None = None
        #: Kafka's id of the sequenced topic, as at the last restore (see ``SnapshotCoverage.topic_id``).
        self.topic_id: str | None = None
        #: Batches before this sequenced offset are indexed without being answered (answered before).
        self.answered_from = 0
        #: Where the next answer record's range starts: the offset committed last.
        self.first_offset = 0
        #: The replay under way: (first offset, documents so far, when it started), or None.
        self._replay: tuple[int, int, float] | None = None
        #: The group consumer of the session, once it holds the partition (its position tells the replay's end).
        self._consumer: KafkaConsumer | None = None
        #: A standby's reader of the sequenced topic (None: not tailing, the assembly is the active one's).
        self._tail: SequencedTail | None = None
        #: The group's committed offset as last asked by the standby, and when (monotonic).
        self._standby_target: tuple[int, float] | None = None

    def take_over(self, consumer: KafkaConsumer, assigned: list[TopicPartition]) -> dict[TopicPartition, int]:
        s = self.settings
        committed = committed_or_beginning(consumer, self.partition, self.settings.transaction_timeout_seconds)
        # Held by this session before, the index is the prefix up to `covered`, all of it committed history
        # (a step that answered and failed to commit ends the session): go on from there.
        if self.covered is None or self.covered > committed:
            self.restore(consumer, committed)
        assert self.covered is not None
        # Parts of a batch read after `covered` are read again; a standby's tailing ends here.
        self.assembly = BatchAssembly(self.digest, self.settings.sequenced_topic)
        self._stop_tailing()
        self.answered_from = self.first_offset = committed
        consumer.seek(self.partition, self.covered)
        log.info(
            "shard %d of %d: %d documents as of sequenced offset %d, replaying to %d without answering",
            s.shard_index,
            s.shards,
            len(self.index),
            self.covered,
            committed,
            extra={"covered_offset": self.covered, "committed_offset": committed},
        )
        self._replay = (self.covered, 0, time.perf_counter())
        self._consumer = consumer
        self._note_replay(0)
        return {self.partition: committed}

    def restore(self, consumer: KafkaConsumer, committed: int) -> None:
        """The newest snapshot the sequenced topic can continue up to ``committed``, else an empty index."""
        s = self.settings
        beginning = int(consumer.beginning_offsets([self.partition])[self.partition])
        usable = continued_by("sequenced topic", beginning, committed, "the group's committed offset")
        self.topic_id = topic_id(consumer, s.sequenced_topic)
        with heartbeats_while_working(self.events):  # minutes for a large index, with no poll to heartbeat
            loaded = self.store.load_newest(
                lambda path: load_shard_snapshot(path, s.detection, s.shard_index, s.shards),
                s.sequenced_topic,
                usable,
                self.topic_id,
            )
        self.schedule = SnapshotSchedule(s.snapshot_interval_seconds, s.snapshot_every_documents)
        if loaded is None:
            log.info("shard %d of %d: no usable snapshot, rebuilding from sequenced offset %d", *self._name, beginning)
            self.index = ShardDetector(s.detection, s.shard_index, s.shards)
            self.covered = beginning
        else:
            self.index, coverage = loaded
            warn_of_changed_settings(coverage, s.detection)
            self.covered = coverage.changelog_offset
            self.schedule.covers(self.covered, self.index.stream)
            self.events.snapshot_current(coverage.written_at)
        self._report_index()

    @property
    def _name(self) -> tuple[int, int]:
        return self.settings.shard_index, self.settings.shards

    def step(self, polled: dict[TopicPartition, list[Any]], held: HeldRecords = NOTHING_HELD) -> Outgoing | None:
        answers: list[ShardAnswer] = []
        documents = replayed = 0
        end: int | None = None
        stats = self.index.detector.stats
        candidates: list[npt.NDArray[np.int64]] = []
        counted = np.zeros(4, dtype=np.int64)
        for record in polled.get(self.partition, []):
            batch = self.assembly.add(record.offset, record.value)
            if batch is None:
                continue
            count = len(batch.entry.documents.ids)
            answering = batch.offset >= self.answered_from
            texts = self.texts if answering else None
            if texts is not None:
                texts.expect(batch.entry.documents.sources)
            before = stats.pair_counts()
            answer = self._index_batch(batch, texts)
            if not answering:
                replayed += count
                continue
            if answer is not None:
                answers.append(answer)
                documents += count
                candidates.append(self.index.detector.last_batch_candidates)
                counted += np.subtract(stats.pair_counts(), before)
            end = batch.offset + 1
        self._note_replay(replayed)
        if end is None:
            return None
        s = self.settings
        end = self.assembly.resume_offset(end)
        record = AnswerRecord(
            s.shard_index, s.shards, self.first_offset, end, ShardAnswer.concat(answers), self.verdict_settings
        )
        key = str(s.shard_index).encode()
        sends = [
            Send(s.answers_topic, OutgoingRecord(key, value, []), s.shard_index)
            for value in encode_answers(record, self.digest)
        ]
        found = np.concatenate(candidates) if candidates else np.zeros(0, dtype=np.int64)
        pairs, verified, settled, unsettled = (int(n) for n in counted)
        reads = self.texts.take_reads() if self.texts is not None else Counter()
        kept = self.texts.kept_bytes() if self.texts is not None else {}
        probes = ProbeCounts(found, pairs, verified, settled, unsettled, reads, kept)
        indexed, size = len(self.index), self.index.memory_bytes()
        report = StepReport("shard", documents, indexed_documents=indexed, index_bytes=size, probes=probes)
        return Outgoing(sends, {self.partition: end}, report)

    def _index_batch(self, batch: SequencedBatch, texts: RecordTexts | None) -> ShardAnswer | None:
        """Answer and index the next batch (a replay gives no ``texts``); the index then covers it.

        A batch of no document (a worker's changelog holds some) changes no index and has no answer.
        """
        self._check_input_topic(batch)
        documents = batch.entry.documents
        answer = self.index.answer(documents, batch.keys, texts) if documents.ids else None
        self.covered = batch.offset + 1
        return answer

    def _check_input_topic(self, batch: SequencedBatch) -> None:
        """Refuse a batch read from another input topic than ``input_topic``, where the shard reads texts again.

        A pair near the threshold is settled by the two records' texts, read at
        the batch's sources (partition, offset) in the shard's ``input_topic``:
        in another topic those are other records, or none, and the pair would
        be judged by unrelated texts or left to the estimate, without a word.
        The worker refuses a changelog of another input the same way
        (``worker.replay``). A method that settles nothing by text reads no input.
        """
        if self.texts is None or batch.entry.input_topic == self.settings.input_topic:
            return
        s = self.settings
        raise ConfigError(
            "input_topic",
            f"sequenced_topic {s.sequenced_topic!r} holds documents read from input topic "
            f"{batch.entry.input_topic!r} (offset {batch.offset}), but this shard reads texts again from "
            f"input_topic {s.input_topic!r}: give the shards the signers' input_topic (a worker's changelog, its "
            "input_topic)",
        )

    def stand_by(self, consumer: KafkaConsumer) -> None:
        """Keep a warm copy: index what the active replica has committed, then snapshot when due.

        The index stays a prefix the active replica had (everything before the
        group's committed offset, read from the sequenced topic with a
        consumer of no group), so a take-over goes on from it and replays only
        the batches committed since the last read. Reads for half a second at
        most, so the loop's polls (heartbeats, take-over) are not held up.
        """
        if self.covered is None:
            self.restore(
                consumer, committed_or_beginning(consumer, self.partition, self.settings.transaction_timeout_seconds)
            )
        assert self.covered is not None
        if self._tail is None:
            self._tail = SequencedTail(self.settings.connection(), self.settings.sequenced_topic)
            self._tail.seek(self.covered)
            self.assembly = BatchAssembly(self.digest, self.settings.sequenced_topic)
        target = self._standby_committed(consumer)
        indexed = 0
        deadline = time.monotonic() + _STANDBY_READ_SECONDS
        try:
            while time.monotonic() < deadline:
                records = self._tail.read(target, records_per_step(self.settings))
                if not records:
                    break
                for record in records:
                    batch = self.assembly.add(record.offset, record.value)
                    if batch is not None:
                        self._index_batch(batch, None)
                        indexed += len(batch.entry.documents.ids)
        except OffsetOutOfRangeError:
            log.warning(
                "standby shard %d of %d: sequenced records from offset %d were deleted by retention before it "
                "read them; restoring again",
                *self._name,
                self._tail.position,
            )
            self._stop_tailing()
            self.covered = None
            return
        # From what the tail read: past the last batch, the markers up to the committed offset (kafka.processed_lag).
        self.events.replay_progress(indexed, max(0, target - max(self.covered, self._tail.position)))
        if indexed:
            self._report_index()
        self.snapshot_if_due()

    def _standby_committed(self, consumer: KafkaConsumer) -> int:
        """The group's committed offset, asked again once a second at most, and only once caught up with it."""
        known = self._standby_target
        tail = self._tail
        assert tail is not None
        if known is not None and (tail.position < known[0] or time.monotonic() - known[1] < _STANDBY_REFRESH_SECONDS):
            return known[0]
        target = committed_or_beginning(consumer, self.partition, self.settings.transaction_timeout_seconds)
        self._standby_target = (target, time.monotonic())
        return target

    def _stop_tailing(self) -> None:
        if self._tail is not None:
            self._tail.close()
            self._tail = None
        self._standby_target = None

    def close(self) -> None:
        self._stop_tailing()

    def _note_replay(self, replayed: int) -> None:
        """Report the replay's progress, and its end once the index reaches the committed offset."""
        if self._replay is None or self.covered is None:
            return
        first, so_far, started = self._replay
        so_far += replayed
        remaining = max(0, self.answered_from - self._read_up_to())
        self.events.replay_progress(replayed, remaining)
        if remaining:
            self._replay = (first, so_far, started)
            return
        self._replay = None
        log.info(
            "shard %d of %d: replayed %d documents of sequenced offsets %d..%d in %.2f s",
            *self._name,
            so_far,
            first,
            self.answered_from,
            time.perf_counter() - started,
            extra={"replayed_documents": so_far, "from_offset": first, "to_offset": self.answered_from},
        )

    def _read_up_to(self) -> int:
        """Where the replay has read the sequenced topic up to: the index covers the batches before it.

        Past the last batch indexed, the consumer's position passes the
        transaction markers after it, which the committed offset passes too
        once the stage is quiet (:mod:`stream_dedup.kafka.processed_lag`): the
        index's end alone left the replay one marker short for good. The
        position as it stands (no wait for the brokers), while the partition is held.
        """
        assert self.covered is not None
        consumer = self._consumer
        if consumer is None or self.partition not in consumer.assignment():
            return self.covered
        position = consumer.position(self.partition, timeout_ms=0)
        return max(self.covered, int(position) if position is not None else self.covered)

    def committed(self, outgoing: Outgoing) -> None:
        self.first_offset = outgoing.offsets[self.partition]

    def observe(self, events: WorkerEvents) -> None:
        """The index's size, which also grows while the shard rebuilds it without answering; a snapshot if due."""
        self._report_index()
        self.snapshot_if_due()

    def _report_index(self) -> None:
        self.events.index_changed(len(self.index), self.index.memory_bytes(), self.index.detector.evicted_documents)

    def snapshot_if_due(self) -> None:
        """Start a background snapshot if one is due and none is being written.

        Called between steps, when the index is exactly the prefix up to
        ``covered`` and all of it committed history: a step that answered
        commits before this runs, or ends the session.
        """
        covered = self.covered
        if covered is None or self.store.writing or not self.schedule.due(self.index.stream):
            return
        self.schedule.started(self.index.stream)
        if covered == self.schedule.covered_offset:
            self.events.snapshot_current(time.time())  # nothing new: the last snapshot is still whole
            return
        written = functools.partial(self.snapshot_written, covered)
        self.store.write_in_background(self.index, self._coverage(covered), written, self.snapshot_failed)

    def _coverage(self, covered: int) -> SnapshotCoverage:
        """What a snapshot of the index now covers, and the settings that decided its answers."""
        return SnapshotCoverage(
            self.settings.sequenced_topic,
            covered,
            {},
            settings=self.settings.detection.verdict_settings(),
            topic_id=self.topic_id,
        )

    def snapshot_written(self, covered: int, seconds: float, pause: float, size: int) -> None:
        self.schedule.written(covered)  # only now: a failed write covers nothing (see SnapshotSchedule.written)
        self.events.snapshot_written(seconds, pause, size)
        log.info("shard %d of %d: snapshot written (%d bytes, %.2f s)", *self._name, size, pause + seconds)

    def snapshot_failed(self, error: BaseException) -> None:
        log.error(
            "snapshot failed in %s (the sequenced topic still holds everything): %s",
            self.store.directory,
            write_failure(error),
        )
        self.events.snapshot_failed(type(error).__name__)

    def finish(self) -> None:
        """Stopping: a last snapshot if anything is new, so that the next take-over replays nothing.

        Waits for a write under way for a quarter of the grace period at most,
        so that the whole stop stays within it (past it the process exits, and
        the next take-over replays from the last snapshot, as after kill -9).
        Its consumers reading input records again are closed (opened again if
        another session asks for a text).
        """
        if self.texts is not None:
            self.texts.close()
        covered = self.covered
        if covered is None or not self.store.wait(self.settings.shutdown_grace_seconds / 4):
            return
        if covered == self.schedule.covered_offset:
            return
        written = functools.partial(self.snapshot_written, covered)
        self.store.write(self.index, self._coverage(covered), written, self.snapshot_failed)
