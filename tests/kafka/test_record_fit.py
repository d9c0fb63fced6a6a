"""Every outgoing record fits its topic: as it is, compressed, or as a truncated copy that says so."""

import os

import pytest
import xxhash
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import KafkaProducer

from stream_dedup.kafka.record_fit import (
    MIN_MESSAGE_BYTES,
    ORIGINAL_BYTES_HEADER,
    ORIGINAL_HASH_HEADER,
    TRUNCATED_HEADER,
    OutgoingRecord,
    SizeLimit,
    fits,
    fitted,
)

ADDED = [("stream-dedup-reason", b"too_large"), ("stream-dedup-error", b"e" * 300)]
headers = st.lists(st.tuples(st.text(max_size=50), st.binary(max_size=5000)), max_size=20)


@settings(max_examples=60, deadline=None)
@given(
    key=st.none() | st.binary(max_size=40_000),
    size=st.integers(0, 300_000),
    compressible=st.booleans(),
    original=headers,
    message_bytes=st.integers(MIN_MESSAGE_BYTES, 200_000),
)
def test_a_dead_letter_always_fits_and_a_cut_one_says_how_to_find_the_original(
    key: bytes | None, size: int, compressible: bool, original: list[tuple[str, bytes]], message_bytes: int
) -> None:
    value = b"a" * size if compressible else os.urandom(size)
    limit = SizeLimit(message_bytes)
    sent = fitted(key, value, original, ADDED, limit)
    assert fits(sent, limit)
    extra = dict(sent.headers)
    assert extra["stream-dedup-reason"] == b"too_large"  # the stage's headers are never dropped
    if TRUNCATED_HEADER not in extra:
        assert sent == OutgoingRecord(key, value, [*original, *ADDED])
    else:
        assert value.startswith(sent.value or b"")
        assert extra[ORIGINAL_BYTES_HEADER] == str(size).encode()
        assert extra[ORIGINAL_HASH_HEADER] == xxhash.xxh3_128_hexdigest(value).encode()


def test_a_compressible_megabyte_fits_a_one_megabyte_topic_uncut() -> None:
    value = b"the same listing text, again and again. " * 26_000  # 1.07 MB
    sent = fitted(b"k", value, [], ADDED, SizeLimit())
    assert sent.value == value and TRUNCATED_HEADER not in dict(sent.headers)


def test_an_incompressible_megabyte_is_cut_to_fit_a_one_megabyte_topic() -> None:
    value = os.urandom(1_100_000)
    sent = fitted(b"k", value, [("trace", b"t")], ADDED, SizeLimit())
    headers = dict(sent.headers)
    assert headers[TRUNCATED_HEADER] == b"value" and headers["trace"] == b"t"
    assert 1_000_000 < len(sent.value or b"") < 1_048_588
    assert fits(sent, SizeLimit())


def test_headers_that_alone_overflow_the_topic_are_dropped_and_a_huge_key_is_cut() -> None:
    original = [("h", os.urandom(30_000))]
    sent = fitted(os.urandom(30_000), b"v", original, ADDED, SizeLimit(MIN_MESSAGE_BYTES))
    assert dict(sent.headers)[TRUNCATED_HEADER] == b"headers,key"
    assert "h" not in dict(sent.headers) and fits(sent, SizeLimit(MIN_MESSAGE_BYTES))


def test_a_record_over_the_producers_request_size_never_fits_however_well_it_compresses() -> None:
    limit = SizeLimit(message_bytes=64 << 20, request_bytes=1 << 20)
    assert not fits(OutgoingRecord(None, b"a" * (2 << 20), []), limit)
    assert fits(fitted(None, b"a" * (2 << 20), [], ADDED, limit), limit)


def test_a_topic_below_the_producer_batch_size_is_narrow() -> None:
    assert SizeLimit(64 * 1024).is_narrow(256 * 1024)
    assert not SizeLimit().is_narrow(256 * 1024)


def test_a_record_with_neither_key_nor_value_goes_with_an_empty_value_as_kafka_python_sends_only_that() -> None:
    sent = fitted(None, None, [], ADDED, SizeLimit())
    assert sent == OutgoingRecord(None, b"", ADDED)
    # kafka-python's producer refuses the record as it came (a tombstone without a key), before any I/O.
    producer = KafkaProducer(bootstrap_servers="127.0.0.1:1", api_version=(3, 0))
    try:
        with pytest.raises(ValueError, match="Need at least one: key or value"):
            producer.send("dead-letters", key=None, value=None)
    finally:
        producer.close(timeout=0)
