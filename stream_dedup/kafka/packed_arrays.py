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
import re
import struct
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

from stream_dedup.errors import ChangelogError
from stream_dedup.lsh.arena import ends_fit
from stream_dedup.lsh.generation import SignedBatch
from stream_dedup.text.shingle_sets import ShingleSets

HEADER_LENGTH = struct.Struct("<I")
#: A record's magic and format version, before its header length.
_RECORD_PREFIX = struct.Struct("<4sB")

NamedArrays = Sequence[tuple[str, np.ndarray]]
T = TypeVar("T")
#: The dtypes :func:`pack` writes (``dtype.str`` of numbers): byte order, kind, size.
_NUMERIC_DTYPE = re.compile(r"[<>|](?:b1|[iu][1248]|f[248])")


def pack(header: Mapping[str, Any], arrays: NamedArrays) -> list[bytes]:
    """The message as a list of byte strings to write one after the other (joining them is the caller's choice).

    ``header`` must not use the key ``"arrays"``, which holds the directory.
    """
    directory = [[name, array.dtype.str, list(array.shape)] for name, array in arrays]
    encoded = json.dumps({**header, "arrays": directory}).encode()
    return [HEADER_LENGTH.pack(len(encoded)), encoded, *(np.ascontiguousarray(a).tobytes() for _, a in arrays)]


def unpack(message: bytes | memoryview, offset: int = 0) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header and the arrays of a message starting at ``offset``; the arrays are views of ``message``.

    Raises :class:`ValueError` saying what is wrong when ``message`` is not
    what :func:`pack` wrote (truncated, its header not JSON, its directory
    malformed): bytes that do not hold an array are never read as one.
    """
    header, arrays, _ = _unpack(message, offset)
    return header, arrays


def _unpack(message: bytes | memoryview, offset: int) -> tuple[dict[str, Any], dict[str, np.ndarray], int]:
    """As :func:`unpack`, with where the last array ends."""
    if len(message) < offset + HEADER_LENGTH.size:
        raise ValueError(f"truncated: {len(message) - offset} bytes, too few for a header length")
    (length,) = HEADER_LENGTH.unpack_from(message, offset)
    start = offset + HEADER_LENGTH.size
    if len(message) < start + length:
        raise ValueError(f"truncated: a header of {length} bytes announced, {len(message) - start} bytes left")
    header = _header(bytes(message[start : start + length]))
    position = start + length
    arrays = {}
    for entry in header.pop("arrays"):
        name, dtype, shape = _directory_entry(entry)
        if name in arrays:  # the writer names each once: the second would stand for the first, unread
            raise ValueError(f"array {name!r} is listed twice")
        count = math.prod(shape)
        if len(message) < position + count * dtype.itemsize:
            raise ValueError(f"truncated: array {name!r} of shape {shape} runs past the end")
        array = np.frombuffer(message, dtype=dtype, count=count, offset=position).reshape(shape)
        position += array.nbytes
        arrays[name] = array
    return header, arrays, position


def _header(encoded: bytes) -> dict[str, Any]:
    """The JSON header, with its array directory a list (ValueError otherwise)."""
    try:
        header = json.loads(encoded.decode("utf-8"))
    except RecursionError:
        raise ValueError("the header nests too deep to be ours") from None
    if not isinstance(header, dict) or not isinstance(header.get("arrays"), list):
        raise ValueError("the header is not a JSON object with an array directory")
    return header


def _directory_entry(entry: object) -> tuple[str, np.dtype[Any], tuple[int, ...]]:
    """Name, numeric dtype and shape (no negative size: -1 would let numpy guess) of one directory entry."""
    if not (isinstance(entry, list) and len(entry) == 3 and isinstance(entry[0], str) and isinstance(entry[1], str)):
        raise ValueError(f"array directory entry {str(entry)[:80]} is not [name, dtype, shape]")
    name, dtype_str, shape = entry
    if _NUMERIC_DTYPE.fullmatch(dtype_str) is None:
        raise ValueError(f"array {name!r} has dtype {dtype_str[:40]!r}, not a number's")
    dtype = np.dtype(dtype_str)
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)):
        raise ValueError(f"array {name!r} has shape {str(shape)[:80]}, not a list of sizes")
    return name, dtype, tuple(shape)


def pack_record(magic: bytes, version: int, fields: Mapping[str, Any], arrays: NamedArrays) -> bytes:
    """A record value of kind ``magic`` and format ``version`` holding ``fields`` (JSON-able) and ``arrays``."""
    return b"".join([_RECORD_PREFIX.pack(magic, version), *pack(fields, arrays)])


def unpack_record(
    value: bytes, magic: bytes, version: int, kind: str, advice: str
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The fields and the arrays of a record value of kind ``magic`` and format ``version``.

    Raises :class:`ChangelogError` naming the ``kind`` of record otherwise
    (with ``advice`` for another version): nothing is read as what it is not.
    A record of the right kind that is damaged raises :class:`ValueError`
    saying what is wrong, which :func:`reading_record` turns into a
    :class:`ChangelogError` along with what its fields hold.
    """
    if len(value) < _RECORD_PREFIX.size or value[:4] != magic:
        raise ChangelogError(f"the record is not a stream-dedup {kind} record (bad magic)")
    _, found = _RECORD_PREFIX.unpack_from(value)
    if found != version:
        raise ChangelogError(f"{kind} record format {found}; this release reads format {version} only. {advice}")
    header, arrays, end = _unpack(value, _RECORD_PREFIX.size)
    if end != len(value):
        raise ValueError(f"{len(value) - end} bytes after the last array")
    return header, arrays


