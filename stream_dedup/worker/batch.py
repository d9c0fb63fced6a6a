"""One batch, one transaction: verdicts, dead letters, unique forwards, changelog and offsets.

Order inside the transaction does not matter to readers (they see all of it
or none of it), but it matters to us: the detector must have processed the
batch before the changelog record is written, and the offsets sent last, so
that a failure anywhere leaves an open transaction that is aborted, never a
half-committed batch.

The records come read and signed (:mod:`stream_dedup.worker.signing`, ahead
of this, in this process or another). Nothing one record holds may fail the
batch, or the batch would fail again after every restart and the stage would
stall: every record sent is first made to fit its topic
(:mod:`stream_dedup.kafka.record_fit`).
"""

import logging
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from kafka import KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.kafka.changelog import ChangelogEntry, encode_entry
from stream_dedup.kafka.clients import PRODUCER_TUNING
from stream_dedup.kafka.messages import (
    DeadLetter,
    added_headers,
    verdict_value,
)
from stream_dedup.kafka.record_fit import TRUNCATED_HEADER, OutgoingRecord, SizeLimit, fits, fitted
from stream_dedup.kafka.record_texts import RecordTexts
from stream_dedup.worker.events import BatchReport, PublishedDuplicate
from stream_dedup.worker.signing import SignedRecords

log = logging.getLogger(__name__)

#: Dead-letter reasons of records whose output does not fit its topic.
VERDICT_TOO_LARGE = "verdict_too_large"
UNIQUE_TOO_LARGE = "unique_too_large"


@dataclass(frozen=True)
class Destinations:
    """Where a batch's records go."""

    output_topic: str
    dead_letter_topic: str
    changelog_topic: str
    unique_topic: str | None
    #: What each written topic accepts (read from the brokers at start-up); the broker's default if absent.
    limits: Mapping[str, SizeLimit] = field(default_factory=dict)

    def limit(self, topic: str) -> SizeLimit:
        return self.limits.get(topic) or SizeLimit()


@dataclass(frozen=True)
class CommittedBatch:
    """What a committed batch changed: the changelog offset after it, and the report."""

    changelog_offset: int
    report: BatchReport


def publish_batch(
    batch: SignedRecords,
    detector: DuplicateDetector,
    producer: KafkaProducer,
    consumer_group: Any,
    positions: dict[int, int],
    destinations: Destinations,
    digest: str,
    started: float,
    texts: RecordTexts | None = None,
) -> CommittedBatch:
    """Judge the documents of ``batch`` and commit everything its records produce in one transaction.

    ``positions`` (input partition -> next offset) is updated in place only
    once the commit succeeded. Raises whatever the client raises; the caller
    must then treat the detector as dirty (it already indexed the batch).
    ``texts`` reads input records again for the pairs the sketch cannot judge.
    """
    records = batch.records
    documents, indexed, letters = batch.split()
    input_topic = records[0].topic
    after = dict(positions)
    for record in records:
        after[record.partition] = max(after.get(record.partition, 0), record.offset + 1)

    stats = detector.stats
    before = (stats.candidates, stats.verified, stats.settled_by_text, stats.unsettled)
    producer.begin_transaction()
    send = _Sender(producer, destinations)
    verdict_counts: Counter[str] = Counter()
    duplicates: list[PublishedDuplicate] = []
    if documents:
        if texts is not None:
            texts.keep(records)
        verdicts = detector.process_signed(indexed, texts)
        fingerprint = detector.config.fingerprint()
        for verdict, document in zip(verdicts, documents, strict=True):
            value = OutgoingRecord(verdict.id.encode("utf-8"), verdict_value(verdict, document.source, fingerprint), [])
            if not send.verdict(value):
                letters.append(
                    DeadLetter(
                        VERDICT_TOO_LARGE,
                        _too_large("verdict", destinations.output_topic),
                        document.source,
                        document.record,
                    )
                )
                continue
            verdict_counts[verdict.verdict] += 1
            if verdict.verdict == "duplicate":
                duplicates.append(PublishedDuplicate(verdict, document.source))
            # A forward is never cut (readers of the unique topic would get a
            # broken document): one that does not fit goes to the dead letters.
            unique = destinations.unique_topic is not None and verdict.verdict == "unique"
            if unique and not send.forward(document.record):
                letters.append(
                    DeadLetter(
                        UNIQUE_TOO_LARGE,
                        _too_large("forward", destinations.unique_topic or ""),
                        document.source,
                        document.record,
                    )
                )
    truncated = [send.dead_letter(letter) for letter in letters]
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
    for letter, cut in zip(letters, truncated, strict=True):
        topic, partition, offset, _ = letter.source
        log.warning(
            "dead letter (%s)%s: %s",
            letter.reason,
            f", truncated ({cut}) to fit {destinations.dead_letter_topic}" if cut else "",
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
            candidate_pairs=stats.candidates - before[0],
            verified_pairs=stats.verified - before[1],
            indexed_documents=len(detector),
            index_bytes=detector.memory_bytes(),
            evicted_documents=detector.evicted_documents,
            hot_bucket_skips=detector.hot_bucket_skips,
            duplicates=duplicates,
            settled_by_text=stats.settled_by_text - before[2],
            unsettled=stats.unsettled - before[3],
        ),
    )


class _Sender:
    """Sends a batch's records, each made to fit its topic first.

    To a *narrow* topic (``max.message.bytes`` below the producer's batch size)
    every record is flushed on its own: kafka-python fills a batch up to
    ``batch_size`` whatever the topic accepts, and the broker refuses a batch
    over the limit, which would fail the transaction at every retry.
    """

    def __init__(self, producer: KafkaProducer, destinations: Destinations) -> None:
        self.producer = producer
        self.destinations = destinations

    def verdict(self, record: OutgoingRecord) -> bool:
        """Send a verdict; False (nothing sent) if it does not fit (ids near ``max_id_bytes``, a tiny topic)."""
        return self._send_if_fits(self.destinations.output_topic, record)

    def forward(self, record: Any) -> bool:
        """Forward a unique document unchanged; False (nothing sent) if it does not fit."""
        original = OutgoingRecord(record.key, record.value, list(record.headers or []))
        return self._send_if_fits(self.destinations.unique_topic or "", original)

    def dead_letter(self, letter: DeadLetter) -> str:
        """Send a dead letter, truncated if it must be; returns what was cut (empty if nothing)."""
        topic = self.destinations.dead_letter_topic
        record = letter.record
        original = list(record.headers or [])
        outgoing = fitted(record.key, record.value, original, added_headers(letter), self.destinations.limit(topic))
        self._send(topic, outgoing)
        return dict(outgoing.headers[len(original) :]).get(TRUNCATED_HEADER, b"").decode()

    def _send_if_fits(self, topic: str, record: OutgoingRecord) -> bool:
        if not fits(record, self.destinations.limit(topic)):
            return False
        self._send(topic, record)
        return True

    def _send(self, topic: str, record: OutgoingRecord) -> None:
        self.producer.send(topic, key=record.key, value=record.value, headers=record.headers)
        if self.destinations.limit(topic).is_narrow(PRODUCER_TUNING["batch_size"]):
            self.producer.flush()


def _too_large(what: str, topic: str) -> str:
    return f"the {what} does not fit topic {topic!r} (its max.message.bytes or the producer's max_request_size)"
