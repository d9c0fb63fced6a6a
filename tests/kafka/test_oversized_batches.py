"""Compressed batches that decompress past their bound are not read; every other one is read as kafka-python reads it.

The bombs are built as a hostile producer would write them: a v2 batch whose
records are zeros, compressed by a streaming compressor, so that a batch of
a few KB states records of hundreds of MB without the test ever holding them.
What reading one costs is measured with tracemalloc (every bytes object the
decoders return is a Python allocation).
"""

import os
import struct
import tracemalloc
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import lz4.frame
import pytest
import snappy
import zstandard
from kafka.codec import snappy_encode
from kafka.consumer.fetcher import Fetcher
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.record.util import calc_crc32c
from kafka.structs import TopicPartition

from stream_dedup.engine.documents import REASONS
from stream_dedup.kafka.bounded_decompression import GZIP, LZ4, SNAPPY, ZSTD, decompressed_within, snappy_length
from stream_dedup.kafka.fetched_records import QuickPartitionRecords
from stream_dedup.kafka.messages import InputReading, read_record
from stream_dedup.kafka.oversized_batches import (
    BATCH_BYTES_CAP,
    BATCH_TOO_LARGE,
    RECORD_OVERHEAD_BYTES,
    BatchBound,
    UnreadRecord,
)
from stream_dedup.ops.metrics import DEAD_LETTER_REASONS

PARTITION = TopicPartition("documents", 1)
TIMESTAMP = 1_790_000_000_000
BASE_OFFSET = 1000
_HEADER = DefaultRecordBatch.HEADER_STRUCT.size
_MIB = 1 << 20


