"""Reading and signing a batch's records: all the work before the index, a pure function of the records.

What a record becomes (a document id and its signature, or the reason it is
a dead letter) depends only on its key, value and coordinates, the input
settings and the signature settings, never on the index. So it can run ahead
of detection, in the worker's process or in signer processes
(:mod:`stream_dedup.worker.signer_pool`), and gives the same result wherever
it runs: the verdicts do not depend on where a batch was signed.

Nothing one record holds may fail the batch (the batch would fail again after
every restart and the stage would stall): reading never raises (see
:func:`~stream_dedup.kafka.messages.read_record`), and a document that cannot
be signed becomes a dead letter.
"""

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.engine.documents import Refusal, internal_error
from stream_dedup.kafka.changelog import MAX_SHINGLE_SET_BYTES, SHINGLE_BYTES
from stream_dedup.kafka.messages import (
    DeadLetter,
    InputDocument,
    InputReading,
    Source,
    read_record,
    source_of,
    source_pointer,
)
from stream_dedup.kafka.record_texts import text_blocks
from stream_dedup.kafka.value_blocks import ValueBlock, block_compressor
from stream_dedup.lsh.generation import IndexedBatch, SignedBatch
from stream_dedup.lsh.retention import Retention

log = logging.getLogger(__name__)

#: Per record: its document id, or why it cannot be processed.
Outcome = str | Refusal

#: The furthest ahead of this machine's clock a record's timestamp counts as its event time
#: (Kafka 4's own default bound, ``log.message.timestamp.after.max.ms``): a producer's clock an
#: hour fast is wrong, and retention must not take its word (see :meth:`SignedRecords.split`).
#: Under a ``max_age_seconds`` of less than four hours, a quarter of it (:func:`future_allowance`).
FUTURE_ALLOWANCE_SECONDS = 3600.0


def future_allowance(retention: Retention) -> float:
    """How far past this machine's clock a record's time may count: :data:`FUTURE_ALLOWANCE_SECONDS`, or one
    generation's span (a quarter of ``max_age_seconds``) if that is less.

    Retention bounds a batch's times by its median, and a record alone in
    its batch (a quiet live stream) is its own median: stamped an hour
    ahead under ``max_age_seconds = 60``, it evicted the whole index at
    once, and for that hour copies of any age were matched. Bounded by a
    generation's span, it ages the index by a quarter of ``max_age_seconds``
    at most, as a record stamped ahead of its batch does.
    """
    span = retention.generation_seconds
    return FUTURE_ALLOWANCE_SECONDS if span is None else min(FUTURE_ALLOWANCE_SECONDS, span)


@dataclass(frozen=True)
class SignedRecords:
    """A batch's records, read and signed, ready for detection.

    Attributes:
        records: the records, in the batch's order.
        outcomes: per record, its document id or its refusal (a dead letter).
        signed: the signatures of the records whose outcome is an id, in order.
        texts: the normalised texts (UTF-8) of those documents, in the same order, if asked for
            (``texts_kept``; else empty): the worker keeps them for pairs settled by their texts
            (:class:`~stream_dedup.kafka.record_texts.RecordTexts`), without reading the records again.
        blocks: the same texts compressed in blocks, as the worker's memory keeps them
            (:func:`~stream_dedup.kafka.record_texts.text_blocks`; empty unless ``texts_kept``).
    """

    records: list[Any]
    outcomes: list[Outcome]
    signed: SignedBatch
    texts: list[bytes]
    blocks: list[ValueBlock]

    def split(
        self, retention: Retention, now: float | None = None
    ) -> tuple[list["ReadDocument"], IndexedBatch, list[DeadLetter]]:
        """The records that hold a document, those documents as the index takes them, and the dead letters.

        A document's event time is its record's timestamp, but never later
        than :func:`future_allowance` (of the index's ``retention``) past
        ``now`` (this machine's clock): one record stamped a year ahead,
        alone in a quiet stream's batch, would move retention's clock a year
        and evict every document before it. The time is bounded here, where
        it enters the changelog (or the sequenced topic), so that every
        replay of it indexes the same times whatever its own clock says.
        """
        documents: list[ReadDocument] = []
        letters: list[DeadLetter] = []
        for record, outcome in zip(self.records, self.outcomes, strict=True):
            if isinstance(outcome, Refusal):
                letters.append(DeadLetter(outcome.reason, outcome.detail, source_of(record), record))
            else:
                documents.append(ReadDocument(outcome, source_of(record), record))
        indexed = IndexedBatch(
            [d.id for d in documents],
            self.signed,
            _event_times(documents, time.time() if now is None else now, future_allowance(retention)),
            np.array([source_pointer(d.source) for d in documents], dtype=np.uint64),
        )
        return documents, indexed, letters


