"""One batch, one transaction: verdicts, dead letters, unique forwards, changelog and offsets.

Order inside the transaction does not matter to readers (they see all of it
or none of it), but it matters to us: the detector must have processed the
batch before the changelog record is written, and the offsets sent last, so
that a failure anywhere leaves an open transaction that is aborted, never a
half-committed batch.

Two steps: :func:`judge_batch` runs the detector and builds every record the
transaction will hold, with no producer at hand; :func:`commit_batch` sends
them and commits. The worker commits one batch in the background while it
judges the next (:mod:`stream_dedup.worker.committer`).

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
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from kafka import KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.kafka.bounded_commit import WrittenTopics, commit_transaction, send_offsets
from stream_dedup.kafka.changelog import ChangelogEntry, encode_entry
from stream_dedup.kafka.messages import DeadLetter, dead_letter_record, verdict_value
from stream_dedup.kafka.record_fit import TRUNCATED_HEADER, OutgoingRecord, SizeLimit, fits
from stream_dedup.kafka.record_texts import RecordTexts
from stream_dedup.kafka.sending import Send, send_all
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
    #: The written topics a commit looks for when it does not return (None: the producer's own commit).
    written: WrittenTopics | None = None

    def limit(self, topic: str) -> SizeLimit:
        return self.limits.get(topic) or SizeLimit()


@dataclass(frozen=True)
class CommittedBatch:
    """What a committed batch changed: the changelog offset after it, and the report."""

    changelog_offset: int
    report: BatchReport


@dataclass(frozen=True)
class JudgedBatch:
    """A batch judged (the detector holds it) and everything its transaction will hold, not yet sent.

    Built with no producer at hand, so that the next batch can be judged while
    this one's transaction is committed (:mod:`stream_dedup.worker.committer`).
    """

    records: list[Any]
    #: Each record already made to fit its topic, in sending order.
    outgoing: list[Send]
    letters: list[DeadLetter]
    #: What was cut from each dead letter to fit (empty if nothing), in the order of ``letters``.
    truncated: list[str]
    changelog_values: list[bytes]
    #: Input partition -> next offset once this batch is committed.
    after: dict[int, int]
    #: The offsets this batch's transaction commits for the group: those of the partitions it moved.
    offsets: dict[int, int]
    input_topic: str
    #: The report, but for ``seconds`` and ``committed_at`` (known at the commit).
    report: BatchReport
    started: float


def judge_batch(
    batch: SignedRecords,
    detector: DuplicateDetector,
    positions: Mapping[int, int],
    destinations: Destinations,
    digest: str,
    started: float,
    texts: RecordTexts | None = None,
    input_topic_id: str | None = None,
    passed: Mapping[TopicPartition, int] | None = None,
) -> JudgedBatch:
    """Judge the documents of ``batch`` (the detector indexes them) and build every record its transaction holds.

    ``positions`` are the input positions before this batch: those of the
    batches judged before it, committed or not. ``input_topic_id``: Kafka's
    id of the topic they are offsets of, noted in the changelog record.
    ``passed``: positions past transaction markers with nothing before them
    left to judge (:meth:`~stream_dedup.kafka.processed_lag.ProcessedLag.passed_markers`),
    committed with the batch, which then may hold no record at all.
    """
    records = batch.records
    documents, indexed, letters = batch.split(detector.config.retention())
    passed = passed or {}
    input_topic = records[0].topic if records else next(iter(passed)).topic
    after = dict(positions)
    for record in records:
        after[record.partition] = max(after.get(record.partition, 0), record.offset + 1)
    for partition, offset in passed.items():
        after[partition.partition] = max(after.get(partition.partition, 0), offset)
    moved = {record.partition for record in records} | {partition.partition for partition in passed}

    stats = detector.stats
    before = stats.pair_counts()
    outgoing: list[Send] = []
    verdict_counts: Counter[str] = Counter()
    duplicates: list[PublishedDuplicate] = []
    if documents:
        if texts is not None:
            texts.keep_texts(indexed.sources, batch.texts, batch.blocks)
        verdicts = detector.process_signed(indexed, texts)
        fingerprint = detector.config.fingerprint()
        output, unique_topic = destinations.output_topic, destinations.unique_topic
        output_limit = destinations.limit(output)
        unique_limit = destinations.limit(unique_topic) if unique_topic is not None else output_limit
        for verdict, document in zip(verdicts, documents, strict=True):
            value = OutgoingRecord(verdict.id.encode("utf-8"), verdict_value(verdict, document.source, fingerprint), [])
            if not fits(value, output_limit):
                letters.append(
                    DeadLetter(VERDICT_TOO_LARGE, too_large_detail("verdict", output), document.source, document.record)
                )
                continue
            outgoing.append(Send(output, value))
            verdict_counts[verdict.verdict] += 1
            if verdict.verdict == "duplicate":
                duplicates.append(PublishedDuplicate(verdict, document.source))
            if unique_topic is None or verdict.verdict != "unique":
                continue
            # A forward is never cut (readers of the unique topic would get a
            # broken document): one that does not fit goes to the dead letters.
            record = document.record
            forward = OutgoingRecord(record.key, record.value, list(record.headers or []))
            if fits(forward, unique_limit):
                outgoing.append(Send(unique_topic, forward))
            else:
                letters.append(
                    DeadLetter(UNIQUE_TOO_LARGE, too_large_detail("forward", unique_topic), document.source, record)
                )
    truncated = []
    for letter in letters:
        dead_letter, cut = _fitted_dead_letter(letter, destinations)
        outgoing.append(Send(destinations.dead_letter_topic, dead_letter))
        truncated.append(cut)
    return JudgedBatch(
        records=records,
        outgoing=outgoing,
        letters=letters,
        truncated=truncated,
        # Every batch writes a changelog record, even one of only dead letters:
        # it carries the input positions a restore resumes from.
        changelog_values=encode_entry(
            ChangelogEntry(indexed, input_topic, after, True, detector.config.verdict_settings(), input_topic_id),
            digest,
        ),
        after=after,
        offsets={partition: after[partition] for partition in moved},
        input_topic=input_topic,
        report=BatchReport(
            verdicts=verdict_counts,
            dead_letters=Counter(letter.reason for letter in letters),
            seconds=0.0,
            committed_at=0.0,
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
            text_reads=texts.take_reads() if texts is not None else Counter(),
            text_kept_bytes=texts.kept_bytes() if texts is not None else {},
        ),
        started=started,
    )


def commit_batch(
    judged: JudgedBatch, producer: KafkaProducer, consumer_group: Any, destinations: Destinations
) -> CommittedBatch:
    """Send what ``judged`` holds in one transaction and commit it, the input offsets last.

    Raises whatever the client raises, leaving the transaction open (the next
    session's ``init_transactions()`` aborts it).
    """
    producer.begin_transaction()
    send_all(producer, judged.outgoing, destinations.limits)
    changelog_sends = [
        producer.send(destinations.changelog_topic, value=value, partition=0) for value in judged.changelog_values
    ]
    send_offsets(
        producer,
        {TopicPartition(judged.input_topic, p): OffsetAndMetadata(o, "", -1) for p, o in judged.offsets.items()},
        consumer_group,
        destinations.written,
    )
    commit_transaction(producer, destinations.written)
    committed_at = time.time()
    for letter, cut in zip(judged.letters, judged.truncated, strict=True):
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
        report=replace(judged.report, seconds=time.perf_counter() - judged.started, committed_at=committed_at),
    )


def _fitted_dead_letter(letter: DeadLetter, destinations: Destinations) -> tuple[OutgoingRecord, str]:
    """A dead letter as sent (the record, headers saying why, truncated if it must be), and what was cut."""
    outgoing = dead_letter_record(letter, destinations.limit(destinations.dead_letter_topic))
    added = outgoing.headers[len(letter.record.headers or []) :]
    return outgoing, dict(added).get(TRUNCATED_HEADER, b"").decode()


def too_large_detail(what: str, topic: str) -> str:
    """Why a ``what`` (verdict, forward) was dead-lettered for its size: one wording, the worker's and the judge's."""
    return f"the {what} does not fit topic {topic!r} (its max.message.bytes or the producer's max_request_size)"
