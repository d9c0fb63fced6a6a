"""Making an outgoing record fit its destination: as it is, or as a truncated copy that says so.

A record the broker refuses (``MessageSizeTooLargeError``) aborts the batch's
transaction, and the batch would be refused again after every restart: the
stage would stall. So every record is measured before it is sent, against
two limits: the producer's ``max_request_size`` (checked by kafka-python on
the uncompressed record) and the topic's ``max.message.bytes`` (checked by
the broker on the compressed batch). A record that fits neither as it is nor
compressed is cut: the key, the headers the stage adds and as much of the
value as fits are kept, and headers say what was cut, how long the value was
and its xxh3-128 hash, so the original can be found and checked.

Why "compressed" may be trusted: the producer compresses each batch (zstd,
see ``PRODUCER_TUNING``), and a record larger than the producer's
``batch_size`` always travels alone in its batch, so its compressed size is
the size the broker checks. Destinations whose limit is below the batch size
are *narrow*: records to them are flushed one by one (see
:mod:`stream_dedup.worker.batch`), so that they too travel alone.
"""

from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

import xxhash
import zstandard

#: Headers of a truncated copy.
TRUNCATED_HEADER = "stream-dedup-truncated"
ORIGINAL_BYTES_HEADER = "stream-dedup-original-bytes"
ORIGINAL_HASH_HEADER = "stream-dedup-original-xxh3-128"
#: The broker's default ``max.message.bytes`` (1 MiB plus a batch header).
BROKER_DEFAULT_MAX_MESSAGE_BYTES = 1048588
#: Smallest ``max.message.bytes`` a written topic may have: room for the
#: stage's own headers, a verdict of long ids, and some of a cut value.
MIN_MESSAGE_BYTES = 16 * 1024
#: A record batch's header, and the most a record adds to its key, value and headers.
_BATCH_HEADER_BYTES = 61
_RECORD_OVERHEAD_BYTES = 21
#: The most varints add per header (two lengths of up to 5 bytes).
_HEADER_OVERHEAD_BYTES = 10
#: Room kept for what the headers of a truncated copy add.
_TRUNCATION_HEADERS_BYTES = 200

Headers = list[tuple[str, bytes]]


class OutgoingRecord(NamedTuple):
    """A record about to be sent: ``headers`` are all of them (the original ones first)."""

    key: bytes | None
    value: bytes | None
    headers: Headers


@dataclass(frozen=True)
class SizeLimit:
    """What a destination accepts: ``message_bytes`` per compressed batch, ``request_bytes`` per record."""

    message_bytes: int = BROKER_DEFAULT_MAX_MESSAGE_BYTES
    request_bytes: int = 16 << 20
    compressed: bool = True

    @cached_property
    def budget(self) -> int:
        """Bytes a record may take, with room for the compressor's framing of incompressible data.

        Kept once worked out: every record sent is measured against it.
        """
        return min(self.message_bytes - self.message_bytes // 256 - 1024, self.request_bytes - 1024)

    def is_narrow(self, batch_size: int) -> bool:
        """True when a full producer batch may not fit: records must then be sent one at a time."""
        return self.budget < batch_size


def record_bytes(record: OutgoingRecord) -> int:
    """An upper bound of the uncompressed size of ``record`` alone in a batch."""
    key, value, headers = record
    size = _BATCH_HEADER_BYTES + _RECORD_OVERHEAD_BYTES + len(key or b"") + len(value or b"")
    # Most records sent (verdicts) have no headers: no generator is started for them.
    return size + _headers_bytes(headers) if headers else size


def fits(record: OutgoingRecord, limit: SizeLimit) -> bool:
    """Whether the producer and the broker will accept ``record`` as it is.

    Compresses only records too large uncompressed (rare), as the producer does (zstd, level 3).
    """
    size = record_bytes(record)
    if size > limit.request_bytes - 1024:
        return False
    if size <= limit.budget:
        return True
    if not limit.compressed:
        return False
    key, value, headers = record
    raw = b"".join(
        [key or b"", value or b"", *(name.encode("utf-8", "surrogatepass") + (data or b"") for name, data in headers)]
    )
    compressed = zstandard.ZstdCompressor().compress(raw)
    return _BATCH_HEADER_BYTES + _RECORD_OVERHEAD_BYTES + len(compressed) + 32 <= limit.budget


def fitted(
    key: bytes | None, value: bytes | None, original: Headers, added: Headers, limit: SizeLimit
) -> OutgoingRecord:
    """``key``, ``value`` and the ``original`` plus ``added`` headers, truncated if they do not fit ``limit``.

    The ``added`` headers (the stage's: reason, source) are always kept. The
    original headers are dropped if they take more than a quarter of the
    room, the key is cut to a quarter of it, and the value gets the rest.
    A record with neither key nor value (a tombstone without a key, which
    Kafka and other clients write) gets an empty value: kafka-python refuses
    to send one, and its dead letter failed its batch at every retry.
    """
    if key is None and value is None:
        value = b""
    whole = OutgoingRecord(key, value, [*original, *added])
    if fits(whole, limit):
        return whole
    room = max(0, limit.budget - record_bytes(OutgoingRecord(None, None, added)) - _TRUNCATION_HEADERS_BYTES)
    cut: list[str] = []
    if _headers_bytes(original) > room // 4:
        original = []
        cut.append("headers")
    if key is not None and len(key) > room // 4:
        key = key[: room // 4]
        cut.append("key")
    whole_value = value or b""
    value_room = max(0, room - len(key or b"") - _headers_bytes(original))
    if len(whole_value) > value_room:
        value = whole_value[:value_room]
        cut.insert(0, "value")
    truncation = [
        (TRUNCATED_HEADER, ",".join(cut).encode()),
        (ORIGINAL_BYTES_HEADER, str(len(whole_value)).encode()),
        (ORIGINAL_HASH_HEADER, xxhash.xxh3_128_hexdigest(whole_value).encode()),
    ]
    return OutgoingRecord(key, value, [*original, *added, *truncation])


def _headers_bytes(headers: Headers) -> int:
    return sum(
        len(name.encode("utf-8", "surrogatepass")) + len(data or b"") + _HEADER_OVERHEAD_BYTES for name, data in headers
    )
