"""Kafka records in, verdict and dead-letter records out.

An input record becomes either an :class:`InputDocument` or a
:class:`DeadLetter`; nothing is dropped. The verdict published for a document
carries where it came from (``source``), where its match came from
(``match_source``, so a match is unambiguous when ids repeat and can be
fetched) and the fingerprint of the detection parameters, so a reader can
tell verdicts made under different settings apart.
"""

import json
import math
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from stream_dedup.engine.documents import (
    DEFAULT_MAX_ID_BYTES,
    DocumentFields,
    Refusal,
    decode_utf8,
    internal_error,
    read_json_document,
    read_text_document,
)
from stream_dedup.engine.verdict import Verdict
from stream_dedup.kafka.oversized_batches import UnreadRecord
from stream_dedup.kafka.record_fit import OutgoingRecord, SizeLimit, fitted
from stream_dedup.lsh.generation import NO_SOURCE
from stream_dedup.text.normalize import Folding

InputFormat = Literal["json", "text"]

#: Header names set on every dead letter (the original headers are kept too).
REASON_HEADER = "stream-dedup-reason"
ERROR_HEADER = "stream-dedup-error"
SOURCE_HEADERS = ("stream-dedup-source-topic", "stream-dedup-source-partition", "stream-dedup-source-offset")
TIMESTAMP_HEADER = "stream-dedup-source-timestamp"
#: What writes a verdict's odd values (see verdict_value): ``json.dumps`` with options builds one per call.
_VERDICT_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
#: A string as that encoder writes it (quoted and escaped, non-ASCII kept).
_encode_string = json.encoder.encode_basestring
#: A record's source as the index keeps it: partition in the high bits, offset in the low ones.
_OFFSET_BITS = 48
_PARTITION_LIMIT = 1 << (64 - _OFFSET_BITS)


class Source(NamedTuple):
    """Where a record came from; ``timestamp`` is the record's, in milliseconds."""

    topic: str
    partition: int
    offset: int
    timestamp: int


@dataclass(frozen=True)
class InputReading:
    """How input records are read (settings of the same names)."""

    input_format: InputFormat = "json"
    id_field: str = "id"
    text_field: str = "text"
    max_document_bytes: int = 1 << 20
    strip_punctuation: bool = False
    ignore_invisible: bool = True
    fold_lookalikes: bool = False
    max_id_bytes: int = DEFAULT_MAX_ID_BYTES

    @property
    def folding(self) -> Folding:
        return Folding(self.strip_punctuation, self.ignore_invisible, self.fold_lookalikes)


class InputDocument(NamedTuple):
    """A usable document: id, normalised text, and the record it came in (forwarded as is)."""

    id: str
    text: str
    source: Source
    record: Any


class DeadLetter(NamedTuple):
    """A record that cannot be processed, with the reason (see ``ops.metrics.DEAD_LETTER_REASONS``)."""

    reason: str
    detail: str
    source: Source
    record: Any


def source_of(record: Any) -> Source:
    return Source(record.topic, record.partition, record.offset, record.timestamp)


def read_record(record: Any, reading: InputReading) -> InputDocument | DeadLetter:
    """Turn one consumed record into a document or a dead letter.

    The id is, in order: the id field of a JSON value, the record key, or the
    record's coordinates ``topic:partition:offset``. Never raises: any
    exception while reading one record makes that record a dead letter
    (``internal_error``, the exception named in its detail), since raising
    would fail the batch, and the batch would fail again after every restart.
    A record of a batch too large to read (:mod:`stream_dedup.kafka.oversized_batches`)
    is a dead letter too.
    """
    source = source_of(record)
    if isinstance(record, UnreadRecord):
        return DeadLetter(record.refusal.reason, record.refusal.detail, source, record)
    try:
        return _read(record, source, reading)
    except Exception as error:
        refusal = internal_error(error)
        return DeadLetter(refusal.reason, refusal.detail, source, record)


def _read(record: Any, source: Source, reading: InputReading) -> InputDocument | DeadLetter:
    value: bytes | None = record.value
    if value is None:
        return DeadLetter("missing_text", "the record has no value (a tombstone)", source, record)
    if len(value) > reading.max_document_bytes:
        return DeadLetter(
            "too_large",
            f"value of {len(value)} bytes exceeds max_document_bytes={reading.max_document_bytes}",
            source,
            record,
        )
    fields = _fields(value, reading)
    if isinstance(fields, Refusal):
        return DeadLetter(fields.reason, fields.detail, source, record)
    if fields.id is not None:
        return InputDocument(fields.id, fields.text, source, record)
    key_id = _key_id(record.key, reading.max_id_bytes)
    if isinstance(key_id, Refusal):
        return DeadLetter(key_id.reason, key_id.detail, source, record)
    return InputDocument(key_id or f"{source.topic}:{source.partition}:{source.offset}", fields.text, source, record)


def document_text(value: bytes | None, reading: InputReading) -> str | None:
    """The normalised text :func:`read_record` finds in a record with this value; ``None`` if it finds none.

    For a document's text read again: the record's key and coordinates never
    change its text, so its value alone is kept for it. Never raises.
    """
    if value is None or len(value) > reading.max_document_bytes:
        return None
    try:
        fields = _fields(value, reading)
    except Exception:  # read_record makes this record a dead letter (internal_error): it holds no text either
        return None
    return None if isinstance(fields, Refusal) else fields.text


