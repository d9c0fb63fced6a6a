"""Fuzzing the record reader and the batch path: whatever a record holds, it ends as one verdict or one dead letter.

Hostile values of every kind (arbitrary bytes; JSON deep, wide, with odd
types, lone surrogates, NUL, BOM, NaN and Infinity, duplicate keys, huge
numbers, long ids; arbitrary headers and keys) go through
:func:`read_record` and :func:`~tests.worker.fakes.publish_batch` with a fake producer at the
client edge. Nothing may escape, and each record must come out exactly once:
a verdict naming its source, or a dead letter holding its original bytes.
The short run is part of every test run; ``-m long`` runs many more examples.
"""

import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import Detector
from stream_dedup.kafka.messages import DeadLetter, InputDocument, InputReading, read_record
from stream_dedup.worker.batch import Destinations
from stream_dedup.worker.signing import read_and_sign
from tests.worker.fakes import FakeProducer, publish_batch, record

CONFIG = DetectionConfig()
DESTINATIONS = Destinations("verdicts", "dead-letters", "stage.changelog", "uniques")
READING = InputReading(max_document_bytes=1 << 20, max_id_bytes=1024)
SHORT = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LONG = settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: Text of any code point, lone surrogates and NUL included.
any_text = st.text(st.characters(codec=None, categories=None), max_size=40)
json_string = any_text.map(lambda t: json.dumps(t, ensure_ascii=True))  # lone surrogates as \ud800 escapes
json_scalar = st.one_of(
    json_string,
    st.sampled_from(["null", "true", "false", "NaN", "Infinity", "-Infinity", "1e999", "-0", "\ufeff1"]),
    st.integers().map(str),
    st.integers(4000, 6000).map(lambda n: "9" * n),  # past Python's 4,300-digit limit
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


def _object(pairs: list[tuple[str, str]]) -> str:
    return "{" + ",".join(f"{key}:{value}" for key, value in pairs) + "}"


json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=6).map(lambda items: "[" + ",".join(items) + "]"),
        st.lists(st.tuples(json_string, inner), max_size=6).map(_object),
    ),
    max_leaves=30,
)
deep = st.tuples(st.integers(1, 120_000), st.sampled_from("[{")).map(
    lambda args: ("[" * args[0] + "]" * args[0]) if args[1] == "[" else ('{"a":' * args[0] + "1" + "}" * args[0])
)
document_id = st.one_of(
    json_string,
    st.integers().map(str),
    st.integers(900, 3000).map(lambda n: json.dumps("i" * n)),  # around max_id_bytes
    json_value,
)
text_value = st.one_of(json_string, st.just(json.dumps("some words of a listing, " * 20)), json_value)
documents = st.builds(
    lambda doc_id, text, extra, duplicate: _object(
        [('"id"', doc_id), ('"text"', text), *extra, *([('"id"', doc_id)] if duplicate else [])]
    ),
    st.one_of(st.none().map(lambda _: "null"), document_id),
    text_value,
    st.lists(st.tuples(json_string, st.one_of(json_value, deep)), max_size=3),
    st.booleans(),  # a duplicate "id" key: the last one wins
)
framing = st.sampled_from(["", "\ufeff", " ", "\x00", "\n"])
values = st.one_of(
    st.none(),
    st.binary(max_size=300),
    deep.map(str.encode),
    st.tuples(framing, st.one_of(documents, json_value)).map(
        lambda args: (args[0] + args[1]).encode("utf-8", "surrogatepass")
    ),
)
keys = st.one_of(st.none(), st.binary(max_size=40), st.binary(min_size=1000, max_size=1100))
headers = st.lists(st.tuples(st.text(max_size=20), st.binary(max_size=100)), max_size=4)
records = st.lists(st.tuples(values, keys, headers), min_size=1, max_size=12)

_detector = Detector(CONFIG)


def _consumed(items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]) -> list[Any]:
    return [
        record("documents", offset % 3, offset, value, key)._replace(headers=list(header))
        for offset, (value, key, header) in enumerate(items)
    ]


def check_every_record_ends_once(items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]]) -> None:
    consumed = _consumed(items)
    for item in consumed:
        assert isinstance(read_record(item, READING), InputDocument | DeadLetter)
    producer = FakeProducer()
    publish_batch(
        read_and_sign(consumed, READING, _detector),
        _detector,
        producer,
        {},
        DESTINATIONS,
        CONFIG.signature_fingerprint(),
    )
    outcomes: dict[int, list[str]] = {item.offset: [] for item in consumed}
    for sent in producer.committed[0]:
        if sent.topic == "verdicts":
            outcomes[json.loads(sent.value or b"")["source"]["offset"]].append("verdict")
        elif sent.topic == "dead-letters":
            offset = int(dict(sent.headers or [])["stream-dedup-source-offset"])
            original = consumed[offset]
            # A record with neither key nor value goes with an empty value (kafka-python sends no such record).
            value = b"" if original.key is None and original.value is None else original.value
            assert sent.value == value and sent.key == original.key
            assert sent.headers is not None and sent.headers[: len(items[offset][2])] == items[offset][2]
            outcomes[offset].append("dead letter")
    assert all(len(ends) == 1 for ends in outcomes.values()), outcomes


@SHORT
@given(records)
@example([(None, None, [])])  # a tombstone without a key
def test_no_record_escapes_the_batch_and_each_ends_as_one_verdict_or_one_dead_letter(
    items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]],
) -> None:
    check_every_record_ends_once(items)


@pytest.mark.long
@LONG
@given(records)
def test_no_record_escapes_the_batch_in_many_more_examples(
    items: list[tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]],
) -> None:
    check_every_record_ends_once(items)


@SHORT
@given(st.binary(max_size=2000) | values.filter(lambda v: v is not None), st.sampled_from(["json", "text"]))
def test_the_reader_never_raises_on_any_bytes_in_either_format(value: bytes, input_format: str) -> None:
    item = record("documents", 0, 0, value, b"k")
    started = time.perf_counter()
    assert isinstance(read_record(item, InputReading(input_format=input_format)), InputDocument | DeadLetter)  # type: ignore[arg-type]
    assert time.perf_counter() - started < 1.0