@contextmanager
def reading_record(kind: str, advice: str) -> Iterator[None]:
    """Reading a record of ``kind``: what is damaged in it (a ValueError) becomes a :class:`ChangelogError`.

    A damaged record must stop the reader with a message saying so, never with
    a traceback, nor be read as something it is not.
    """
    try:
        yield
    except ValueError as error:
        raise ChangelogError(f"the {kind} record is damaged: {error}. {advice}") from error


@contextmanager
def record_at(topic: str, partition: int, offset: int) -> Iterator[None]:
    """Reading the record at ``offset`` of ``topic``'s ``partition``: a :class:`ChangelogError` names where it is.

    So that the operator can look at the record (``kafka-console-consumer
    --offset``), and knows what a new topic or a reset leaves behind.
    """
    try:
        yield
    except ChangelogError as error:
        raise ChangelogError(f"topic {topic!r} partition {partition} offset {offset}: {error}") from error


def field(fields: Mapping[str, Any], name: str, kind: type[T]) -> T:
    """The header field ``name``, which must be a ``kind`` (ValueError otherwise)."""
    value = fields.get(name)
    # bool is an int to Python, never to a reader of these records.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ValueError(f"header field {name!r} is {str(value)[:40]!r}, not a {kind.__name__}")
    return value


def array(arrays: Mapping[str, np.ndarray], name: str, dtype: npt.DTypeLike, ndim: int) -> np.ndarray:
    """The array ``name``, which must have ``dtype`` and ``ndim`` dimensions (ValueError otherwise)."""
    found = arrays.get(name)
    if found is None:
        raise ValueError(f"no array {name!r}")
    if found.dtype != np.dtype(dtype) or found.ndim != ndim:
        raise ValueError(f"array {name!r} is {found.dtype.str} of shape {found.shape}, not {np.dtype(dtype).str}")
    return found


def optional_array(arrays: Mapping[str, np.ndarray], name: str, dtype: npt.DTypeLike, ndim: int) -> np.ndarray | None:
    """The array ``name`` as :func:`array` checks it, or None if there is none."""
    return array(arrays, name, dtype, ndim) if name in arrays else None


