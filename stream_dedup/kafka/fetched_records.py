"""Reading fetched record batches into consumer records in one tight pass per batch.

kafka-python decodes every fetched record through several calls: a record
object per record (each of its seven varints read by a general function),
the batch's iterator protocol, a CRC check that v2 records do not have,
two deserializer calls and a size sum for the headers. That is about 4 µs of
Python per record, the largest single cost of a stage's process, paid again
by every shard for every record of the sequenced topic. Here a batch's
records are read in one loop, with the one-byte varints (nearly all of them)
read in place: about half the time.

Only the reading of the records inside a v2 batch changes. Which batches are
returned stays kafka-python's rule, mirrored step by step from its
``_unpack_records`` and calling its own helpers: the batch CRC, the aborted
transactions of ``read_committed``, control batches, and the next fetch
offset after each record (a poll can stop in the middle of a batch). One
reading differs: a header name that is not UTF-8 is read with U+FFFD in
place of its bad bytes, as Java's clients read it, where kafka-python
raises (and so would fail the partition's every fetch, for ever). Batches
of other formats (v0, v1), and consumers with deserializers, are read by
kafka-python as before. What this touches is private to kafka-python (the
fetcher's record class, the batches' buffers): pyproject pins its minor
version, and tests/kafka/test_fetched_records.py holds the records equal to
kafka-python's own for batches of every shape.

A compressed v2 batch is decompressed within a bound, not whole as
kafka-python does: one that would decompress past it is not read, and its
offsets come out as :class:`~stream_dedup.kafka.oversized_batches.UnreadRecord`
stand-ins, dead-lettered by the stage (:mod:`stream_dedup.kafka.oversized_batches`).
v0 and v1 batches (which Kafka 4 brokers no longer accept) and consumers with
deserializers are decompressed by kafka-python, unbounded.
"""

from collections.abc import Iterator
from functools import partial
from typing import Any

from kafka import KafkaConsumer
from kafka.consumer.fetcher import ConsumerRecord, Fetcher
from kafka.errors import CorruptRecordError
from kafka.protocol.consumer import IsolationLevel
from kafka.record.util import decode_varint

from stream_dedup.kafka.bounded_decompression import decompressed_within
from stream_dedup.kafka.oversized_batches import BatchBound, unread_records


def read_fetches_quickly(consumer: KafkaConsumer, bound: BatchBound | None = None) -> KafkaConsumer:
    """Make ``consumer`` read the record batches it fetches with :class:`QuickPartitionRecords`; returns it.

    ``bound``: how far its batches are decompressed (by default, as far as the
    stage's own records need). Anything else standing in for a consumer (the
    tests' fakes) is returned as it is.
    """
    if isinstance(consumer, KafkaConsumer):
        # The fetcher makes its records with ``self.PartitionRecords(...)``: this instance's attribute wins.
        consumer._fetcher.PartitionRecords = partial(QuickPartitionRecords, bound=bound or BatchBound())
    return consumer


