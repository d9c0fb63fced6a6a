"""The changelog: what each committed batch inserted into the index, as Kafka record values.

The index lives in memory; the changelog topic (one partition, so one order)
makes it durable. Each batch's changelog records are written in the same
transaction as its verdicts and input offsets, so the changelog holds exactly
the batches whose verdicts were published. Replaying it through
:meth:`Detector.process_signatures` rebuilds the same index: same documents,
same order, same batch boundaries (a batch too big for one record is split
into parts, and the parts are put back together before replay, because
generation boundaries fall between batches).

Each record also carries the input positions after its batch, so a restore
knows where to resume, and the signature fingerprint
(:meth:`~stream_dedup.config.DetectionConfig.signature_fingerprint`, passed
in as ``digest``), so a changelog written under other settings is refused
instead of mixing incomparable signatures.

Record value layout (no pickle)::

    b"SDCL"  magic
    u8       format version
    u32      header length (little-endian)
    header   UTF-8 JSON: digest, input topic, positions, final flag, array directory
    arrays   raw little-endian bytes, back to back
"""

import json
import math
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stream_dedup.errors import ChangelogError
from stream_dedup.text.shingle_sets import ShingleSets

MAGIC = b"SDCL"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<4sBI")

#: Default upper bound of one changelog record value (Kafka's default limit is 1 MB).
MAX_RECORD_BYTES = 512 * 1024


@dataclass(frozen=True)
class ChangelogEntry:
    """Documents one batch (or one part of a batch) inserted, in order.

    Attributes:
        ids: document ids.
        signatures: compact signatures ``(n, num_perm)``.
        event_times: seconds, as the detector was given them.
        shingles: the shingle sets (exact verification only).
        input_topic: the topic the batch was read from.
        positions: input partition -> next offset to read, after this batch.
        final: whether this is the batch's last part.
    """

    ids: list[str]
    signatures: npt.NDArray[np.uint8]
    event_times: npt.NDArray[np.float64]
    shingles: ShingleSets | None
    input_topic: str
    positions: dict[int, int]
    final: bool = True


def encode_entry(entry: ChangelogEntry, digest: str, max_bytes: int = MAX_RECORD_BYTES) -> list[bytes]:
    """Record values for ``entry``: one, or several parts when it is larger than ``max_bytes``."""
    n = len(entry.ids)
    if n <= 1:
        return [_encode_part(entry, digest)]
    row_bytes = _row_bytes(entry)
    rows_per_part = max(1, int(max_bytes // max(1.0, row_bytes)))
    starts = list(range(0, n, rows_per_part))
    last = len(starts) - 1
    return [
        _encode_part(_slice(entry, start, min(n, start + rows_per_part), entry.final and i == last), digest)
        for i, start in enumerate(starts)
    ]


def decode_entry(value: bytes, digest: str) -> ChangelogEntry:
    """Parse a record value; raises :class:`ChangelogError` if it is not replayable here."""
    if len(value) < _PREFIX.size or value[:4] != MAGIC:
        raise ChangelogError("a changelog record is not a stream-dedup changelog record (bad magic)")
    _, version, header_length = _PREFIX.unpack_from(value)
    if version != FORMAT_VERSION:
        raise ChangelogError(f"changelog record format {version}; this release reads format {FORMAT_VERSION}")
    header = json.loads(value[_PREFIX.size : _PREFIX.size + header_length])
    if header["digest"] != digest:
        raise ChangelogError(
            "the changelog was written with other signature parameters (shingling, num_perm, seed, "
            "banding or verification) than this run's; its signatures are not comparable. Run with the "
            "original settings, or point changelog_topic at a new topic (the index then starts empty)."
        )
    arrays = dict(_read_arrays(value, _PREFIX.size + header_length, header["arrays"]))
    id_bytes, id_ends = arrays["id_bytes"].tobytes(), arrays["id_ends"]
    ends = id_ends.tolist()
    ids = [id_bytes[s:e].decode("utf-8") for s, e in zip([0, *ends[:-1]], ends, strict=False)]
    shingles = ShingleSets(arrays["shingle_values"], arrays["shingle_ends"]) if "shingle_values" in arrays else None
    return ChangelogEntry(
        ids=ids,
        signatures=arrays["signatures"],
        event_times=arrays["event_times"],
        shingles=shingles,
        input_topic=header["input_topic"],
        positions={int(p): int(o) for p, o in header["positions"].items()},
        final=header["final"],
    )


def merge_parts(parts: list[ChangelogEntry]) -> ChangelogEntry:
    """Put the parts of one batch back together."""
    if len(parts) == 1:
        return parts[0]
    shingle_parts = [p.shingles for p in parts if p.shingles is not None]
    return ChangelogEntry(
        ids=[doc_id for p in parts for doc_id in p.ids],
        signatures=np.concatenate([p.signatures for p in parts]),
        event_times=np.concatenate([p.event_times for p in parts]),
        shingles=ShingleSets.concat(shingle_parts) if shingle_parts else None,
        input_topic=parts[-1].input_topic,
        positions=parts[-1].positions,
        final=parts[-1].final,
    )


def _encode_part(entry: ChangelogEntry, digest: str) -> bytes:
    encoded_ids = [doc_id.encode("utf-8") for doc_id in entry.ids]
    arrays: list[tuple[str, np.ndarray]] = [
        ("signatures", np.ascontiguousarray(entry.signatures, dtype=np.uint8)),
        ("event_times", np.ascontiguousarray(entry.event_times, dtype="<f8")),
        ("id_bytes", np.frombuffer(b"".join(encoded_ids), dtype=np.uint8)),
        ("id_ends", np.cumsum([len(b) for b in encoded_ids], dtype="<i8")),
    ]
    if entry.shingles is not None:
        arrays += [
            ("shingle_values", np.ascontiguousarray(entry.shingles.values, dtype="<u4")),
            ("shingle_ends", np.ascontiguousarray(entry.shingles.ends, dtype="<i8")),
        ]
    header = json.dumps(
        {
            "digest": digest,
            "input_topic": entry.input_topic,
            "positions": {str(p): o for p, o in sorted(entry.positions.items())},
            "final": entry.final,
            "arrays": [[name, array.dtype.str, list(array.shape)] for name, array in arrays],
        }
    ).encode()
    return b"".join([_PREFIX.pack(MAGIC, FORMAT_VERSION, len(header)), header, *(a.tobytes() for _, a in arrays)])


def _read_arrays(value: bytes, offset: int, directory: list[Any]) -> Iterator[tuple[str, np.ndarray]]:
    for name, dtype_str, shape in directory:
        count = math.prod(int(d) for d in shape)
        array = np.frombuffer(value, dtype=np.dtype(dtype_str), count=count, offset=offset).reshape(shape)
        offset += array.nbytes
        yield str(name), array


def _row_bytes(entry: ChangelogEntry) -> float:
    """Average encoded bytes per document."""
    per_row = entry.signatures.shape[1] + 8 + 8 + sum(len(i) for i in entry.ids) / len(entry.ids)
    if entry.shingles is not None:
        per_row += (entry.shingles.values.nbytes + entry.shingles.ends.nbytes) / len(entry.ids)
    return float(per_row)


def _slice(entry: ChangelogEntry, start: int, stop: int, final: bool) -> ChangelogEntry:
    rows = np.arange(start, stop)
    return ChangelogEntry(
        ids=entry.ids[start:stop],
        signatures=entry.signatures[start:stop],
        event_times=entry.event_times[start:stop],
        shingles=entry.shingles.take(rows) if entry.shingles is not None else None,
        input_topic=entry.input_topic,
        positions=entry.positions,
        final=final,
    )
