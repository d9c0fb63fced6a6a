"""Fetched batches read by QuickPartitionRecords give exactly kafka-python's own consumer records.

The batches are built as a broker returns them: data batches of any
compression, transactional ones, commit and abort markers (control batches,
built here byte for byte), LOG_APPEND_TIME batches, a fetch starting inside a
batch, polls stopping mid-batch, and corrupted bytes.
"""

import struct
from typing import Any, NamedTuple

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from kafka.consumer.fetcher import Fetcher
from kafka.errors import CorruptRecordError
from kafka.protocol.consumer import IsolationLevel
from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.record.util import calc_crc32c
from kafka.structs import TopicPartition

from stream_dedup.kafka.fetched_records import QuickPartitionRecords

PARTITION = TopicPartition("documents", 2)
TIMESTAMP = 1_790_000_000_123
#: kafka-python's codes: none, gzip, zstd.
COMPRESSIONS = [0, 1, 4]


class AbortedTransaction(NamedTuple):
    """What a fetch response lists per aborted transaction (kafka-python reads these two fields)."""

    producer_id: int
    first_offset: int


class Data(NamedTuple):
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]
    compression: int
    producer_id: int  # -1: not transactional
    log_append_time: bool


class Marker(NamedTuple):
    producer_id: int
    abort: bool


_bytes = st.one_of(st.none(), st.binary(max_size=20), st.binary(min_size=60, max_size=70), st.binary(max_size=9000))
_headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=9))), max_size=3)
#: Timestamp deltas of one and several varint bytes, negative ones too.
_record = st.tuples(st.integers(-(10**6), 10**10), _bytes, _bytes, _headers)
_data = st.builds(
    Data,
    st.lists(_record, min_size=1, max_size=90),
    st.sampled_from(COMPRESSIONS),
    st.sampled_from([-1, -1, 7, 8]),
    st.booleans(),
)
_segments = st.lists(st.one_of(_data, _data, st.builds(Marker, st.sampled_from([7, 8]), st.booleans())), max_size=7)


def _with_attributes(batch: bytearray, bits: int) -> bytearray:
    """``batch`` with attribute ``bits`` set and its CRC made right again."""
    batch[DefaultRecordBatch.ATTRIBUTES_OFFSET + 1] |= bits
    crc = calc_crc32c(memoryview(batch)[DefaultRecordBatch.ATTRIBUTES_OFFSET :])
    struct.pack_into(">I", batch, DefaultRecordBatch.CRC_OFFSET, crc)
    return batch


def _built(segment: Data | Marker, offset: int) -> bytearray:
    """One batch as a broker returns it: from ``offset`` (the producer leaves it 0; the broker sets it)."""
    transactional = segment.producer_id != -1
    builder = MemoryRecordsBuilder(
        2,
        segment.compression if isinstance(segment, Data) else 0,
        1 << 30,
        transactional=transactional,
        producer_id=segment.producer_id,
        producer_epoch=0 if transactional else -1,
        base_sequence=0 if transactional else -1,
    )
    bits = 0
    if isinstance(segment, Marker):
        # A control record: key (version, type: 0 abort, 1 commit), value (version, coordinator epoch).
        builder.append(TIMESTAMP, struct.pack(">hh", 0, 0 if segment.abort else 1), struct.pack(">hi", 0, 3), [])
        bits = DefaultRecordBatch.CONTROL_MASK
    else:
        for delta, key, value, headers in segment.records:
            builder.append(TIMESTAMP + delta, key, value, headers)
        bits = DefaultRecordBatch.TIMESTAMP_TYPE_MASK if segment.log_append_time else 0
    builder.close()
    batch = builder.buffer()
    struct.pack_into(">q", batch, 0, offset)  # the base offset is outside the CRC
    return _with_attributes(batch, bits) if bits else batch


def fetched(segments: list[Data | Marker], base: int) -> tuple[bytes, list[AbortedTransaction], int]:
    """The bytes of a fetch holding ``segments`` from offset ``base``, its aborted transactions, the end offset."""
    parts: list[bytes] = []
    aborted: list[AbortedTransaction] = []
    open_since: dict[int, int] = {}
    offset = base
    for segment in segments:
        parts.append(bytes(_built(segment, offset)))
        if isinstance(segment, Marker):
            started = open_since.pop(segment.producer_id, offset)
            if segment.abort:
                aborted.append(AbortedTransaction(segment.producer_id, started))
        elif segment.producer_id != -1:
            open_since.setdefault(segment.producer_id, offset)
        offset += 1 if isinstance(segment, Marker) else len(segment.records)
    return b"".join(parts), aborted, offset


def read_all(kind: Any, data: bytes, start: int, aborted: list[AbortedTransaction], **options: Any) -> list[Any]:
    """Each take() of polls of at most ``step`` records until drained, with the next fetch offset after it."""
    step = options.pop("step", None)
    records = kind(start, PARTITION, MemoryRecords(data), aborted_transactions=aborted, **options)
    takes: list[Any] = []
    while records:  # until drained, as the fetcher asks
        try:
            takes.append((records.take(step), records.next_fetch_offset))
        except CorruptRecordError as error:
            return [*takes, ("corrupt", type(error).__name__)]
    return [*takes, (records.records_read, records.bytes_read)]