def _fields(value: bytes, reading: InputReading) -> DocumentFields | Refusal:
    text = decode_utf8(value)
    if isinstance(text, Refusal):
        return text
    if reading.input_format == "text":
        return read_text_document(text, reading.folding)
    return read_json_document(text, reading.id_field, reading.text_field, reading.folding, reading.max_id_bytes)


def _key_id(key: bytes | None, max_id_bytes: int) -> str | Refusal | None:
    """The record key as an id, ``None`` without a key."""
    if not key:
        return None
    if len(key) > max_id_bytes:
        return Refusal(
            "id_too_long", f"the record key (used as the id) is {len(key)} bytes; max_id_bytes={max_id_bytes}"
        )
    decoded = decode_utf8(key)
    if isinstance(decoded, Refusal):
        return Refusal("invalid_id", "the record key (used as the id) is not valid UTF-8")
    return decoded


def source_pointer(source: Source) -> int:
    """The 64-bit pointer the index keeps for a record (``NO_SOURCE`` past 65,535 partitions or 2**48 offsets)."""
    return pointer_of(source.partition, source.offset)


def pointer_of(partition: int, offset: int) -> int:
    """The pointer of the record at ``offset`` of input ``partition`` (see :func:`source_pointer`)."""
    if not 0 <= partition < _PARTITION_LIMIT or not 0 <= offset < 1 << _OFFSET_BITS:
        return int(NO_SOURCE)
    return (partition << _OFFSET_BITS) | offset


def match_coordinates(pointer: int) -> tuple[int, int]:
    """The input partition and offset of a match, from the pointer the index kept (see :func:`source_pointer`)."""
    return pointer >> _OFFSET_BITS, pointer & ((1 << _OFFSET_BITS) - 1)


def coordinates_of(pointers: npt.NDArray[np.uint64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """:func:`match_coordinates` of many pointers at once: their partitions and offsets."""
    partitions = (pointers >> np.uint64(_OFFSET_BITS)).astype(np.int64)
    return partitions, (pointers & np.uint64((1 << _OFFSET_BITS) - 1)).astype(np.int64)


def verdict_value(verdict: Verdict, source: Source, fingerprint: str) -> bytes:
    """The JSON value of a verdict record (its key is the document id).

    The match was read from the same input topic as the document, so its
    source is that topic with the partition and offset the index kept.

    The JSON is written field by field, exactly as ``json`` would write
    :meth:`Verdict.to_dict` and the sources (a test holds the two equal): one
    is written per document on the worker's thread, and ``json`` takes three
    times as long, building its encoder for every value.
    """
    topic = _json_scalar(source.topic)
    match = "null"
    if verdict.match_source is not None:
        partition, offset = match_coordinates(verdict.match_source)
        match = f'{{"topic":{topic},"partition":{partition},"offset":{offset}}}'
    containment = "" if verdict.containment is None else f',"containment":{_json_scalar(verdict.containment)}'
    return (
        f'{{"format_version":{verdict.format_version},"id":{_json_scalar(verdict.id)},'
        f'"verdict":{_json_scalar(verdict.verdict)},"duplicate_of":{_json_scalar(verdict.duplicate_of)},'
        f'"similarity":{_json_scalar(verdict.similarity)},"hamming_distance":{_json_scalar(verdict.hamming_distance)}'
        f'{containment},"match_source":{match},'
        f'"source":{{"topic":{topic},"partition":{_json_scalar(source.partition)},'
        f'"offset":{_json_scalar(source.offset)},"timestamp":{_json_scalar(source.timestamp)}}},'
        f'"params_fingerprint":{_json_scalar(fingerprint)}}}'
    ).encode()


def _json_scalar(value: object) -> str:
    """A number, string or ``None`` as ``json`` writes it; the common cases without building an encoder."""
    if value is None:
        return "null"
    if type(value) is str:
        return _encode_string(value)
    if type(value) is int:
        return int.__repr__(value)
    if type(value) is float and math.isfinite(value):
        return float.__repr__(value)
    return _VERDICT_ENCODER.encode(value)  # NaN, a subclass: what json makes of it


def dead_letter_headers(letter: DeadLetter) -> list[tuple[str, bytes]]:
    """The original headers plus the reason and the source coordinates."""
    return list(letter.record.headers or []) + added_headers(letter)


def added_headers(letter: DeadLetter) -> list[tuple[str, bytes]]:
    """The headers the stage adds to a dead letter: reason, error and source coordinates."""
    topic, partition, offset, timestamp = letter.source
    return [
        (REASON_HEADER, letter.reason.encode()),
        (ERROR_HEADER, letter.detail.encode("utf-8", "backslashreplace")),
        *zip(
            SOURCE_HEADERS,
            (topic.encode("utf-8", "backslashreplace"), str(partition).encode(), str(offset).encode()),
            strict=True,
        ),
        (TIMESTAMP_HEADER, str(timestamp).encode()),
    ]


def dead_letter_record(letter: DeadLetter, limit: SizeLimit) -> OutgoingRecord:
    """The dead letter as sent: the record with the stage's headers (:func:`added_headers`), cut to fit ``limit``."""
    record = letter.record
    return fitted(record.key, record.value, list(record.headers or []), added_headers(letter), limit)
