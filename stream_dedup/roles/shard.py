"""A shard: the whole sequenced topic in, this shard's best match for every document out.

Shard ``shard_index`` of ``shards`` (group ``GROUP_ID.shard-K``, one active
replica and standbys) reads every batch of the sequenced topic in order and
asks its :class:`~stream_dedup.engine.sharding.ShardDetector` for the best
match of each document among the documents it owns, then indexes the ones it
owns. One step is one transaction: one answer record (in parts if large) to
partition K of the answers topic, covering the sequenced offsets the step
read, and the sequenced offset after them, committed for the shard's group.

Its index is a function of the sequenced topic's prefix, so the sequenced
topic is its changelog: a session starts from an empty index, reads the
topic from its first offset, and answers only from the group's committed
offset on (the batches before it were answered by an earlier session, whose
answers are committed). Snapshots, which would shorten that replay, are not
built yet (``docs/scale-out.md``).
"""

import logging
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from stream_dedup.engine.sharding import ShardAnswer, ShardDetector
from stream_dedup.kafka.answers import AnswerRecord, encode_answers
from stream_dedup.kafka.record_fit import OutgoingRecord
from stream_dedup.kafka.sequenced import BatchAssembly
from stream_dedup.roles.session import Outgoing, RoleWork, Send, committed_or_beginning
from stream_dedup.worker.events import StepReport, WorkerEvents
from stream_dedup.worker.settings import WorkerSettings

log = logging.getLogger(__name__)


class Shard(RoleWork):
    """One session of a shard."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self.topics = [settings.sequenced_topic]
        self.limits = {}
        self.digest = settings.detection.signature_fingerprint()
        self.partition = TopicPartition(settings.sequenced_topic, 0)
        self.index = ShardDetector(settings.detection, settings.shard_index, settings.shards)
        self.assembly = BatchAssembly(self.digest)
        #: Batches before this sequenced offset are indexed without being answered (answered before).
        self.answered_from = 0
        #: Where the next answer record's range starts: the offset committed last.
        self.first_offset = 0

    def take_over(self, consumer: KafkaConsumer, assigned: list[TopicPartition]) -> None:
        committed = committed_or_beginning(consumer, self.partition)
        beginning = int(consumer.beginning_offsets([self.partition])[self.partition])
        if len(self.index) or self.assembly.resume_offset(beginning) != beginning:
            # Held by this session before: start over, the index must be the topic's prefix.
            self.index = ShardDetector(self.settings.detection, self.settings.shard_index, self.settings.shards)
            self.assembly = BatchAssembly(self.digest)
        self.answered_from = self.first_offset = committed
        consumer.seek(self.partition, beginning)
        log.info(
            "shard %d of %d: rebuilding from sequenced offset %d, answering from %d",
            self.settings.shard_index,
            self.settings.shards,
            beginning,
            committed,
        )

    def step(self, polled: dict[TopicPartition, list[Any]]) -> Outgoing | None:
        answers: list[ShardAnswer] = []
        documents = 0
        end: int | None = None
        for record in polled.get(self.partition, []):
            batch = self.assembly.add(record.offset, record.value)
            if batch is None:
                continue
            count = len(batch.entry.documents.ids)
            # A batch of no document (a worker's changelog holds some) changes no index: skipped, as a replay does.
            answer = self.index.answer(batch.entry.documents, batch.keys) if count else None
            if batch.offset < self.answered_from:
                continue
            if answer is not None:
                answers.append(answer)
                documents += count
            end = batch.offset + 1
        if end is None:
            return None
        s = self.settings
        end = self.assembly.resume_offset(end)
        record = AnswerRecord(s.shard_index, s.shards, self.first_offset, end, ShardAnswer.concat(answers))
        key = str(s.shard_index).encode()
        sends = [
            Send(s.answers_topic, OutgoingRecord(key, value, []), s.shard_index)
            for value in encode_answers(record, self.digest)
        ]
        report = StepReport(
            "shard", documents, indexed_documents=len(self.index), index_bytes=self.index.memory_bytes()
        )
        return Outgoing(sends, {self.partition: end}, report)

    def committed(self, outgoing: Outgoing) -> None:
        self.first_offset = outgoing.offsets[self.partition]

    def observe(self, events: WorkerEvents) -> None:
        """The index's size, which also grows while the shard rebuilds it without answering."""
        events.index_changed(len(self.index), self.index.memory_bytes(), self.index.detector.evicted_documents)
