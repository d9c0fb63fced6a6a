"""Handing a partition's records to kafka-python's producer as whole record batches.

kafka-python's ``send`` spends about 10 µs of Python per record: argument
checks, the partitioner, a size estimate, the transaction's partition set, a
lock, the record's encoding, and a future whose callback runs again when the
batch is acknowledged. That was a tenth of the stage's process. A transaction's
records for one partition are all known at once, so here they are encoded in
one pass, in Kafka's v2 record format (per record: its length, attributes,
timestamp and offset deltas, key, value and headers, every length a zigzag
varint). They go to the producer's accumulator as complete batches of its own
``batch_size``, each in kafka-python's own ``MemoryRecordsBuilder``.

The batch header, the CRC, compression, sequence numbers, retries, splitting,
the transaction and the delivery all stay kafka-python's. What this module
touches is private to kafka-python (its accumulator, the builders' fields):
pyproject pins its minor version, and tests/kafka/test_record_batches.py holds
the batches byte for byte equal to the ones kafka-python's ``append`` builds.
"""

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from kafka import KafkaProducer, TopicPartition
from kafka.errors import IllegalStateError, UnsupportedVersionError
from kafka.producer.producer_batch import ProducerBatch
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecordsBuilder

from stream_dedup.kafka.record_fit import Headers, OutgoingRecord

#: Bytes before a batch's first record (its header).
_HEADER_BYTES: int = DefaultRecordBatchBuilder.HEADER_STRUCT.size
#: A record's attributes (none) and timestamp delta (0: one timestamp per call).
_ATTRIBUTES_AND_TIMESTAMP = b"\x00\x00"
#: The varint of -1: no key, no value.
_NULL = b"\x01"


def zigzag_varint(value: int) -> bytes:
    """``value`` as Kafka writes a signed varint: zigzag, then 7 bits a byte, low first."""
    unsigned = (value << 1) ^ (value >> 63)
    out = bytearray()
    while unsigned > 0x7F:
        out.append(0x80 | (unsigned & 0x7F))
        unsigned >>= 7
    out.append(unsigned)
    return bytes(out)


#: Varints of 0 .. 8,191 (one or two bytes): every offset delta and most lengths.
_VARINTS = tuple(zigzag_varint(n) for n in range(1 << 13))


def _varint(value: int) -> bytes:
    return _VARINTS[value] if value < len(_VARINTS) else zigzag_varint(value)


@dataclass(frozen=True)
class EncodedBatch:
    """One batch's records, encoded back to back: ``count`` of them, the largest taking ``largest`` bytes."""

    body: bytes
    count: int
    largest: int


def encoded_batches(records: Sequence[OutgoingRecord], batch_size: int) -> Iterator[EncodedBatch]:
    """Encode ``records`` in order, cut where kafka-python's builder would start a new batch.

    A batch takes records while its header and records stay within
    ``batch_size``, and always takes its first record.
    """
    pieces: list[bytes] = []
    size = count = largest = 0
    for record in records:
        key, value, headers = record
        key_part = (_varint(len(key)), key) if key is not None else (_NULL, b"")
        value_part = (_varint(len(value)), value) if value is not None else (_NULL, b"")
        header_part = _headers(headers) if headers else b"\x00"
        # Everything but the offset delta, which depends on the batch the record lands in.
        fixed = 2 + len(key_part[0]) + len(key_part[1]) + len(value_part[0]) + len(value_part[1]) + len(header_part)
        delta, length = _delta_and_length(count, fixed)
        if count and _HEADER_BYTES + size + len(length) + fixed + len(delta) > batch_size:
            yield EncodedBatch(b"".join(pieces), count, largest)
            pieces, size, count, largest = [], 0, 0, 0
            delta, length = _delta_and_length(0, fixed)
        pieces += (length, _ATTRIBUTES_AND_TIMESTAMP, delta, *key_part, *value_part, header_part)
        required = len(length) + fixed + len(delta)
        size += required
        count += 1
        largest = max(largest, required)
    if count:
        yield EncodedBatch(b"".join(pieces), count, largest)


def _delta_and_length(offset_delta: int, fixed: int) -> tuple[bytes, bytes]:
    """A record's offset delta varint, and its length varint (the record's bytes after it)."""
    delta = _varint(offset_delta)
    return delta, _varint(fixed + len(delta))


def _headers(headers: Headers) -> bytes:
    out = [_varint(len(headers))]
    for name, value in headers:
        encoded = name.encode("utf-8")
        out += (_varint(len(encoded)), encoded)
        out += (_varint(len(value)), value) if value is not None else (_NULL,)
    return b"".join(out)


def filled_builder(batch: EncodedBatch, timestamp_ms: int, magic: int, compression: int, batch_size: int) -> Any:
    """A kafka-python ``MemoryRecordsBuilder`` holding ``batch``, as if its records were appended one by one."""
    records = MemoryRecordsBuilder(magic, compression, batch_size)
    inner = records._builder
    inner._buffer += batch.body
    inner._first_timestamp = inner._max_timestamp = timestamp_ms
    inner._last_offset = batch.count - 1
    inner._num_records = batch.count
    records._next_offset = batch.count
    return records


def append_batches(producer: KafkaProducer, partition: TopicPartition, records: Sequence[OutgoingRecord]) -> None:
    """Queue ``records`` for ``partition`` after whatever the producer already queued there, in order.

    The records share one timestamp (now). The partition joins the open
    transaction as ``send`` would add it. Records sent afterwards with ``send``
    go after these.
    """
    accumulator = producer._accumulator
    config = accumulator.config
    if config["message_version"] < 2:
        raise UnsupportedVersionError("record batches need Kafka's v2 message format (brokers from 0.11 on)")
    timestamp_ms = int(time.time() * 1000)
    now = time.monotonic()
    batches = []
    for encoded in encoded_batches(records, config["batch_size"]):
        builder = filled_builder(
            encoded, timestamp_ms, config["message_version"], config["compression_attrs"], config["batch_size"]
        )
        batch = ProducerBatch(partition, builder, now=now)
        batch.max_record_size = encoded.largest
        batches.append(batch)
    transactions = producer._transaction_manager
    if transactions is not None and transactions.is_transactional():
        transactions.maybe_add_partition_to_transaction(partition)
    accumulator._appends_in_progress.increment()
    try:
        with accumulator._tp_lock(partition):
            if accumulator._closed:
                raise IllegalStateError("the producer is closed")
            accumulator._batches[partition].extend(batches)
            for batch in batches:
                accumulator._incomplete.add(batch)
    finally:
        accumulator._appends_in_progress.decrement()
    producer._sender.wakeup()
