"""Named numpy arrays as bytes, without pickle: a JSON header with their directory, then their raw buffers.

Three kinds of message are written this way: Kafka record values behind a
magic and a format version (:func:`pack_record`: the changelog and sequenced
records of :mod:`stream_dedup.kafka.changelog`, the shards' answers of
:mod:`stream_dedup.kafka.answers`) and the messages between the worker and
its signer processes (:mod:`stream_dedup.worker.signer_wire`). Layout::

    magic    4 bytes naming the record kind (records only)
    u8       format version (records only)
    u32      header length (little-endian)
    header   UTF-8 JSON: the caller's fields, plus "arrays": [[name, dtype, shape], ...]
    arrays   raw bytes of each array in the directory's order, back to back

Only numeric dtypes are written (``dtype.str`` states the byte order), so
reading is ``np.frombuffer`` over the received bytes, never code execution.
A :class:`~stream_dedup.lsh.generation.SignedBatch` travels as the arrays of
:func:`signed_arrays`.
"""

import json
import math
import struct
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from stream_dedup.errors import ChangelogError
from stream_dedup.lsh.generation import SignedBatch
from stream_dedup.text.shingle_sets import ShingleSets

HEADER_LENGTH = struct.Struct("<I")
#: A record's magic and format version, before its header length.
_RECORD_PREFIX = struct.Struct("<4sB")

NamedArrays = Sequence[tuple[str, np.ndarray]]


def pack(header: Mapping[str, Any], arrays: NamedArrays) -> list[bytes]:
    """The message as a list of byte strings to write one after the other (joining them is the caller's choice).

    ``header`` must not use the key ``"arrays"``, which holds the directory.
    """
    directory = [[name, array.dtype.str, list(array.shape)] for name, array in arrays]
    encoded = json.dumps({**header, "arrays": directory}).encode()
    return [HEADER_LENGTH.pack(len(encoded)), encoded, *(np.ascontiguousarray(a).tobytes() for _, a in arrays)]


def unpack(message: bytes | memoryview, offset: int = 0) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header and the arrays of a message starting at ``offset``; the arrays are views of ``message``."""
    (length,) = HEADER_LENGTH.unpack_from(message, offset)
    start = offset + HEADER_LENGTH.size
    header = json.loads(bytes(message[start : start + length]))
    position = start + length
    arrays = {}
    for name, dtype_str, shape in header.pop("arrays"):
        count = math.prod(int(d) for d in shape)
        array = np.frombuffer(message, dtype=np.dtype(dtype_str), count=count, offset=position).reshape(shape)
        position += array.nbytes
        arrays[str(name)] = array
    return header, arrays


def pack_record(magic: bytes, version: int, fields: Mapping[str, Any], arrays: NamedArrays) -> bytes:
    """A record value of kind ``magic`` and format ``version`` holding ``fields`` (JSON-able) and ``arrays``."""
    return b"".join([_RECORD_PREFIX.pack(magic, version), *pack(fields, arrays)])


def unpack_record(
    value: bytes, magic: bytes, version: int, kind: str, advice: str
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The fields and the arrays of a record value of kind ``magic`` and format ``version``.

    Raises :class:`ChangelogError` naming the ``kind`` of record otherwise
    (with ``advice`` for another version): nothing is read as what it is not.
    """
    if len(value) < _RECORD_PREFIX.size or value[:4] != magic:
        raise ChangelogError(f"a {kind} record is not a stream-dedup {kind} record (bad magic)")
    _, found = _RECORD_PREFIX.unpack_from(value)
    if found != version:
        raise ChangelogError(f"{kind} record format {found}; this release reads format {version} only. {advice}")
    return unpack(value, _RECORD_PREFIX.size)


def signed_arrays(signed: SignedBatch) -> list[tuple[str, np.ndarray]]:
    """The arrays of a signed batch, little-endian; shingle sets, fingerprints and set sizes only when it has them."""
    arrays: list[tuple[str, np.ndarray]] = [
        ("sketches", np.ascontiguousarray(signed.sketches, dtype=np.uint8)),
        ("keys", np.ascontiguousarray(signed.keys, dtype="<u4")),
    ]
    if signed.shingles is not None:
        arrays += [
            ("shingle_values", np.ascontiguousarray(signed.shingles.values, dtype="<u4")),
            ("shingle_ends", np.ascontiguousarray(signed.shingles.ends, dtype="<i8")),
        ]
    if signed.fingerprints is not None:
        arrays.append(("fingerprints", np.ascontiguousarray(signed.fingerprints, dtype="<u8")))
    if signed.set_sizes is not None:
        arrays.append(("set_sizes", np.ascontiguousarray(signed.set_sizes, dtype="<u4")))
    return arrays


def signed_batch(arrays: Mapping[str, np.ndarray]) -> SignedBatch:
    """The signed batch held by ``arrays`` (as :func:`signed_arrays` wrote them)."""
    shingles = ShingleSets(arrays["shingle_values"], arrays["shingle_ends"]) if "shingle_values" in arrays else None
    return SignedBatch(
        arrays["sketches"], arrays["keys"], shingles, arrays.get("fingerprints"), arrays.get("set_sizes")
    )


def blob_arrays(name: str, blobs: Sequence[bytes]) -> list[tuple[str, np.ndarray]]:
    """``blobs`` as two arrays: their bytes back to back (``name_bytes``) and their cumulative ends (``name_ends``)."""
    return [
        (f"{name}_bytes", np.frombuffer(b"".join(blobs), dtype=np.uint8)),
        (f"{name}_ends", np.cumsum([len(b) for b in blobs], dtype="<i8")),
    ]


def blobs_of(arrays: Mapping[str, np.ndarray], name: str) -> list[bytes]:
    """The byte strings :func:`blob_arrays` wrote under ``name``."""
    data, ends = arrays[f"{name}_bytes"].tobytes(), arrays[f"{name}_ends"].tolist()
    return [data[start:end] for start, end in zip([0, *ends[:-1]], ends, strict=False)]


def text_arrays(name: str, texts: Sequence[str]) -> list[tuple[str, np.ndarray]]:
    """``texts`` in UTF-8, as :func:`blob_arrays`."""
    return blob_arrays(name, [text.encode("utf-8") for text in texts])


def texts_of(arrays: Mapping[str, np.ndarray], name: str) -> list[str]:
    """The texts :func:`text_arrays` wrote under ``name``."""
    return [blob.decode("utf-8") for blob in blobs_of(arrays, name)]