def _event_times(documents: Sequence["ReadDocument"], now: float, allowance: float) -> npt.NDArray[np.float64]:
    """The documents' record timestamps in seconds, none past ``now`` + ``allowance``."""
    times = np.array([d.source.timestamp / 1000.0 for d in documents], dtype=np.float64)
    latest = now + allowance
    ahead = np.flatnonzero(times > latest)
    if ahead.size:
        first = documents[int(ahead[0])].source
        log.warning(
            "%d record(s) stamped more than %.0f s ahead of this machine's clock (partition %d offset %d by %.0f s): "
            "retention counts them as stamped %.0f s ahead; check the producers' clocks",
            ahead.size,
            allowance,
            first.partition,
            first.offset,
            times[ahead[0]] - now,
            allowance,
        )
        times[ahead] = latest
    return times


class ReadDocument(NamedTuple):
    """A record that holds a document: its id, where it came from, the record itself (forwarded if unique)."""

    id: str
    source: Source
    record: Any


def read_and_sign(
    records: Sequence[Any], reading: InputReading, signer: DuplicateDetector, texts_kept: bool = False
) -> SignedRecords:
    """Read every record (JSON, id, normalisation) and sign the documents among them, in one call if possible.

    ``signer`` is used for :meth:`~DuplicateDetector.sign` only, which never
    touches its index. ``texts_kept``: also return the documents' texts, as
    they are and compressed (for a worker that settles pairs by text).
    """
    outcomes: list[Outcome] = []
    documents: list[InputDocument] = []
    for record in records:
        item = read_record(record, reading)  # never raises: a record it cannot read is a dead letter
        if isinstance(item, InputDocument):
            outcomes.append(item.id)
            documents.append(item)
        else:
            outcomes.append(Refusal(item.reason, item.detail))
    try:
        signed = signer.sign([d.text for d in documents], normalized=True)
    except Exception as error:
        log.error("signing a batch failed (%r); signing its documents one by one", error)
        documents = _signable(documents, outcomes, signer)
        signed = signer.sign([d.text for d in documents], normalized=True)
    documents, signed = _recordable(documents, outcomes, signed)
    if not texts_kept:
        return SignedRecords(list(records), outcomes, signed, [], [])
    # Reading refuses a text with lone surrogates, so every text read encodes.
    texts = [d.text.encode("utf-8") for d in documents]
    sources = np.array([source_pointer(d.source) for d in documents], dtype=np.uint64)
    return SignedRecords(list(records), outcomes, signed, texts, text_blocks(sources, texts, block_compressor()))


def _recordable(
    documents: list[InputDocument], outcomes: list[Outcome], signed: SignedBatch
) -> tuple[list[InputDocument], SignedBatch]:
    """The documents whose shingle set (exact verification) fits a changelog record; each other one is refused.

    The broker refuses a larger record, and the batch holding it failed after
    every restart: the stage stalled on it for ever (``max_document_bytes``
    allows 100 MiB, a shingle set takes up to 4 bytes a byte of text).
    """
    if signed.shingles is None:
        return documents, signed
    sizes = signed.shingles.lengths * SHINGLE_BYTES
    fits = sizes <= MAX_SHINGLE_SET_BYTES
    if fits.all():
        return documents, signed
    rows = iter(range(len(documents)))
    for i, outcome in enumerate(outcomes):
        if isinstance(outcome, Refusal):
            continue
        row = next(rows)
        if not fits[row]:
            outcomes[i] = Refusal(
                "too_large",
                f"its shingle set takes {int(sizes[row])} bytes, more than the {MAX_SHINGLE_SET_BYTES} a changelog "
                'record holds with verification = "exact": lower max_document_bytes to what your documents need',
            )
    kept = np.flatnonzero(fits)
    return [documents[row] for row in kept.tolist()], signed.take(kept)


def _signable(
    documents: list[InputDocument], outcomes: list[Outcome], signer: DuplicateDetector
) -> list[InputDocument]:
    """The documents that sign alone; the outcome of each other one becomes its error.

    Signing is pure (the index is untouched), so trying again is safe; the
    batch is signed whole first because one call per document is much slower.
    """
    kept: list[InputDocument] = []
    row = 0
    for i, outcome in enumerate(outcomes):
        if isinstance(outcome, Refusal):
            continue
        try:
            signer.sign([documents[row].text], normalized=True)
        except Exception as error:
            outcomes[i] = internal_error(error)
        else:
            kept.append(documents[row])
        row += 1
    return kept