class QuickPartitionRecords(Fetcher.PartitionRecords):
    """kafka-python's records of one fetched partition, with the records of v2 batches read by :meth:`_records_of`."""

    def __init__(self, *args: Any, bound: BatchBound | None = None, **options: Any) -> None:
        """kafka-python's arguments, and ``bound``: how far a compressed batch is decompressed."""
        self.bound = bound or BatchBound()
        super().__init__(*args, **options)

    def _unpack_records(self, tp: Any, records: Any, key_deserializer: Any, value_deserializer: Any) -> Iterator[Any]:
        if key_deserializer is not None or value_deserializer is not None:
            yield from super()._unpack_records(tp, records, key_deserializer, value_deserializer)
            return
        batch = records.next_batch()
        last_batch = None
        while batch is not None:
            last_batch = batch
            if self.check_crcs and not batch.validate_crc():
                raise CorruptRecordError(
                    f"Record batch for partition {self.topic_partition} at offset {batch.base_offset} failed crc check"
                )
            if batch.magic != 2:
                yield from self._records_read_by_kafka_python(tp, batch)
                batch = records.next_batch()
                continue
            self.leader_epoch = batch.leader_epoch
            if self.isolation_level == IsolationLevel.READ_COMMITTED and batch.has_producer_id():
                self._consume_aborted_transactions_up_to(batch.last_offset)
                if self._contains_abort_marker(batch):
                    self.aborted_producer_ids.discard(batch.producer_id)
                elif self._is_batch_aborted(batch):
                    self.next_fetch_offset = batch.next_offset
                    batch = records.next_batch()
                    continue
            if batch.is_control_batch:
                self.next_fetch_offset = batch.next_offset
                batch = records.next_batch()
                continue
            yield from self._records_of(tp, batch)
            batch = records.next_batch()
        # v2 keeps a batch's last offset even when compaction removed its last record:
        # the next fetch starts after the batch, not at the removed record.
        if last_batch is not None and last_batch.magic == 2:
            self.next_fetch_offset = last_batch.next_offset
        self.drain()

    def _records_read_by_kafka_python(self, tp: Any, batch: Any) -> Iterator[Any]:
        """The records of a batch not of format v2, read record by record by kafka-python."""
        for record in batch:
            if self.check_crcs and not record.validate_crc():
                raise CorruptRecordError(
                    f"Record for partition {self.topic_partition} at offset {record.offset} failed crc check"
                )
            key, value, headers = record.key, record.value, record.headers
            self.records_read += 1
            self.bytes_read += record.size_in_bytes
            self.next_fetch_offset = record.offset + 1
            yield ConsumerRecord(
                tp.topic,
                tp.partition,
                self.leader_epoch,
                record.offset,
                record.timestamp,
                record.timestamp_type,
                key,
                value,
                headers,
                record.checksum,
                len(key) if key is not None else -1,
                len(value) if value is not None else -1,
                _header_size(headers) if headers else -1,
            )

    def _records_of(self, tp: Any, batch: Any) -> Iterator[Any]:
        """The records of a v2 batch, in order, the next fetch offset set after each.

        The layout of a record: its length (varint), attributes (one byte,
        unused: 0), timestamp delta (varint), offset delta (varint), key and
        value (each a varint length, -1 for null, then the bytes), the header
        count (varint) and per header a key (varint length, UTF-8) and a
        value (like the record's).
        """
        topic, partition, epoch = tp.topic, tp.partition, self.leader_epoch
        if batch.compression_type == batch.CODEC_NONE:
            data, pos = bytes(batch._buffer), batch._pos
        else:
            batch._assert_has_codec(batch.compression_type)  # kafka-python's UnsupportedCodecError (codec_check)
            limit = self.bound.limit(batch._num_records)
            decompressed = decompressed_within(batch.compression_type, bytes(batch._buffer[batch._pos :]), limit)
            if decompressed is None:
                for record in unread_records(topic, partition, epoch, batch, limit):
                    self.records_read += 1
                    self.next_fetch_offset = record.offset + 1
                    yield record
                return
            data, pos = decompressed, 0
        base_offset, timestamp_type = batch.base_offset, batch.timestamp_type
        log_append_time = timestamp_type == batch.LOG_APPEND_TIME
        first_timestamp = batch.max_timestamp if log_append_time else batch.first_timestamp
        #: Bytes of the records read, as kafka-python counts them (their lengths).
        read = 0
        try:
            for _ in range(batch._num_records):
                byte = data[pos]
                length, pos = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else decode_varint(data, pos)
                end = pos + length
                read += length
                # The attributes (unused): read as kafka-python reads them, a varint.
                pos = pos + 1 if data[pos] < 0x80 else decode_varint(data, pos)[1]
                byte = data[pos]
                delta, pos = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else decode_varint(data, pos)
                timestamp = first_timestamp if log_append_time else first_timestamp + delta
                byte = data[pos]
                delta, pos = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else decode_varint(data, pos)
                offset = base_offset + delta
                byte = data[pos]
                key_size, pos = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else decode_varint(data, pos)
                key = None
                if key_size >= 0:
                    key, pos = data[pos : pos + key_size], pos + key_size
                byte = data[pos]
                value_size, pos = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else decode_varint(data, pos)
                value = None
                if value_size >= 0:
                    value, pos = data[pos : pos + value_size], pos + value_size
                byte = data[pos]
                count, pos = ((byte >> 1) ^ -(byte & 1), pos + 1) if byte < 0x80 else decode_varint(data, pos)
                headers: list[tuple[str, bytes | None]] = []
                header_size = -1
                if count:
                    pos, header_size = _read_headers(data, pos, count, headers)
                if pos != end:
                    raise CorruptRecordError(
                        f"Invalid record size: expected to read {length} bytes in record payload, "
                        f"but instead read {pos - end + length}"
                    )
                self.records_read += 1
                self.next_fetch_offset = offset + 1
                yield ConsumerRecord(
                    topic,
                    partition,
                    epoch,
                    offset,
                    timestamp,
                    timestamp_type,
                    key,
                    value,
                    headers,
                    None,
                    key_size if key is not None else -1,
                    value_size if value is not None else -1,
                    header_size,
                )
        except (ValueError, IndexError) as error:
            raise CorruptRecordError(f"Found invalid record structure: {error!r}") from error
        finally:
            self.bytes_read += read
        if pos != len(data):
            raise CorruptRecordError(f"{len(data) - pos} unconsumed bytes after all records consumed")


def _read_headers(data: bytes, pos: int, count: int, headers: list[tuple[str, bytes | None]]) -> tuple[int, int]:
    """Read ``count`` headers at ``pos`` into ``headers``: the position after them, their size (kafka-python's sum)."""
    if count < 0:
        raise CorruptRecordError(f"Found invalid number of record headers {count}")
    for _ in range(count):
        name_size, pos = decode_varint(data, pos)
        if name_size < 0:
            raise CorruptRecordError(f"Invalid negative header key size {name_size}")
        # Java's clients read a name that is not UTF-8 (librdkafka and Go clients write any bytes) with U+FFFD
        # for each bad sequence, as here; kafka-python raises, which would fail every fetch of the partition.
        name, pos = data[pos : pos + name_size].decode("utf-8", "replace"), pos + name_size
        value_size, pos = decode_varint(data, pos)
        value = None
        if value_size >= 0:
            value, pos = data[pos : pos + value_size], pos + value_size
        headers.append((name, value))
    return pos, _header_size(headers)


def _header_size(headers: list[tuple[str, bytes | None]]) -> int:
    """The size of ``headers`` as kafka-python counts it: their names in UTF-8 and their values."""
    return sum(len(name.encode("utf-8")) + (len(value) if value is not None else 0) for name, value in headers)
