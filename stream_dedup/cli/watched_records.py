"""What ``watch`` reads, told apart: verdicts, dead letters, and any other record (shown raw).

``watch`` may be pointed at any topic, so nothing here trusts a record: a
value that is not a verdict of the format in docs/verdicts.md (not UTF-8,
not JSON, nested too deep, a field of the wrong type) is an
:class:`OtherRecord`, never an exception. A dead letter is recognised by the
reason header the stage adds to every one.
"""

import json
import math
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeGuard, get_args

from stream_dedup.engine.verdict import VerdictKind
from stream_dedup.kafka.messages import ERROR_HEADER, REASON_HEADER, SOURCE_HEADERS


class Coordinates(NamedTuple):
    """Where a record is: enough to fetch it again."""

    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class VerdictRecord:
    """A verdict (docs/verdicts.md), with its record's Kafka timestamp (``timestamp``, ms)."""

    id: str
    verdict: VerdictKind
    duplicate_of: str | None
    similarity: float | None
    source: Coordinates | None
    #: The document's Kafka timestamp (ms); None when the record had none.
    source_timestamp: int | None
    match_source: Coordinates | None
    timestamp: int
    #: For ``contained`` and ``contains`` (format 3): the containment; else None.
    containment: float | None = None


@dataclass(frozen=True)
class DeadLetterRecord:
    """A record the stage could not process, with the reason and error its headers give."""

    reason: str
    error: str
    source: Coordinates | None


@dataclass(frozen=True)
class OtherRecord:
    """Anything else; ``value`` is None for a tombstone."""

    value: bytes | None
    where: Coordinates


WatchedRecord = VerdictRecord | DeadLetterRecord | OtherRecord


def watched_record(record: Any) -> WatchedRecord:
    """Tell one consumed record (kafka-python's ``ConsumerRecord``) apart; never raises."""
    headers = {key: value for key, value in record.headers or [] if isinstance(value, bytes)}
    if REASON_HEADER in headers:
        return DeadLetterRecord(
            reason=_header_text(headers[REASON_HEADER]),
            error=_header_text(headers.get(ERROR_HEADER, b"")),
            source=_header_coordinates(headers),
        )
    where = Coordinates(record.topic, record.partition, record.offset)
    verdict = _verdict(record.value, record.timestamp)
    return verdict if verdict is not None else OtherRecord(record.value, where)


def _verdict(value: bytes | None, timestamp: int) -> VerdictRecord | None:
    if value is None:
        return None
    try:
        fields = json.loads(value.decode("utf-8"))
    except (ValueError, RecursionError):  # not UTF-8, not JSON, or nested past the parser's depth
        return None
    if not isinstance(fields, dict) or fields.get("verdict") not in get_args(VerdictKind):
        return None
    doc_id, match, similarity = fields.get("id"), fields.get("duplicate_of"), fields.get("similarity")
    containment = fields.get("containment")
    if not _is_id(doc_id) or not (match is None or _is_id(match)):
        return None
    if not (_is_number_or_none(similarity) and _is_number_or_none(containment)):
        return None
    source = fields.get("source")
    source_timestamp = source.get("timestamp") if isinstance(source, dict) else None
    return VerdictRecord(
        id=str(doc_id),
        verdict=fields["verdict"],
        duplicate_of=None if match is None else str(match),
        similarity=None if similarity is None else float(similarity),
        source=_coordinates(source),
        source_timestamp=source_timestamp if _is_count(source_timestamp) else None,
        match_source=_coordinates(fields.get("match_source")),
        timestamp=timestamp,
        containment=None if containment is None else float(containment),
    )


def _is_number_or_none(value: object) -> bool:
    """None, or a finite number: the stage writes no other similarity or containment.

    Python's JSON reads ``NaN``, ``Infinity`` and ``1e999`` as floats; a record
    holding one is no verdict of the stage's (printed as it is, as other
    records are), and taken as one it ended ``--summary`` in a traceback
    (its similarity bins are integers).
    """
    if value is None:
        return True
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


def _is_id(value: object) -> bool:
    return isinstance(value, str | int) and not isinstance(value, bool)


def _is_count(value: object) -> TypeGuard[int]:
    """A non-negative integer (an offset, a partition, a timestamp; -1 means none)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _coordinates(value: object) -> Coordinates | None:
    if not isinstance(value, dict):
        return None
    topic, partition, offset = value.get("topic"), value.get("partition"), value.get("offset")
    if not isinstance(topic, str) or not _is_count(partition) or not _is_count(offset):
        return None
    return Coordinates(topic, partition, offset)


def _header_text(value: bytes) -> str:
    return value.decode("utf-8", "replace")


def _header_coordinates(headers: dict[str, bytes]) -> Coordinates | None:
    topic, partition, offset = (_header_text(headers.get(name, b"")) for name in SOURCE_HEADERS)
    if not topic or not partition.isdecimal() or not offset.isdecimal():
        return None
    return Coordinates(topic, int(partition), int(offset))
