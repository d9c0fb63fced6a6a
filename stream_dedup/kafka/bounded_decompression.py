"""Decompressing a record batch's records, stopping as soon as the output passes a limit.

kafka-python decompresses a fetched batch whole, with no bound: a batch of a
few KB on the wire (zstd, gzip or lz4 of zeros; snappy's xerial blocks alike)
can decompress to gigabytes, and the process dies of memory on it, then again
on the same batch after every restart. Here each codec reads at most
``limit + 1`` bytes of output before giving up, with the very library calls
kafka-python makes (so a batch within the limit decompresses to the same
bytes, and fails the same way when corrupt):

- gzip and zstd: the same readers (``GzipFile``; zstd's stream reader, across
  frames), read in slices, as ``read(size)`` inflates no further than ``size``;
- lz4: the same frame decoder (its first frame only, as ``lz4.frame.decompress``),
  asked for at most the bytes still allowed;
- snappy: nothing is decompressed to measure it. A snappy block states its
  length up front (a varint) and the decoder refuses one whose output differs,
  so the stated lengths (of each block of xerial's framing) are summed first.

The codec libraries are kafka-python's own imports (``kafka.codec``), so an
installation without one still raises kafka-python's ``UnsupportedCodecError``
(:mod:`stream_dedup.kafka.codec_check`) before anything here runs.
"""

import gzip
import io
import struct
from collections.abc import Callable

from kafka import codec

#: kafka-python's codes of the compression types (the low bits of a batch's attributes).
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
CODEC_NAMES = {0: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
#: Output asked of a streaming decoder at a time: what it holds beyond the limit, at most.
_SLICE = 1 << 20
_XERIAL_HEADER_BYTES = 16
_BLOCK_LENGTH = struct.Struct(">i")


def decompressed_within(compression: int, data: bytes, limit: int) -> bytes | None:
    """``data`` decompressed with ``compression`` (one of the codes above); ``None`` if it holds more than ``limit``.

    At most about ``limit`` + 1 MiB of output is ever made.
    """
    if compression == GZIP:
        return _gzip(data, limit)
    if compression == ZSTD:
        return _zstd(data, limit)
    if compression == LZ4:
        return _lz4(data, limit)
    if compression == SNAPPY:
        return codec.snappy_decode(data) if snappy_length(data) <= limit else None
    raise ValueError(f"unknown compression type {compression}")


def _gzip(data: bytes, limit: int) -> bytes | None:
    with gzip.GzipFile(fileobj=io.BytesIO(data), mode="rb") as reader:
        return _read_within(reader.read, limit)


def _zstd(data: bytes, limit: int) -> bytes | None:
    with codec.zstd.ZstdDecompressor().stream_reader(io.BytesIO(data), read_across_frames=True) as reader:
        return _read_within(reader.read, limit)


def _lz4(data: bytes, limit: int) -> bytes | None:
    decoder = codec.lz4.LZ4FrameDecompressor()
    pending = data

    def read(size: int) -> bytes:
        nonlocal pending
        if decoder.eof:
            return b""
        out: bytes = decoder.decompress(pending, max_length=size)
        pending = b""
        if not out and not decoder.eof:
            raise RuntimeError("LZ4 frame is incomplete")
        return out

    return _read_within(read, limit)


def _read_within(read: Callable[[int], bytes], limit: int) -> bytes | None:
    """What ``read`` gives until it gives nothing, or ``None`` once that passes ``limit``."""
    parts: list[bytes] = []
    total = 0
    while True:
        part = read(min(_SLICE, limit + 1 - total))
        if not part:
            return b"".join(parts)
        total += len(part)
        if total > limit:
            return None
        parts.append(part)


def snappy_length(data: bytes) -> int:
    """The bytes snappy-compressed ``data`` (raw, or in xerial's blocks) states it holds; malformed parts count 0.

    What does not parse is left to the decoder, which raises on it as it did.
    """
    if not codec._detect_xerial_stream(data):
        return _stated_length(data, 0)
    total = 0
    cursor = _XERIAL_HEADER_BYTES
    while cursor + _BLOCK_LENGTH.size <= len(data):
        (size,) = _BLOCK_LENGTH.unpack_from(data, cursor)
        cursor += _BLOCK_LENGTH.size
        if size <= 0:
            break
        total += _stated_length(data, cursor)
        cursor += size
    return total


def _stated_length(data: bytes, at: int) -> int:
    """The uncompressed length a raw snappy block at ``at`` starts with (a little-endian base-128 varint)."""
    length = shift = 0
    for byte in data[at : at + 5]:
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            return length
        shift += 7
    return 0