def check_rows(arrays: Mapping[str, np.ndarray | None], rows: int) -> None:
    """Raise ValueError unless every array given has ``rows`` rows: one per document."""
    for name, values in arrays.items():
        if values is not None and values.shape[0] != rows:
            raise ValueError(f"array {name!r} has {values.shape[0]} rows for {rows} documents")


def signed_arrays(signed: SignedBatch) -> list[tuple[str, np.ndarray]]:
    """The arrays of a signed batch, little-endian; shingle sets, fingerprints, set sizes and filled bins only when
    it has them."""
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
    if signed.filled_bins is not None:  # passed over by readers of releases before it
        arrays.append(("filled_bins", np.ascontiguousarray(signed.filled_bins, dtype="<u2")))
    return arrays


def signed_batch(arrays: Mapping[str, np.ndarray]) -> SignedBatch:
    """The signed batch held by ``arrays`` (as :func:`signed_arrays` wrote them).

    Raises :class:`ValueError` when they do not make one: an array missing or
    of another dtype, one row count differing from the sketches', shingle
    ends that do not cut the shingles in order.
    """
    sketches = array(arrays, "sketches", np.uint8, 2)
    rows = sketches.shape[0]
    shingles = None
    if "shingle_values" in arrays:
        values, ends = array(arrays, "shingle_values", "<u4", 1), array(arrays, "shingle_ends", "<i8", 1)
        _check_ends("shingle", ends, values.size, rows)
        shingles = ShingleSets(values, ends)
    batch = SignedBatch(
        sketches,
        array(arrays, "keys", "<u4", 2),
        shingles,
        optional_array(arrays, "fingerprints", "<u8", 1),
        optional_array(arrays, "set_sizes", "<u4", 1),
        optional_array(arrays, "filled_bins", "<u2", 1),
    )
    check_rows(
        {
            "keys": batch.keys,
            "fingerprints": batch.fingerprints,
            "set_sizes": batch.set_sizes,
            "filled_bins": batch.filled_bins,
        },
        rows,
    )
    return batch


def blob_arrays(name: str, blobs: Sequence[bytes]) -> list[tuple[str, np.ndarray]]:
    """``blobs`` as two arrays: their bytes back to back (``name_bytes``) and their cumulative ends (``name_ends``)."""
    return [
        (f"{name}_bytes", np.frombuffer(b"".join(blobs), dtype=np.uint8)),
        (f"{name}_ends", np.cumsum([len(b) for b in blobs], dtype="<i8")),
    ]


def blobs_of(arrays: Mapping[str, np.ndarray], name: str) -> list[bytes]:
    """The byte strings :func:`blob_arrays` wrote under ``name`` (ValueError when the arrays cannot be theirs)."""
    data, ends = array(arrays, f"{name}_bytes", np.uint8, 1), array(arrays, f"{name}_ends", "<i8", 1)
    _check_ends(name, ends, data.size, ends.shape[0])
    joined, stops = data.tobytes(), ends.tolist()
    return [joined[start:end] for start, end in zip([0, *stops[:-1]], stops, strict=False)]


def text_arrays(name: str, texts: Sequence[str]) -> list[tuple[str, np.ndarray]]:
    """``texts`` in UTF-8, as :func:`blob_arrays`."""
    return blob_arrays(name, [text.encode("utf-8") for text in texts])


def texts_of(arrays: Mapping[str, np.ndarray], name: str) -> list[str]:
    """The texts :func:`text_arrays` wrote under ``name``."""
    return [blob.decode("utf-8") for blob in blobs_of(arrays, name)]


def _check_ends(name: str, ends: np.ndarray, size: int, count: int) -> None:
    """Raise ValueError unless ``ends`` cut ``size`` elements into ``count`` items, in order."""
    if not ends_fit(ends, size, count):
        raise ValueError(f"the {ends.shape[0]} ends of {name!r} do not cut its {size} elements into {count}, in order")
