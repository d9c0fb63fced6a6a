"""Kafka's key hash of many keys at once equals the Java client's, key by key."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.partitioner.default import murmur2

from stream_dedup.kafka.murmur2 import murmur2_many, partitions_of

#: Utils.murmur2 of these keys, from Apache Kafka's own UtilsTest (signed, as Java gives them).
JAVA_HASHES = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("copies", [1, 20])  # one at a time, and in bulk (many keys of one length)
def test_the_java_clients_hashes(copies: int) -> None:
    keys = [key for key in JAVA_HASHES for _ in range(copies)]
    signed = [h - (1 << 32) if h >= 1 << 31 else h for h in murmur2_many(keys).tolist()]
    assert signed == [JAVA_HASHES[key] for key in keys]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(max_size=40), max_size=60),
    st.integers(0, 20),
    st.binary(min_size=0, max_size=23),
    st.integers(1, 1000),
)
def test_every_key_hashes_as_kafka_python_hashes_it_alone(
    mixed: list[bytes], copies: int, repeated: bytes, partitions: int
) -> None:
    # Mixed lengths, plus enough keys of one length (of every length mod 4) to be hashed in bulk.
    keys = [*mixed, *(repeated[:-1] + bytes([i % 256]) if repeated else b"" for i in range(copies))]
    assert murmur2_many(keys).tolist() == [murmur2(key) for key in keys]
    assert partitions_of(keys, partitions).tolist() == [(murmur2(key) & 0x7FFFFFFF) % partitions for key in keys]


def test_ids_of_a_batch() -> None:
    keys = [f"doc-{i}".encode() for i in range(5000)]  # lengths 5 to 8: every tail, all in bulk
    assert murmur2_many(keys).tolist() == [murmur2(key) for key in keys]