def _varint(value: int) -> bytes:
    """Kafka's zigzag varint."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _zero_records(records: int, value_bytes: int) -> Iterator[bytes]:
    """The records section of a batch of ``records`` null-keyed records of ``value_bytes`` zeros, in slices."""
    for delta in range(records):
        body_head = b"\x00" + _varint(0) + _varint(delta) + _varint(-1) + _varint(value_bytes)
        yield _varint(len(body_head) + value_bytes + 1) + body_head
        for start in range(0, value_bytes, 4 * _MIB):
            yield bytes(min(4 * _MIB, value_bytes - start))
        yield _varint(0)  # no headers


def _zstd(parts: Iterator[bytes]) -> bytes:
    compressor = zstandard.ZstdCompressor().compressobj()
    return b"".join(compressor.compress(p) for p in parts) + compressor.flush()


def _gzip(parts: Iterator[bytes]) -> bytes:
    compressor = zlib.compressobj(wbits=31)
    return b"".join(compressor.compress(p) for p in parts) + compressor.flush()


def _lz4(parts: Iterator[bytes]) -> bytes:
    compressor = lz4.frame.LZ4FrameCompressor(block_linked=False)
    return compressor.begin() + b"".join(compressor.compress(p) for p in parts) + compressor.flush()


def _snappy_xerial(parts: Iterator[bytes]) -> bytes:
    return snappy_encode(b"".join(parts), xerial_compatible=True)


def _snappy_raw(parts: Iterator[bytes]) -> bytes:
    return bytes(snappy.compress(b"".join(parts)))


#: Codec name -> (kafka-python's code, a compressor of a records section given in slices).
CODECS: dict[str, tuple[int, Callable[[Iterator[bytes]], bytes]]] = {
    "gzip": (GZIP, _gzip),
    "snappy-xerial": (SNAPPY, _snappy_xerial),
    "snappy-raw": (SNAPPY, _snappy_raw),
    "lz4": (LZ4, _lz4),
    "zstd": (ZSTD, _zstd),
}


def bomb(codec: str, records: int, value_bytes: int) -> bytes:
    """A v2 batch at :data:`BASE_OFFSET` of ``records`` records of ``value_bytes`` zeros, compressed with ``codec``."""
    code, compress = CODECS[codec]
    builder = MemoryRecordsBuilder(2, 0, 1 << 30)
    for _ in range(records):
        builder.append(TIMESTAMP, None, b"")
    builder.close()
    batch = bytearray(builder.buffer()[:_HEADER]) + compress(_zero_records(records, value_bytes))
    struct.pack_into(">q", batch, 0, BASE_OFFSET)
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    batch[DefaultRecordBatch.ATTRIBUTES_OFFSET + 1] |= code
    crc = calc_crc32c(memoryview(batch)[DefaultRecordBatch.ATTRIBUTES_OFFSET :])
    struct.pack_into(">I", batch, DefaultRecordBatch.CRC_OFFSET, crc)
    return bytes(batch)


def read_measured(data: bytes, bound: BatchBound | None = None) -> tuple[list[Any], int]:
    """The records QuickPartitionRecords reads from ``data`` (from the base offset), and the most memory it took."""
    records = QuickPartitionRecords(BASE_OFFSET, PARTITION, MemoryRecords(data), check_crcs=True, bound=bound)
    tracemalloc.start()
    try:
        read = records.take()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return read, peak


def read_by_kafka_python(data: bytes) -> list[Any]:
    return Fetcher.PartitionRecords(BASE_OFFSET, PARTITION, MemoryRecords(data), check_crcs=True).take()


@pytest.mark.parametrize("codec", CODECS)
def test_a_batch_past_its_bound_is_not_decompressed_and_each_offset_stands_in(codec: str) -> None:
    data = bomb(codec, 4, 4 * _MIB)  # 16 MiB of zeros; a bound of 4 x 128 KiB
    bound = BatchBound(largest_value=128 * 1024 - RECORD_OVERHEAD_BYTES)

    read, peak = read_measured(data, bound)

    assert [r.offset for r in read] == [1000, 1001, 1002, 1003]
    assert all(isinstance(r, UnreadRecord) for r in read)
    assert {(r.topic, r.partition, r.timestamp, r.key, r.value, len(r.headers)) for r in read} == {
        ("documents", 1, TIMESTAMP, None, None, 0)
    }
    detail = read[0].refusal.detail
    assert read[0].refusal.reason == BATCH_TOO_LARGE
    assert "documents partition 1 at offsets 1000..1003" in detail
    assert codec.split("-")[0] in detail and f"{len(data)} bytes" in detail and "more than 524288 bytes" in detail
    # Nothing near the batch's 16 MiB was made: at most the bound and a slice of the decoder's output.
    assert peak < 2 * _MIB + len(data)


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd"])
def test_a_bomb_of_half_a_gibibyte_takes_the_cap_at_most(codec: str) -> None:
    data = bomb(codec, 4, 128 * _MIB)
    assert len(data) < 3 * _MIB  # fits a broker's message limit (max.message.bytes) of a few MB

    read, peak = read_measured(data)  # the bound of the stage's own topics: the cap, 64 MiB

    assert [type(r) for r in read] == [UnreadRecord] * 4
    assert peak < 2 * BATCH_BYTES_CAP


@pytest.mark.parametrize("codec", CODECS)
def test_a_batch_exactly_at_its_bound_is_read_one_byte_less_is_not(codec: str) -> None:
    data = bomb(codec, 1, 3 * _MIB)
    size = len(decompressed_within(CODECS[codec][0], data[_HEADER:], 1 << 30) or b"")
    exact = BatchBound(size - RECORD_OVERHEAD_BYTES)

    assert read_measured(data, exact)[0] == read_by_kafka_python(data)
    assert [type(r) for r in read_measured(data, BatchBound(size - RECORD_OVERHEAD_BYTES - 1))[0]] == [UnreadRecord]


def _builder_batch(code: int, values: list[bytes]) -> bytes:
    builder = MemoryRecordsBuilder(2, code, 1 << 30)
    for i, value in enumerate(values):
        builder.append(TIMESTAMP + i, f"key-{i}".encode(), value, [("h", b"1")])
    builder.close()
    batch = bytearray(builder.buffer())
    struct.pack_into(">q", batch, 0, BASE_OFFSET)  # outside the CRC
    return bytes(batch)


@pytest.mark.parametrize("code", [GZIP, SNAPPY, LZ4, ZSTD], ids=["gzip", "snappy", "lz4", "zstd"])
def test_large_legitimate_batches_are_read_as_kafka_python_reads_them(code: int) -> None:
    """Documents of up to max_document_bytes (1 MiB), compressible and not, 18 MiB in all."""
    words = b" ".join(b"word%d" % (i % 5000) for i in range(150_000))
    values = [words[: 1 << 20], os.urandom(1 << 20), *(words[i * 1000 : i * 1000 + 900_000] for i in range(16))]
    data = _builder_batch(code, values) + _builder_batch(code, [b"a small one"])

    read, _ = read_measured(data, BatchBound(1 << 20))

    assert read == read_by_kafka_python(data)
    assert len(read) == 19 and not any(isinstance(r, UnreadRecord) for r in read)


def test_snappy_lengths_are_read_from_the_blocks_without_decompressing() -> None:
    payload = os.urandom(70_000) + bytes(100_000)
    assert snappy_length(snappy_encode(payload, xerial_compatible=True, xerial_blocksize=32 * 1024)) == len(payload)
    assert snappy_length(bytes(snappy.compress(payload))) == len(payload)
    assert decompressed_within(SNAPPY, bytes(snappy.compress(payload)), len(payload) - 1) is None


def test_an_unread_record_is_dead_lettered_with_its_batch_named() -> None:
    record = read_measured(bomb("zstd", 2, _MIB), BatchBound(1024))[0][1]

    letter = read_record(record, InputReading())

    assert (letter.reason, letter.detail) == (BATCH_TOO_LARGE, record.refusal.detail)
    assert (letter.source.partition, letter.source.offset) == (1, 1001)
    assert BATCH_TOO_LARGE in DEAD_LETTER_REASONS and BATCH_TOO_LARGE not in REASONS
