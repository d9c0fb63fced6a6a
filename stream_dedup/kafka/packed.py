"""Record values made of numpy arrays: a magic, a format version, a JSON header, raw arrays (no pickle).

The changelog (and sequenced) records and the shards' answer records share
this layout::

    magic    4 bytes naming the record kind
    u8       format version
    u32      header length (little-endian)
    header   UTF-8 JSON: the kind's fields, and "arrays": [[name, dtype, shape], ...]
    arrays   raw bytes of each array in that order, back to back

Arrays are read back as views of the value (``np.frombuffer``): no copy.
"""

import json
import math
import struct
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from stream_dedup.errors import ChangelogError

_PREFIX = struct.Struct("<4sBI")

Arrays = list[tuple[str, np.ndarray]]


def pack(magic: bytes, version: int, fields: dict[str, Any], arrays: Arrays) -> bytes:
    """The value holding ``fields`` (JSON-able) and ``arrays`` (little-endian dtypes, contiguous)."""
    header = json.dumps(
        {**fields, "arrays": [[name, array.dtype.str, list(array.shape)] for name, array in arrays]}
    ).encode()
    return b"".join([_PREFIX.pack(magic, version, len(header)), header, *(a.tobytes() for _, a in arrays)])


def unpack(
    value: bytes, magic: bytes, version: int, kind: str, advice: str
) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The header fields and the arrays of a value of kind ``magic`` and format ``version``.

    Raises :class:`ChangelogError` naming the ``kind`` of record otherwise
    (with ``advice`` for another version): nothing is read as what it is not.
    """
    if len(value) < _PREFIX.size or value[:4] != magic:
        raise ChangelogError(f"a {kind} record is not a stream-dedup {kind} record (bad magic)")
    _, found, header_length = _PREFIX.unpack_from(value)
    if found != version:
        raise ChangelogError(f"{kind} record format {found}; this release reads format {version} only. {advice}")
    header = json.loads(value[_PREFIX.size : _PREFIX.size + header_length])
    return header, dict(_read_arrays(value, _PREFIX.size + header_length, header["arrays"]))


def id_arrays(ids: Sequence[str]) -> Arrays:
    """Ids as two arrays: their UTF-8 bytes back to back, and where each ends."""
    encoded = [doc_id.encode("utf-8") for doc_id in ids]
    return [
        ("id_bytes", np.frombuffer(b"".join(encoded), dtype=np.uint8)),
        ("id_ends", np.cumsum([len(b) for b in encoded], dtype="<i8")),
    ]


def ids_of(arrays: dict[str, np.ndarray]) -> list[str]:
    """The ids :func:`id_arrays` packed."""
    id_bytes, ends = arrays["id_bytes"].tobytes(), arrays["id_ends"].tolist()
    return [id_bytes[s:e].decode("utf-8") for s, e in zip([0, *ends[:-1]], ends, strict=False)]


def _read_arrays(value: bytes, offset: int, directory: list[Any]) -> Iterator[tuple[str, np.ndarray]]:
    for name, dtype_str, shape in directory:
        count = math.prod(int(d) for d in shape)
        array = np.frombuffer(value, dtype=np.dtype(dtype_str), count=count, offset=offset).reshape(shape)
        offset += array.nbytes
        yield str(name), array
