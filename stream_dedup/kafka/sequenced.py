"""Reading the sequenced topic: its records back into batches, each with its place in the one order.

The sequenced topic has one partition; its records are changelog records
(:mod:`~stream_dedup.kafka.changelog`), one batch each (signers write every
part of a big batch as a batch of its own) or, in a worker's changelog read
as a sequenced topic, the contiguous parts of one batch. A batch's place in
the order is the offset of its last record, and its documents' sequence keys
follow from it (:func:`~stream_dedup.engine.sharding.sequence_keys`).
"""

import time
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaTimeoutError

from stream_dedup.engine.sharding import SequenceKeys, sequence_keys
from stream_dedup.kafka.changelog import ChangelogEntry, decode_entry, merge_parts
from stream_dedup.kafka.packed_arrays import record_at


@dataclass(frozen=True)
class SequencedBatch:
    """A batch of the sequenced topic: its documents, and the offset of its last record."""

    offset: int
    entry: ChangelogEntry

    @property
    def keys(self) -> SequenceKeys:
        return sequence_keys(self.offset, len(self.entry.documents.ids))


class BatchAssembly:
    """Puts the records of the sequenced topic, read in order, back into batches.

    ``digest`` is the signature fingerprint the reader works with: a record
    of other signature parameters, or a damaged one, raises
    :class:`~stream_dedup.errors.ChangelogError` naming where in ``topic`` it is.
    """

    def __init__(self, digest: str, topic: str) -> None:
        self.digest = digest
        self.topic = topic
        self._parts: list[ChangelogEntry] = []
        self._first_part_offset: int | None = None

    def add(self, offset: int, value: bytes) -> SequencedBatch | None:
        """The batch this record completes, if it completes one."""
        with record_at(self.topic, 0, offset):
            entry = decode_entry(value, self.digest, "sequenced_topic")
        if not entry.final:
            if self._first_part_offset is None:
                self._first_part_offset = offset
            self._parts.append(entry)
            return None
        batch = SequencedBatch(offset, merge_parts([*self._parts, entry]))
        self._parts.clear()
        self._first_part_offset = None
        return batch

    def resume_offset(self, after: int) -> int:
        """Where a reader that has used every batch up to offset ``after`` (exclusive) must resume.

        Before the first part of a batch still incomplete, so that no part is
        lost; else ``after``.
        """
        return after if self._first_part_offset is None else min(after, self._first_part_offset)


def every_batch(consumer: KafkaConsumer, topic: str, digest: str) -> list[SequencedBatch]:
    """Every batch of the sequenced ``topic`` as it stands now, in order (an audit, a test, a benchmark).

    ``consumer`` must not belong to a group; it is assigned the topic's partition.
    """
    partition = TopicPartition(topic, 0)
    consumer.assign([partition])
    consumer.seek_to_beginning(partition)
    end = consumer.end_offsets([partition])[partition]
    assembly = BatchAssembly(digest, topic)
    batches = []
    while consumer.position(partition) < end:
        for record in consumer.poll(timeout_ms=500).get(partition, []):
            batch = assembly.add(record.offset, record.value)
            if batch is not None:
                batches.append(batch)
    return batches


#: Offsets before the end the newest committed record is first looked for: a transaction's records lie
#: behind its marker, and aborted transactions (records, marker) may follow it. Doubled until one is found.
_FIRST_LOOK_BACK = 64

#: Longest the look for it may take: past it the session ends as on any Kafka error, and tries again.
_NEWEST_RECORD_SECONDS = 60.0


def newest_record(consumer: KafkaConsumer, partition: TopicPartition) -> Any | None:
    """The newest committed record of ``partition``, or None if it holds none.

    ``consumer`` (of no group, ``read_committed``) is assigned the partition.
    Reads back from the end in doubling windows, so a long topic costs a few
    fetches, not a replay.
    """
    consumer.assign([partition])
    first = consumer.beginning_offsets([partition])[partition]
    end = consumer.end_offsets([partition])[partition]
    deadline = time.monotonic() + _NEWEST_RECORD_SECONDS
    back = _FIRST_LOOK_BACK
    while end > first:
        start = max(first, end - back)
        consumer.seek(partition, start)
        newest = None
        while consumer.position(partition) < end:
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"{partition.topic} not read to offset {end} in {_NEWEST_RECORD_SECONDS:.0f} s")
            for record in consumer.poll(timeout_ms=500).get(partition, []):
                if record.offset < end:
                    newest = record
        if newest is not None:
            return newest
        end, back = start, 2 * back
    return None


def check_appendable(consumer: KafkaConsumer, topic: str, digest: str) -> None:
    """Raise :class:`~stream_dedup.errors.ChangelogError` if the sequenced ``topic``'s newest record is of other
    signature parameters than ``digest``'s (or not a record of ours).

    A signer calls it before it appends anything: it keeps no index, so
    nothing else would stop it, and its records would follow records of
    another signature in the one order. The shards refuse the first of
    them, and after it neither setting could run on; refused here, the
    stage is only stopped, and runs on under the settings it was built with.
    """
    partition = TopicPartition(topic, 0)
    record = newest_record(consumer, partition)
    if record is not None:
        with record_at(topic, 0, record.offset):
            decode_entry(record.value, digest, "sequenced_topic")
