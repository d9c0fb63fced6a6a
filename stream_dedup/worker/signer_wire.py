"""What the worker and its signer processes say to each other over pipes, and how it is framed.

Every message is packed arrays (:mod:`stream_dedup.kafka.packed_arrays`: a
JSON header and raw numpy buffers, no pickle), behind a u64 length
(little-endian). What crosses, and in which direction:

==========  ================  ===========================================================
message     direction         content
==========  ================  ===========================================================
config      worker -> signer  once: the detection and input settings (their fields, JSON)
ready       signer -> worker  once: the detection fingerprint the signer computed from
                              them (so a mismatch is caught before any batch), its pid
request     worker -> signer  per batch: a job number, the input topic; per record its
                              partition, offset, timestamp, key and value (bytes, and
                              whether each is present)
response    signer -> worker  per batch: the job number; per record its document id or
                              its refusal (reason, detail); the documents' signatures
                              (the arrays of a SignedBatch); the normalised texts, as
                              they are and in compressed blocks (if the worker keeps
                              them); log lines for the worker
==========  ================  ===========================================================

Record headers never cross: reading a document does not look at them, and
the worker keeps the records themselves for what it sends.
"""

import os
import select
import struct
import time
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import Any, NamedTuple

import numpy as np

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.documents import Refusal
from stream_dedup.kafka.messages import InputReading
from stream_dedup.kafka.packed_arrays import (
    blob_arrays,
    blobs_of,
    pack,
    signed_arrays,
    signed_batch,
    text_arrays,
    texts_of,
    unpack,
)
from stream_dedup.kafka.value_blocks import ValueBlock
from stream_dedup.worker.signing import Outcome, SignedRecords

_LENGTH = struct.Struct("<Q")
#: Largest message accepted (a batch of 100,000 records of 1 MiB is 100 GB: far past any real one).
MAX_MESSAGE_BYTES = 1 << 36
#: Longest single wait in select(), so that ``interrupted`` is asked at least this often (seconds).
_WAIT_SLICE = 0.5


