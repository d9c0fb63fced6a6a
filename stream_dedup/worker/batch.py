"""One batch, one transaction: verdicts, dead letters, unique forwards, changelog and offsets.

Order inside the transaction does not matter to readers (they see all of it
or none of it), but it matters to us: the detector must have processed the
batch before the changelog record is written, and the offsets sent last, so
that a failure anywhere leaves an open transaction that is aborted, never a
half-committed batch.
"""

import logging
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from kafka import KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from stream_dedup.engine.detector import Detector
from stream_dedup.kafka.changelog import ChangelogEntry, encode_entry
from stream_dedup.kafka.messages import (
    DeadLetter,
    InputDocument,
    InputReading,
    dead_letter_headers,
    read_record,
    source_of,
    source_pointer,
    verdict_value,
)
from stream_dedup.lsh.generation import IndexedBatch
from stream_dedup.worker.events import BatchReport
from stream_dedup.worker.isolation import ISOLATED_REASON, coordinates

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Destinations:
    """Where a batch's records go."""

    output_topic: str
    dead_letter_topic: str
    changelog_topic: str
    unique_topic: str | None


@dataclass(frozen=True)
class CommittedBatch:
    """What a committed batch changed: the changelog offset after it, and the report."""

    changelog_offset: int
    report: BatchReport


def publish_batch(
    records: list[Any],
    detector: Detector,
    producer: KafkaProducer,
    consumer_group: Any,
    positions: dict[int, int],
    reading: InputReading,
    destinations: Destinations,
    digest: str,
    started: float,
    refused: Mapping[tuple[str, int, int], str] | None = None,
) -> CommittedBatch:
    """Process ``records`` and commit everything they produce in one transaction.

    ``positions`` (input partition -> next offset) is updated in place only
    once the commit succeeded. Raises whatever the client raises; the caller
    must then treat the detector as dirty (it already indexed the batch).
    ``refused`` (coordinates -> error) are records isolated as making their
    batch fail (:mod:`stream_dedup.worker.isolation`): dead-lettered unread.
    """
    documents: list[InputDocument] = []
    letters: list[DeadLetter] = []
    for record in records:
        error = refused.get(coordinates(record)) if refused else None
        if error is not None:
            letters.append(DeadLetter(ISOLATED_REASON, f"its batch kept failing: {error}", source_of(record), record))
            continue
        item = read_record(record, reading)
        if isinstance(item, InputDocument):
            documents.append(item)
        else:
            letters.append(item)
    input_topic = records[0].topic
    after = dict(positions)
    for record in records:
        after[record.partition] = max(after.get(record.partition, 0), record.offset + 1)

    candidates_before, verified_before = detector.stats.candidates, detector.stats.verified
    producer.begin_transaction()
    verdict_counts: Counter[str] = Counter()
    indexed = IndexedBatch(
        [d.id for d in documents],
        detector.sign([d.text for d in documents], normalized=True),
        np.array([d.source.timestamp / 1000.0 for d in documents], dtype=np.float64),
        np.array([source_pointer(d.source) for d in documents], dtype=np.uint64),
    )
    if documents:
        verdicts = detector.process_signed(indexed)
        fingerprint = detector.config.fingerprint()
        for verdict, document in zip(verdicts, documents, strict=True):
            producer.send(
                destinations.output_topic,
                key=verdict.id.encode("utf-8"),
                value=verdict_value(verdict, document.source, fingerprint),
            )
            verdict_counts[verdict.verdict] += 1
            if destinations.unique_topic is not None and verdict.verdict == "unique":
                record = document.record
                producer.send(destinations.unique_topic, key=record.key, value=record.value, headers=record.headers)
    for letter in letters:
        producer.send(
            destinations.dead_letter_topic,
            key=letter.record.key,
            value=letter.record.value,
            headers=dead_letter_headers(letter),
        )
    # Every batch writes a changelog record, even one of only dead letters:
    # it carries the input positions a restore resumes from.
    entry = ChangelogEntry(indexed, input_topic, after)
    changelog_sends = [
        producer.send(destinations.changelog_topic, value=value, partition=0) for value in encode_entry(entry, digest)
    ]
    producer.send_offsets_to_transaction(
        {TopicPartition(input_topic, p): OffsetAndMetadata(after[p], "", -1) for p in {r.partition for r in records}},
        consumer_group,
    )
    producer.commit_transaction()
    committed_at = time.time()
    positions.update(after)
    for letter in letters:
        topic, partition, offset, _ = letter.source
        log.warning(
            "dead letter (%s): %s",
            letter.reason,
            letter.detail,
            extra={"topic": topic, "partition": partition, "offset": offset, "reason": letter.reason},
        )
    return CommittedBatch(
        changelog_offset=changelog_sends[-1].get().offset + 1,
        report=BatchReport(
            verdicts=verdict_counts,
            dead_letters=Counter(letter.reason for letter in letters),
            seconds=time.perf_counter() - started,
            committed_at=committed_at,
            timestamps_ms=np.array([d.source.timestamp for d in documents], dtype=np.int64),
            candidates=detector.last_batch_candidates if documents else np.zeros(0, dtype=np.int64),
            candidate_pairs=detector.stats.candidates - candidates_before,
            verified_pairs=detector.stats.verified - verified_before,
            indexed_documents=len(detector),
            index_bytes=detector.memory_bytes(),
            evicted_documents=detector.index.evicted_documents,
            hot_bucket_skips=detector.index.hot_bucket_skips,
        ),
    )