@settings(max_examples=300, deadline=None)
@given(
    segments=_segments,
    base=st.sampled_from([0, 5, 1 << 40]),
    skip=st.integers(0, 40),
    step=st.sampled_from([None, 1, 7, 500]),
    committed=st.booleans(),
)
def test_records_equal_kafka_pythons_for_every_kind_of_batch(
    segments: list[Data | Marker], base: int, skip: int, step: int | None, committed: bool
) -> None:
    data, aborted, end = fetched(segments, base)
    start = min(base + skip, end)
    isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    options = {"isolation_level": isolation, "check_crcs": True, "step": step}
    expected = read_all(Fetcher.PartitionRecords, data, start, aborted, **options)
    assert read_all(QuickPartitionRecords, data, start, aborted, **options) == expected


def test_an_aborted_transaction_is_left_out_and_a_committed_one_read() -> None:
    """The case the hypothesis test must reach, spelled out: it fails if aborted batches are read."""
    segments: list[Data | Marker] = [
        Data([(0, b"a", b"aborted", [])], 0, 7, False),
        Data([(0, b"b", b"plain", [])], 0, -1, False),
        Marker(7, abort=True),
        Data([(0, b"c", b"committed", [("h", b"1")])], 4, 8, False),
        Marker(8, abort=False),
    ]
    data, aborted, _ = fetched(segments, 100)
    records = QuickPartitionRecords(
        100, PARTITION, MemoryRecords(data), isolation_level=IsolationLevel.READ_COMMITTED, aborted_transactions=aborted
    ).take()
    read = [(r.offset, r.value, r.headers) for r in records]
    assert read == [(101, b"plain", []), (103, b"committed", [("h", b"1")])]


#: Two batches: a header name of the first made not UTF-8, the second's codec bits set to zstd (found in CI).
_NAME_THEN_CODEC = [Data([(0, None, b"\x00" * 6, [("0\U00010000", None)])], 0, -1, False)] * 2


@settings(max_examples=300, deadline=None)
@given(segments=st.lists(_data, min_size=1, max_size=3), flips=st.lists(st.tuples(st.integers(0), st.integers(1, 255))))
@example(segments=_NAME_THEN_CODEC, flips=[(14, 128), (42, 4)])
def test_corrupted_records_fail_as_kafka_pythons_do(segments: list[Data], flips: list[tuple[int, int]]) -> None:
    """Bytes changed past the CRC check (it is off): the same records, or the same CorruptRecordError."""
    data = bytearray(fetched(list(segments), 0)[0])
    header = DefaultRecordBatch.HEADER_STRUCT.size
    for position, change in flips:
        data[header + position % (len(data) - header)] ^= change
    options = {"isolation_level": IsolationLevel.READ_UNCOMMITTED, "check_crcs": False}
    try:
        expected = read_all(Fetcher.PartitionRecords, bytes(data), 0, [], **options)
    except Exception:  # kafka-python's own reading fails otherwise (a header it cannot parse)
        return
    try:
        read: list[Any] | Exception = read_all(QuickPartitionRecords, bytes(data), 0, [], **options)
    except Exception as error:  # allowed below, after the one divergence
        read = error
    if read != expected:
        # The one reading that differs: a header name made not UTF-8 fails kafka-python's, not this one, which
        # reads on, and may then meet bytes changed further on that kafka-python's never reached (a codec, a size).
        records = Fetcher.PartitionRecords(0, PARTITION, MemoryRecords(bytes(data)), **options)
        with pytest.raises(CorruptRecordError, match="UnicodeDecodeError"):
            while records:
                records.take()


def test_a_header_name_that_is_not_utf8_is_read_as_javas_clients_read_it() -> None:
    data = bytearray(fetched([Data([(0, b"k", b"value", [("ab", b"1")])], 0, -1, False)], 0)[0])
    at = data.rindex(b"ab\x021")
    data[at : at + 2] = b"\xffb"  # kafka-python's reading raises, failing every fetch of the partition
    records = QuickPartitionRecords(0, PARTITION, MemoryRecords(bytes(data)), check_crcs=False).take()
    assert [r.headers for r in records] == [[("\ufffdb", b"1")]]


def test_a_corrupted_batch_fails_its_crc_check() -> None:
    data = bytearray(fetched([Data([(0, b"k", b"value", [])], 0, -1, False)], 0)[0])
    data[-2] ^= 1
    with pytest.raises(CorruptRecordError, match="failed crc check"):
        QuickPartitionRecords(0, PARTITION, MemoryRecords(bytes(data)), check_crcs=True).take()


def test_consumers_with_deserializers_are_read_by_kafka_python() -> None:
    data, _, _ = fetched([Data([(0, b"k", b"value", [])], 0, -1, False)], 0)

    class Upper:
        def deserialize(self, topic: str, headers: Any, data: bytes) -> bytes:
            return data.upper()

    records = QuickPartitionRecords(0, PARTITION, MemoryRecords(data), value_deserializer=Upper()).take()
    assert [r.value for r in records] == [b"VALUE"]