class WireRecord(NamedTuple):
    """An input record as a signer sees it: what :func:`~stream_dedup.kafka.messages.read_record` reads."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None


class PipeClosedError(Exception):
    """The other end of a pipe is gone (its process exited) or did not answer in time."""


def config_message(detection: DetectionConfig, reading: InputReading) -> bytes:
    return _message({"kind": "config", "detection": asdict(detection), "reading": asdict(reading)}, [])


def read_config(message: bytes) -> tuple[DetectionConfig, InputReading]:
    header, _ = unpack(message)
    return DetectionConfig(**header["detection"]), InputReading(**header["reading"])


def ready_message(fingerprint: str, pid: int) -> bytes:
    return _message({"kind": "ready", "fingerprint": fingerprint, "pid": pid}, [])


def read_ready(message: bytes) -> tuple[str, int]:
    header, _ = unpack(message)
    return str(header["fingerprint"]), int(header["pid"])


def request_message(job: int, records: Sequence[Any]) -> bytes:
    """A batch to read and sign; ``records`` are consumer records (or anything with their fields)."""
    keys = [r.key for r in records]
    values = [r.value for r in records]
    arrays = [
        ("partitions", np.array([r.partition for r in records], dtype="<i4")),
        ("offsets", np.array([r.offset for r in records], dtype="<i8")),
        ("timestamps", np.array([r.timestamp for r in records], dtype="<i8")),
        ("has_key", np.array([k is not None for k in keys], dtype=np.uint8)),
        ("has_value", np.array([v is not None for v in values], dtype=np.uint8)),
        *blob_arrays("key", [k or b"" for k in keys]),
        *blob_arrays("value", [v or b"" for v in values]),
    ]
    topic = records[0].topic if records else ""
    return _message({"kind": "request", "job": job, "topic": topic}, arrays)


def read_request(message: bytes) -> tuple[int, list[WireRecord]]:
    header, arrays = unpack(message)
    keys, values = blobs_of(arrays, "key"), blobs_of(arrays, "value")
    topic = header["topic"]
    records = [
        WireRecord(topic, partition, offset, timestamp, key if has_key else None, value if has_value else None)
        for partition, offset, timestamp, has_key, has_value, key, value in zip(
            arrays["partitions"].tolist(),
            arrays["offsets"].tolist(),
            arrays["timestamps"].tolist(),
            arrays["has_key"].tolist(),
            arrays["has_value"].tolist(),
            keys,
            values,
            strict=True,
        )
    ]
    return int(header["job"]), records


def response_message(job: int, signed: SignedRecords, log_lines: Sequence[tuple[int, str]]) -> bytes:
    """The outcome of a request; ``log_lines`` are (level, message) the signer logged meanwhile."""
    refusals = [o for o in signed.outcomes if isinstance(o, Refusal)]
    arrays = [
        ("refused", np.array([isinstance(o, Refusal) for o in signed.outcomes], dtype=np.uint8)),
        *text_arrays("id", [o for o in signed.outcomes if isinstance(o, str)]),
        *text_arrays("reason", [r.reason for r in refusals]),
        *text_arrays("detail", [r.detail for r in refusals]),
        *signed_arrays(signed.signed),
        *blob_arrays("text", signed.texts),
        *_block_arrays(signed.blocks),
    ]
    return _message({"kind": "response", "job": job, "log": [list(line) for line in log_lines]}, arrays)


def read_response(message: bytes, records: list[Any]) -> tuple[int, SignedRecords, list[tuple[int, str]]]:
    """The job number, ``records`` (the request's, as the worker holds them) read and signed, the log lines."""
    header, arrays = unpack(message)
    ids = iter(texts_of(arrays, "id"))
    refusals = iter(
        Refusal(reason, detail)
        for reason, detail in zip(texts_of(arrays, "reason"), texts_of(arrays, "detail"), strict=True)
    )
    outcomes: list[Outcome] = [next(refusals) if refused else next(ids) for refused in arrays["refused"].tolist()]
    if len(outcomes) != len(records):
        raise ValueError(f"a signer answered for {len(outcomes)} records of {len(records)}")
    log_lines = [(int(level), str(text)) for level, text in header["log"]]
    signed = SignedRecords(records, outcomes, signed_batch(arrays), blobs_of(arrays, "text"), _blocks_of(arrays))
    return int(header["job"]), signed, log_lines


def _block_arrays(blocks: Sequence[ValueBlock]) -> list[tuple[str, np.ndarray]]:
    """Blocks as arrays: their record counts, their keys and ends back to back, their data as blobs."""
    return [
        ("block_records", np.array([len(b.keys) for b in blocks], dtype="<i8")),
        ("block_keys", np.array([key for b in blocks for key in b.keys], dtype="<u8")),
        ("block_ends", np.array([end for b in blocks for end in b.ends], dtype="<u8")),
        *blob_arrays("block_data", [b.data for b in blocks]),
    ]


def _blocks_of(arrays: Mapping[str, np.ndarray]) -> list[ValueBlock]:
    """The blocks :func:`_block_arrays` wrote."""
    counts = arrays["block_records"]
    bounds = np.cumsum(counts)
    keys, ends = arrays["block_keys"].tolist(), arrays["block_ends"].tolist()
    starts_ends = zip((bounds - counts).tolist(), bounds.tolist(), strict=True)
    return [
        ValueBlock(array("Q", keys[start:end]), array("Q", ends[start:end]), data)
        for (start, end), data in zip(starts_ends, blobs_of(arrays, "block_data"), strict=True)
    ]


def write_frame(fd: int, message: bytes, deadline: float = float("inf")) -> None:
    """Write ``message`` with its length to ``fd``; raises :class:`PipeClosedError` if the reader is gone or stuck."""
    data = memoryview(_LENGTH.pack(len(message)) + message)
    while data:
        _wait(fd, "write", deadline)
        try:
            written = os.write(fd, data)
        except BlockingIOError:
            continue
        except (BrokenPipeError, ConnectionResetError) as error:
            raise PipeClosedError(f"the reading end is closed ({error.strerror})") from error
        data = data[written:]


def read_frame(fd: int, deadline: float = float("inf"), interrupted: Callable[[], bool] | None = None) -> bytes | None:
    """The next message from ``fd``, or ``None`` if ``interrupted()`` turned true while waiting for it to start.

    Raises :class:`PipeClosedError` at end of file (the writer exited) or past ``deadline`` (monotonic seconds).
    """
    head = _read_exactly(fd, _LENGTH.size, deadline, interrupted)
    if head is None:
        return None
    (length,) = _LENGTH.unpack(head)
    if length > MAX_MESSAGE_BYTES:
        raise PipeClosedError(f"a message of {length} bytes announced: not one of ours")
    body = _read_exactly(fd, length, deadline, None)
    assert body is not None
    return body


def _read_exactly(fd: int, size: int, deadline: float, interrupted: Callable[[], bool] | None) -> bytes | None:
    parts: list[bytes] = []
    remaining = size
    while remaining:
        if not parts and interrupted is not None and interrupted():
            return None
        if not _wait(fd, "read", deadline, give_up_early=not parts and interrupted is not None):
            continue
        try:
            part = os.read(fd, min(remaining, 1 << 20))
        except BlockingIOError:
            continue
        if not part:
            raise PipeClosedError("end of file: the writing process exited")
        parts.append(part)
        remaining -= len(part)
    return b"".join(parts)


def _wait(fd: int, direction: str, deadline: float, give_up_early: bool = False) -> bool:
    """Wait until ``fd`` is ready; False if a slice passed first and the caller wants to look around."""
    readers, writers = ([fd], []) if direction == "read" else ([], [fd])
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise PipeClosedError("no answer in time")
        readable, writable, _ = select.select(readers, writers, [], min(left, _WAIT_SLICE))
        if readable or writable:
            return True
        if give_up_early:
            return False


def _message(header: dict[str, Any], arrays: list[tuple[str, np.ndarray]]) -> bytes:
    return b"".join(pack(header, arrays))
