"""The judge's forwards: the original record of every unique document, read again from the input topic.

In one process the stage forwards a unique document's record from memory
(``worker.batch``). The judge has only the sequenced record: ids, signatures
and where each document was read. So it reads the unique documents' records
again, one span per input partition per step (a step's documents are
consecutive reads of each partition, so a span holds little else), and sends
them in the step's transaction, beside the verdicts: exactly once, like them.

- A forward is never cut: one that does not fit ``unique_topic`` is
  dead-lettered (``unique_too_large``), as in one process.
- A record the input no longer holds (its retention deleted it while the
  judge lagged) is dead-lettered as ``unique_record_gone``: the dead letter
  has the document's id as key, no value, and says where it was read and why
  it could not be read again. The verdict stands.
- A read that failed (a Kafka error, a timeout) raises :class:`KafkaError`:
  the step is not committed without its forwards, and the session starts again.
- Input batches are decompressed as far as the signers decompressed them
  (``input_bound``), not as far as the stage's own topics are: a document
  of a batch a signer read is read again, whatever ``max_document_bytes``.
"""

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kafka.errors import KafkaError

from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.messages import DeadLetter, Source, dead_letter_record
from stream_dedup.kafka.oversized_batches import BatchBound
from stream_dedup.kafka.record_fit import OutgoingRecord, SizeLimit, fits
from stream_dedup.kafka.record_lookup import RecordGone, RecordLookup
from stream_dedup.kafka.sending import Send
from stream_dedup.worker.batch import UNIQUE_TOO_LARGE, too_large_detail
from stream_dedup.worker.settings import WorkerSettings

log = logging.getLogger(__name__)

#: Dead-letter reason of a unique document whose record the input no longer holds.
UNIQUE_RECORD_GONE = "unique_record_gone"
#: Bytes one fetch asks of a partition while reading a span of it.
_SPAN_FETCH_BYTES = 4 << 20


class UniqueForwards:
    """Reads unique documents' records again and makes their forwards; outlives the judge's sessions.

    Its consumer is opened at the first forward and closed by :meth:`close`
    (the judge's clean stop); a session that fails leaves it open for the next.
    """

    def __init__(
        self, connection: KafkaConnection, unique_topic: str, dead_letter_topic: str, input_bound: BatchBound
    ) -> None:
        self.connection = connection
        self.unique_topic = unique_topic
        self.dead_letter_topic = dead_letter_topic
        self.input_bound = input_bound
        self._lookup: RecordLookup | None = None

    @classmethod
    def of(cls, settings: WorkerSettings) -> "UniqueForwards | None":
        """The judge's forwards under ``settings``; ``None`` without ``unique_topic``."""
        s = settings
        if s.unique_topic is None:
            return None
        return cls(s.connection(), s.unique_topic, s.dead_letter_topic, s.input_bound())

    def close(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None

    def sends(
        self, uniques: Sequence[tuple[str, Source]], limits: Mapping[str, SizeLimit]
    ) -> tuple[list[Send], list[str]]:
        """The forward (or dead letter) of each unique document ``(id, where it was read)``, in order, and the
        dead letters' reasons.

        Raises :class:`KafkaError` if a record could not be read now.
        """
        records = self._read(uniques)
        sends: list[Send] = []
        reasons: list[str] = []
        for doc_id, source in uniques:
            record = records.get((source.topic, source.partition, source.offset))
            if record is None:
                record = self._lookup_of().fetch(source.topic, source.partition, source.offset)
            if isinstance(record, RecordGone):
                if not record.lasting:
                    raise KafkaError(f"unique document {doc_id!r} not read again to forward: {record.why}")
                detail = f"is unique, but its record could not be read again to forward: {record.why}"
                letter = DeadLetter(UNIQUE_RECORD_GONE, detail, source, OutgoingRecord(doc_id.encode(), None, []))
            else:
                forward = OutgoingRecord(record.key, record.value, list(record.headers or []))
                if fits(forward, limits.get(self.unique_topic) or SizeLimit()):
                    sends.append(Send(self.unique_topic, forward))
                    continue
                detail = too_large_detail("forward", self.unique_topic)
                letter = DeadLetter(UNIQUE_TOO_LARGE, detail, source, record)
            limit = limits.get(self.dead_letter_topic) or SizeLimit()
            sends.append(Send(self.dead_letter_topic, dead_letter_record(letter, limit)))
            reasons.append(letter.reason)
            log.warning("dead letter (%s): %s", letter.reason, detail)
        return sends, reasons

    def _read(self, uniques: Sequence[tuple[str, Source]]) -> dict[tuple[str, int, int], Any]:
        """The records at the sources, read by one span per partition (those a span misses are left out)."""
        wanted: dict[tuple[str, int], list[int]] = {}
        for _, source in uniques:
            wanted.setdefault((source.topic, source.partition), []).append(source.offset)
        records: dict[tuple[str, int, int], Any] = {}
        for (topic, partition), offsets in wanted.items():
            for record in self._lookup_of().records_between(topic, partition, min(offsets), max(offsets) + 1):
                records[(topic, partition, record.offset)] = record
        return records

    def _lookup_of(self) -> RecordLookup:
        if self._lookup is None:
            self._lookup = RecordLookup(
                self.connection, cache_bytes=0, fetch_bytes=_SPAN_FETCH_BYTES, bound=self.input_bound
            )
        return self._lookup
