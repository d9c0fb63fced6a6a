"""Records encoded a batch at a time give the very bytes kafka-python's own builder gives, record by record."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder
from kafka.record.util import encode_varint

from stream_dedup.kafka.record_batches import encoded_batches, filled_builder, zigzag_varint
from stream_dedup.kafka.record_fit import OutgoingRecord

TIMESTAMP = 1_790_000_000_123
#: kafka-python's codes: none and zstd (the stage's).
COMPRESSIONS = [0, 4]

_bytes = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=8180, max_size=8200))
_headers = st.lists(st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=9))), max_size=3)
_record = st.builds(OutgoingRecord, _bytes, _bytes, _headers)
_small_record = st.builds(OutgoingRecord, st.binary(max_size=3), st.binary(max_size=3), st.just([]))
#: Many small records too: offset deltas from 64 on take two bytes, and a batch cut resets them.
_records = st.one_of(
    st.lists(_record, min_size=1, max_size=40),
    st.lists(_small_record, min_size=1, max_size=400),
)


def reference_builders(records: list[OutgoingRecord], compression: int, batch_size: int) -> list[bytearray]:
    """What kafka-python's producer builds: append each record, start a new batch when one refuses it."""
    built = []
    builder = MemoryRecordsBuilder(2, compression, batch_size)
    for record in records:
        if builder.append(TIMESTAMP, record.key, record.value, record.headers) is None:
            built.append(builder)
            builder = MemoryRecordsBuilder(2, compression, batch_size)
            assert builder.append(TIMESTAMP, record.key, record.value, record.headers) is not None
    built.append(builder)
    for b in built:
        b.close()
    return [b.buffer() for b in built]


def ours(records: list[OutgoingRecord], compression: int, batch_size: int) -> list[bytearray]:
    batches = encoded_batches(records, batch_size)
    built = [filled_builder(batch, TIMESTAMP, 2, compression, batch_size) for batch in batches]
    for b in built:
        b.close()
    return [b.buffer() for b in built]


@settings(max_examples=300, deadline=None)
@given(_records, st.sampled_from(COMPRESSIONS), st.integers(61, 20_000))  # down to a header alone: one record a batch
def test_batches_equal_kafka_pythons_byte_for_byte(records: list[OutgoingRecord], compression: int, size: int) -> None:
    assert ours(records, compression, size) == reference_builders(records, compression, size)


@pytest.mark.parametrize("compression", COMPRESSIONS)
def test_a_transactions_verdicts_read_back_in_order(compression: int) -> None:
    records = [OutgoingRecord(f"doc-{i}".encode(), b'{"verdict":"unique"}' * (i % 7), []) for i in range(3000)]
    batches = ours(records, compression, 16 * 1024)
    assert len(batches) > 1
    read = [r for buffer in batches for batch in MemoryRecords(bytes(buffer)) for r in batch]
    assert [(r.key, r.value, r.timestamp) for r in read] == [(r.key, r.value, TIMESTAMP) for r in records]
    assert [r.offset for r in read[:3]] == [0, 1, 2]  # offsets restart at 0 in every batch


@settings(max_examples=500, deadline=None)
@given(st.integers(-(1 << 63), (1 << 63) - 1))
def test_varints_are_kafkas(value: int) -> None:
    expected = bytearray()
    encode_varint(value, expected.append)
    assert zigzag_varint(value) == bytes(expected)
