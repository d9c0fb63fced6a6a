"""The signer sequences a backlog of many partitions in event-time order, and stops a step at a rebalance.

kafka-python hands out ``batch_size`` records a poll, one partition's after
another's: with 128 partitions, the records of the last ones are fetched but
not handed out, and a signer that merged only what one poll gave took them
for starving partitions and (its idle time over, as on a loaded machine)
sequenced past them, out of event-time order: every shard and the judge then
judge in that order.
"""

import json
from typing import Any

from kafka import TopicPartition
from kafka.consumer.fetcher import ConsumerRecord

from stream_dedup.engine.detector import make_detector
from stream_dedup.kafka.assignments import AssignmentNotes
from stream_dedup.kafka.changelog import decode_entry
from stream_dedup.kafka.processed_lag import ProcessedLag
from stream_dedup.roles.held_records import GroupHeldRecords
from stream_dedup.roles.signer import Signer
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.intake import BatchIntake
from stream_dedup.worker.isolation import BatchFailures
from stream_dedup.worker.ordering import EventTimeMerge, order_key
from stream_dedup.worker.settings import WorkerSettings

from ..worker.test_intake import HandingOut

PARTITIONS, PER_PARTITION, BATCH = 128, 10, 1000
TOPIC = "documents"


def document(partition: int, offset: int) -> Any:
    """Stamped round robin over the partitions: event time interleaves them all."""
    doc_id = f"doc-{partition}-{offset}"
    value = json.dumps({"id": doc_id, "text": f"document {doc_id} of the backlog"}).encode()
    timestamp = 1_700_000_000_000 + offset * PARTITIONS + partition
    return ConsumerRecord(TOPIC, partition, -1, offset, timestamp, 0, None, value, [], None, -1, -1, -1)


class RebalancingLogs(HandingOut):
    """The backlog's client, whose listener a poll runs: the ``rebalance_at``-th poll revokes every partition."""

    def __init__(self, notes: AssignmentNotes, rebalance_at: int | None) -> None:
        super().__init__({p: [document(p, o) for o in range(PER_PARTITION)] for p in range(PARTITIONS)}, 0)
        self.notes = notes
        self.rebalance_at = rebalance_at
        self.polls = 0

    def poll(self, max_records: int, timeout_ms: int = 0) -> dict[TopicPartition, list[Any]]:
        self.polls += 1
        if self.polls == self.rebalance_at:
            self.notes.on_partitions_revoked(sorted(self.logs))
        return super().poll(max_records)


def signer_over(logs: RebalancingLogs) -> Signer:
    """A signer past its takeover of every partition, reading ``logs``; its idle time over at once."""
    settings = WorkerSettings(batch_size=BATCH, max_partition_idle_ms=0, input_topic=TOPIC)
    signer: Any = Signer.__new__(Signer)
    signer.settings = settings
    signer.reading = settings.input_reading()
    signer.detector = make_detector(settings.detection)
    signer.digest = settings.detection.signature_fingerprint()
    signer.key = b"signer-1"
    signer.limits = {}
    consumer: Any = logs
    merge = EventTimeMerge(0.0, settings.partition_buffer_limit)
    signer.intake = BatchIntake(consumer, consumer, TOPIC, BATCH, merge, BatchFailures(), WorkerEvents())
    signer.intake.restart([TopicPartition(TOPIC, p) for p in range(PARTITIONS)])
    return signer


def held_records(logs: RebalancingLogs, notes: AssignmentNotes) -> GroupHeldRecords:
    consumer: Any = logs
    notes.holding = True
    return GroupHeldRecords(consumer, notes, BATCH, ProcessedLag())


def test_a_backlog_of_128_partitions_is_sequenced_in_event_time_order() -> None:
    notes = AssignmentNotes()
    logs = RebalancingLogs(notes, rebalance_at=None)
    signer = signer_over(logs)
    outgoing = signer.step(logs.poll(BATCH), held_records(logs, notes))
    assert outgoing is not None
    entry = decode_entry(outgoing.sends[0].record.value, signer.digest)
    everything = sorted((r for log in logs.logs.values() for r in log), key=order_key)
    assert list(entry.documents.ids) == [json.loads(r.value)["id"] for r in everything[:BATCH]]


def test_a_step_whose_held_poll_revoked_the_partitions_sequences_nothing() -> None:
    notes = AssignmentNotes()
    logs = RebalancingLogs(notes, rebalance_at=2)
    signer = signer_over(logs)
    assert signer.step(logs.poll(BATCH), held_records(logs, notes)) is None
    assert logs.polls == 2  # and no poll after the one that revoked


def test_a_held_poll_that_brings_an_assignment_gives_nothing_and_says_so() -> None:
    notes = AssignmentNotes()
    logs = RebalancingLogs(notes, rebalance_at=None)
    held = held_records(logs, notes)
    notes.on_partitions_assigned([TopicPartition(TOPIC, 0)])
    assert held.rebalanced
    assert held.poll() == {}
    assert logs.polls == 0
