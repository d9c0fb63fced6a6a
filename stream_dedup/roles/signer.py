"""The signer: documents in, signed batches out to the sequenced topic; bad records to the dead letters.

Stateless, and as many as the input has partitions: the group
``GROUP_ID.signers`` spreads the partitions with Kafka's own assignors. A
step reads and signs what was polled exactly as the single-process stage
does (:func:`~stream_dedup.worker.signing.read_and_sign`: nothing one record
holds can fail the step), in event-time order (timestamp, partition,
offset), and appends it to the sequenced topic as one or more changelog
records, each a batch of its own, in the transaction that commits the input
offsets. The sequenced topic's order is the order of those appends.
"""

import logging
from collections import Counter
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from stream_dedup.engine.detector import make_detector
from stream_dedup.kafka.changelog import ChangelogEntry, encode_entry
from stream_dedup.kafka.messages import dead_letter_record
from stream_dedup.kafka.offset_resets import DeletedInput
from stream_dedup.kafka.record_fit import OutgoingRecord, SizeLimit
from stream_dedup.kafka.sending import Send
from stream_dedup.kafka.topic_limits import size_limits
from stream_dedup.roles.session import Outgoing, RoleWork, committed_or_beginning
from stream_dedup.worker.events import StepReport, WorkerEvents
from stream_dedup.worker.settings import WorkerSettings
from stream_dedup.worker.signing import read_and_sign

log = logging.getLogger(__name__)


class Signer(RoleWork):
    """One session of a signer."""

    def __init__(self, settings: WorkerSettings) -> None:
        self.settings = settings
        self.topics = [settings.input_topic]
        self.reading = settings.input_reading()
        self.digest = settings.detection.signature_fingerprint()
        self.detector = make_detector(settings.detection)
        self.limits = size_limits(settings.connection(), [settings.dead_letter_topic])
        self.key = settings.instance_id.encode("utf-8")
        #: Input records deleted before they were read (watched from the session's first assignment on).
        self.deleted: DeletedInput | None = None

    def take_over(self, consumer: KafkaConsumer, assigned: list[TopicPartition]) -> dict[TopicPartition, int]:
        if self.deleted is None:
            self.deleted = DeletedInput(consumer, consumer)
        timeout = self.settings.transaction_timeout_seconds
        resume = {partition: committed_or_beginning(consumer, partition, timeout) for partition in assigned}
        for partition, offset in resume.items():
            consumer.seek(partition, offset)
        return resume

    def step(self, polled: dict[TopicPartition, list[Any]]) -> Outgoing | None:
        records = sorted((r for rs in polled.values() for r in rs), key=lambda r: (r.timestamp, r.partition, r.offset))
        if not records:
            return None
        s = self.settings
        documents, batch, letters = read_and_sign(records, self.reading, self.detector).split()
        after: dict[int, int] = {}
        for record in records:
            after[record.partition] = max(after.get(record.partition, 0), record.offset + 1)
        sends = [
            Send(s.sequenced_topic, OutgoingRecord(self.key, value, []), 0)
            for value in (
                encode_entry(ChangelogEntry(batch, s.input_topic, after), self.digest, independent=True)
                if documents
                else []
            )
        ]
        limit = self.limits.get(s.dead_letter_topic) or SizeLimit()
        for letter in letters:
            sends.append(Send(s.dead_letter_topic, dead_letter_record(letter, limit)))
            log.warning("dead letter (%s): %s", letter.reason, letter.detail)
        offsets = {TopicPartition(s.input_topic, p): offset for p, offset in after.items()}
        report = StepReport("signer", len(documents), dead_letters=Counter(letter.reason for letter in letters))
        return Outgoing(sends, offsets, report)

    def committed(self, outgoing: Outgoing) -> None:
        """Nothing to note: a signer keeps no state."""

    def observe(self, events: WorkerEvents) -> None:
        """Input records deleted before they were read (the session measures the input's lag)."""
        if self.deleted is not None:
            self.deleted.report(events.input_deleted)
