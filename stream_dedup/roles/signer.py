"""The signer: documents in, signed batches out to the sequenced topic; bad records to the dead letters.

Stateless, and as many as the input has partitions: the group
``GROUP_ID.signers`` spreads the partitions with Kafka's own assignors. A
step takes its records as the single-process stage takes a batch, from the
event-time merge of its partitions (:class:`~stream_dedup.worker.intake.BatchIntake`:
a lagging partition is waited for up to ``max_partition_idle_ms``), so a
backlog is sequenced in the order (timestamp, partition, offset) however the
fetches interleave; it reads and signs them exactly as that stage does
(:func:`~stream_dedup.worker.signing.read_and_sign`: nothing one record
holds can fail the step), and appends them to the sequenced topic as one or
more changelog records, each a batch of its own, in the transaction that
commits the input offsets. The sequenced topic's order is the order of those
appends.
"""

import contextlib
import logging
from collections import Counter
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from stream_dedup.engine.detector import make_detector
from stream_dedup.kafka.changelog import ChangelogEntry, encode_entry
from stream_dedup.kafka.clients import end_offsets_reader, groupless_consumer
from stream_dedup.kafka.messages import dead_letter_record
from stream_dedup.kafka.offset_resets import within_the_log
from stream_dedup.kafka.record_fit import OutgoingRecord, SizeLimit
from stream_dedup.kafka.sending import Send
from stream_dedup.kafka.sequenced import check_appendable
from stream_dedup.kafka.topic_limits import size_limits
from stream_dedup.roles.held_records import NOTHING_HELD, HeldRecords
from stream_dedup.roles.session import Outgoing, RoleWork, committed_or_beginning
from stream_dedup.worker.events import StepReport, WorkerEvents
from stream_dedup.worker.intake import BatchIntake
from stream_dedup.worker.isolation import BatchFailures
from stream_dedup.worker.ordering import EventTimeMerge
from stream_dedup.worker.settings import WorkerSettings
from stream_dedup.worker.signing import read_and_sign

log = logging.getLogger(__name__)


class Signer(RoleWork):
    """One session of a signer."""

    def __init__(self, settings: WorkerSettings, events: WorkerEvents) -> None:
        self.settings = settings
        self.events = events
        self.topics = [settings.input_topic]
        self.bound = settings.input_bound()
        self.reading = settings.input_reading()
        self.digest = settings.detection.signature_fingerprint()
        self.detector = make_detector(settings.detection)
        self.limits = size_limits(settings.connection(), [settings.dead_letter_topic])
        self.key = settings.instance_id.encode("utf-8")
        #: Asks the end offsets the merge waits on (a client of its own, as the worker's).
        self.end_offsets = end_offsets_reader(settings.connection())
        #: Fetched records not yet signed, taken in event-time order; made at the session's first assignment.
        self.intake: BatchIntake | None = None

    def take_over(self, consumer: KafkaConsumer, assigned: list[TopicPartition]) -> dict[TopicPartition, int]:
        s = self.settings
        # Before appending anything: records of another signature (an upgrade whose default changed, a
        # setting changed) after the topic's would stop the shards, under the old settings as under the new.
        with contextlib.closing(groupless_consumer(s.connection(), "none")) as reader:
            check_appendable(reader, s.sequenced_topic, self.digest)
        if self.intake is None:
            merge = EventTimeMerge(
                s.max_partition_idle_ms / 1000.0, s.partition_buffer_limit, s.max_partition_buffered_bytes
            )
            # No record can fail a signer's step (read_and_sign): nothing is ever suspect.
            failures = BatchFailures()
            self.intake = BatchIntake(
                consumer,
                self.end_offsets,
                s.input_topic,
                s.batch_records,
                merge,
                failures,
                self.events,
                s.batch_span_ms,
            )
        resume = within_the_log(
            consumer,
            {
                partition: committed_or_beginning(consumer, partition, s.transaction_timeout_seconds)
                for partition in assigned
            },
        )
        for partition, offset in resume.items():
            consumer.seek(partition, offset)
        self.intake.restart(assigned)
        return resume

    def step(self, polled: dict[TopicPartition, list[Any]], held: HeldRecords = NOTHING_HELD) -> Outgoing | None:
        assert self.intake is not None, "a step comes after an assignment"
        # With many partitions, those whose records the client holds but has not handed out would count as
        # starving, and the merge would sequence past them, out of event-time order (intake.fill).
        self.intake.fill(polled, held.poll)
        if held.rebalanced:
            return None  # the loop takes over first: these partitions may be another signer's now
        records = self.intake.next_batch()
        if not records:
            return None
        s = self.settings
        documents, batch, letters = read_and_sign(records, self.reading, self.detector).split(
            self.detector.config.retention()
        )
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
        """Nothing more: the intake reports input records deleted before they were read, at every step."""

    def close(self) -> None:
        self.end_offsets.close()
