"""The judge: every shard's answers in, one verdict per document out, once all shards have answered.

The judge (group ``GROUP_ID.judge``, one active replica and standbys) reads
the sequenced topic, for each document's id, source and timestamp, and the N
partitions of the answers topic. A batch can be judged once every shard's
answers have gone past it (an answer record's ``end_offset`` is that shard's
progress); its verdicts are then :func:`~stream_dedup.engine.sharding.merge_answers`
of all the answers read, published in the format of the single-process stage.

One step is one transaction: the verdicts of the batches ready (at most
about ten batches' worth of documents), the sequenced offset after them,
and for each answers partition the offset of the first record not wholly
used (:meth:`~stream_dedup.kafka.answers.AnswerRecord.used_up_before`).
After a restart the judge reads again from those offsets; answers for
documents it has already judged are read again and ignored, since their
batches lie before the committed sequenced offset.
"""

import logging
import time
from collections import Counter, deque
from typing import Any

import numpy as np
from kafka import KafkaConsumer, TopicPartition

from stream_dedup.config import settings_changes
from stream_dedup.engine.sharding import merge_answers
from stream_dedup.errors import ConfigError
from stream_dedup.kafka.answers import AnswerRecord, decode_answer
from stream_dedup.kafka.clients import log_offsets
from stream_dedup.kafka.messages import Source, match_coordinates, verdict_value
from stream_dedup.kafka.packed_arrays import record_at
from stream_dedup.kafka.record_fit import OutgoingRecord
from stream_dedup.kafka.sending import Send
from stream_dedup.kafka.sequenced import BatchAssembly, SequencedBatch
from stream_dedup.kafka.topic_limits import size_limits
from stream_dedup.roles.held_records import NOTHING_HELD, HeldRecords
from stream_dedup.roles.session import Outgoing, RoleWork, committed_or_beginning
from stream_dedup.roles.unique_forwards import UniqueForwards
from stream_dedup.worker.events import StepReport, WorkerEvents
from stream_dedup.worker.settings import WorkerSettings

log = logging.getLogger(__name__)

#: Batches' worth of documents (of ``batch_size``) judged in one transaction at most.
_BATCHES_PER_STEP = 10
#: How long batches wait for a shard that has answered nothing before the judge names it in a WARNING.
_SILENT_SHARD_SECONDS = 60.0


class Judge(RoleWork):
    """One session of the judge; ``forwards`` (outliving sessions) with ``unique_topic`` set."""

    def __init__(self, settings: WorkerSettings, forwards: UniqueForwards | None = None) -> None:
        self.settings = settings
        self.forwards = forwards
        self.topics = [settings.sequenced_topic, settings.answers_topic]
        forwarded = [forwards.unique_topic, forwards.dead_letter_topic] if forwards is not None else []
        self.limits = size_limits(settings.connection(), forwarded) if forwarded else {}
        self.digest = settings.detection.signature_fingerprint()
        self.fingerprint = settings.detection.fingerprint()
        self.verdict_settings = settings.detection.verdict_settings()
        #: Per shard, how its answers' settings differ from ours, as last said in a warning.
        self.settings_warned: dict[int, str | None] = {}
        self.sequenced = TopicPartition(settings.sequenced_topic, 0)
        #: The group consumer of the session, once it holds the partitions (asked for the sequenced topic's end).
        self.consumer: KafkaConsumer | None = None
        #: An end offset of the sequenced topic known to hold: a shard answering up to it read this topic.
        self.sequenced_end = 0
        self._forget()

    def _forget(self) -> None:
        """Drop what was read: the consumer is about to read again from the committed offsets."""
        self.assembly = BatchAssembly(self.digest, self.settings.sequenced_topic)
        self.batches: deque[SequencedBatch] = deque()
        #: Per shard, the answer records read and not yet wholly used, with their offsets, in order.
        self.answers: dict[int, deque[tuple[int, AnswerRecord]]] = {k: deque() for k in range(self.settings.shards)}
        #: Per shard, the sequenced offset its answers have reached.
        self.progress: dict[int, int] = {}
        #: When the oldest batch waiting for answers was read (the merge wait).
        self.waiting_since: float | None = None
        #: Shards named in a WARNING for answering nothing while batches waited for them.
        self.named_silent: set[int] = set()

    def take_over(self, consumer: KafkaConsumer, assigned: list[TopicPartition]) -> dict[TopicPartition, int]:
        s = self.settings
        partitions = consumer.partitions_for_topic(s.answers_topic) or set()
        if len(partitions) != s.shards:
            raise ConfigError(
                "shards",
                f"the judge expects {s.shards} shards but answers_topic {s.answers_topic!r} has {len(partitions)} "
                "partitions (one per shard): give every role the same shards setting",
            )
        self._forget()
        self.consumer = consumer
        resume = {
            partition: committed_or_beginning(consumer, partition, s.transaction_timeout_seconds)
            for partition in assigned
        }
        for partition, offset in resume.items():
            consumer.seek(partition, offset)
        return resume

    def step(self, polled: dict[TopicPartition, list[Any]], held: HeldRecords = NOTHING_HELD) -> Outgoing | None:
        for partition, records in polled.items():
            if partition == self.sequenced:
                self._read_batches(records)
            else:
                self._read_answers(partition.partition, records)
        ready = self._ready_batches()
        if not ready:
            return None
        keys = np.concatenate([batch.keys for batch in ready])
        ids = [doc_id for batch in ready for doc_id in batch.entry.documents.ids]
        answers = [record.answer for records in self.answers.values() for _, record in records]
        verdicts = merge_answers(keys, ids, answers)
        sends = []
        sources = [source for batch in ready for source in _sources(batch)]
        for verdict, source in zip(verdicts, sources, strict=True):
            value = verdict_value(verdict, source, self.fingerprint)
            sends.append(Send(self.settings.output_topic, OutgoingRecord(verdict.id.encode("utf-8"), value, [])))
        dead_letters: list[str] = []
        if self.forwards is not None:
            uniques = [(v.id, source) for v, source in zip(verdicts, sources, strict=True) if v.verdict == "unique"]
            forwards, dead_letters = self.forwards.sends(uniques, self.limits)
            sends += forwards
        judged_until = ready[-1].offset + 1
        offsets = {self.sequenced: self.assembly.resume_offset(judged_until)}
        for shard, kept in self.answers.items():
            while kept and kept[0][1].used_up_before(judged_until):
                offset, _ = kept.popleft()
                offsets[TopicPartition(self.settings.answers_topic, shard)] = offset + 1
            if kept:
                offsets[TopicPartition(self.settings.answers_topic, shard)] = kept[0][0]
        report = StepReport(
            "judge",
            len(verdicts),
            verdicts=Counter(verdict.verdict for verdict in verdicts),
            dead_letters=Counter(dead_letters),
            timestamps_ms=np.array([source.timestamp for source in sources], dtype=np.int64),
        )
        return Outgoing(sends, offsets, report)

    def observe(self, events: WorkerEvents) -> None:
        waited = 0.0 if self.waiting_since is None else time.monotonic() - self.waiting_since
        events.merge_waited(waited)
        self._name_silent_shards(waited)

    def committed(self, outgoing: Outgoing) -> None:
        """Nothing to note: what the judge keeps was updated as it stepped."""

    def finish(self) -> None:
        """Stopping: the consumer reading unique documents' records again is closed."""
        if self.forwards is not None:
            self.forwards.close()

    def _read_batches(self, records: list[Any]) -> None:
        """Every batch waits for the shards' answers, one of no document too (a worker's changelog holds one
        after each quiet spell): judged (no verdict), the sequenced offset committed passes it. Left out, the
        judge's commit stayed before it for good, a lag that never went on a quiet stage."""
        for record in records:
            batch = self.assembly.add(record.offset, record.value)
            if batch is not None:
                self.batches.append(batch)
                if self.waiting_since is None:
                    self.waiting_since = time.monotonic()

    def _read_answers(self, shard: int, records: list[Any]) -> None:
        s = self.settings
        for record in records:
            with record_at(s.answers_topic, shard, record.offset):
                answer = decode_answer(record.value, self.digest)
            if answer.shards != s.shards or answer.shard != shard:
                raise ConfigError(
                    "shards",
                    f"partition {shard} of answers_topic {s.answers_topic!r} holds answers of shard {answer.shard} "
                    f"of {answer.shards}, but this judge runs with shards={s.shards}: give every role the same "
                    "shards setting (a new shard count needs a new group_id, see docs/scale-out.md)",
                )
            self._check_settings(shard, answer)
            self._check_sequenced_topic(shard, answer.end_offset)
            self.answers[shard].append((record.offset, answer))
            self.progress[shard] = max(self.progress.get(shard, 0), answer.end_offset)

    def _name_silent_shards(self, waited: float) -> None:
        """Name, once a session, each shard that has answered nothing while batches waited a minute for it.

        A shard index no process runs (two shards given the same
        ``shard_index``, one left out of a new set) stops every verdict: the
        alerts say the judge is stuck, this says which shard it waits for.
        """
        if waited < _SILENT_SHARD_SECONDS:
            return
        s = self.settings
        for shard in range(s.shards):
            if shard not in self.progress and shard not in self.named_silent:
                self.named_silent.add(shard)
                log.warning(
                    "batches have waited %.0f s for shard %d of %d, which has answered nothing since this judge "
                    "took over: is a shard with shard_index=%d running (group %r, writing partition %d of "
                    "answers_topic %r)?",
                    waited,
                    shard,
                    s.shards,
                    shard,
                    s.group_of("shard", shard),
                    shard,
                    s.answers_topic,
                )

    def _check_settings(self, shard: int, answer: AnswerRecord) -> None:
        """Warn once a shard answers under other verdict settings than ours, and again whenever that changes.

        Settings that keep the signatures (a threshold that keeps the banding,
        retention, the cap) may differ: the answers decode, but the matches were
        found under the shard's settings while the verdicts carry this judge's
        ``params_fingerprint``. Not refused: answers written before a settings
        change are still read after it.
        """
        changed = None if answer.settings is None else settings_changes(answer.settings, self.verdict_settings)
        if changed != self.settings_warned.get(shard) and changed is not None:
            log.warning(
                "shard %d answers under other detection settings than this judge's (%s): give the shards and the "
                "judge the same settings; verdicts carry this judge's params_fingerprint %s",
                shard,
                changed,
                self.fingerprint,
            )
        self.settings_warned[shard] = changed

    def _check_sequenced_topic(self, shard: int, answered_until: int) -> None:
        """Refuse answers past the end of our sequenced topic: the shards read another one.

        A shard answers only records of the sequenced topic it reads, so its
        progress never passes that topic's end. A judge given another topic
        (a new shard set's judge started with ``group_id`` G' but without
        ``sequenced_topic``, which then defaults to an empty ``G'.sequenced``)
        would otherwise wait for batches that never come, without a word.
        """
        if answered_until <= self.sequenced_end or self.consumer is None:
            return
        self.sequenced_end = max(self.sequenced_end, self.consumer.highwater(self.sequenced) or 0)
        if answered_until <= self.sequenced_end:
            return
        self.sequenced_end = log_offsets(self.consumer, [self.sequenced])[self.sequenced]
        if answered_until > self.sequenced_end:
            s = self.settings
            raise ConfigError(
                "sequenced_topic",
                f"shard {shard} has answered sequenced offsets up to {answered_until}, but sequenced_topic "
                f"{s.sequenced_topic!r} of this judge ends at {self.sequenced_end}: the shards read another "
                "sequenced topic. Give the judge the shards' sequenced_topic (a new shard set and its judge read "
                "the running set's, see docs/scale-out.md)",
            )

    def _ready_batches(self) -> list[SequencedBatch]:
        """The batches every shard has answered past, oldest first, up to a step's worth of documents."""
        answered = min(self.progress.get(shard, -1) for shard in range(self.settings.shards))
        ready: list[SequencedBatch] = []
        documents = 0
        limit = _BATCHES_PER_STEP * self.settings.batch_size
        while self.batches and self.batches[0].offset < answered and (not ready or documents < limit):
            batch = self.batches.popleft()
            ready.append(batch)
            documents += len(batch.entry.documents.ids)
        if ready:
            self.waiting_since = time.monotonic() if self.batches else None
        return ready


def _sources(batch: SequencedBatch) -> list[Source]:
    """Where each document of ``batch`` was read, from the pointer and event time the signer kept."""
    documents = batch.entry.documents
    sources = []
    for pointer, event_time in zip(documents.sources.tolist(), documents.event_times.tolist(), strict=True):
        partition, offset = match_coordinates(pointer)
        sources.append(Source(batch.entry.input_topic, partition, offset, round(event_time * 1000)))
    return sources
