"""Reading input records: ids from field, key or coordinates; every refusal becomes a dead letter."""

import json
import time
import tracemalloc
from typing import Any, NamedTuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.engine.documents import MAX_JSON_DEPTH, Refusal, json_depth, read_json_document
from stream_dedup.engine.verdict import Verdict
from stream_dedup.kafka.messages import (
    DeadLetter,
    InputDocument,
    InputReading,
    Source,
    coordinates_of,
    dead_letter_headers,
    document_text,
    match_coordinates,
    pointer_of,
    read_record,
    source_pointer,
    verdict_value,
)
from stream_dedup.lsh import NO_SOURCE
from tests.hostile_records import HOSTILE, MAX_DOCUMENT_BYTES


class Record(NamedTuple):
    """The fields of kafka-python's ConsumerRecord that the stage reads."""

    topic: str = "documents"
    partition: int = 2
    offset: int = 41
    timestamp: int = 1_700_000_000_000
    key: bytes | None = None
    value: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


def read(value: bytes | None, key: bytes | None = None, **reading: Any) -> InputDocument | DeadLetter:
    return read_record(Record(key=key, value=value), InputReading(**reading))


def test_the_id_comes_from_the_field_then_the_key_then_the_coordinates() -> None:
    with_field = read(b'{"id": 7, "text": "Hello  World"}', key=b"k")
    assert isinstance(with_field, InputDocument)
    assert (with_field.id, with_field.text) == ("7", "hello world")
    from_key = read(b'{"text": "hello"}', key=b"the-key")
    assert isinstance(from_key, InputDocument) and from_key.id == "the-key"
    from_coordinates = read(b'{"text": "hello"}')
    assert isinstance(from_coordinates, InputDocument) and from_coordinates.id == "documents:2:41"
    from_empty_key = read(b'{"text": "hello"}', key=b"")
    assert isinstance(from_empty_key, InputDocument) and from_empty_key.id == "documents:2:41"


def test_nan_and_infinity_are_numbers_a_fault_only_as_the_id_or_the_text() -> None:
    """Python's ``json`` writes them; docs/verdicts.md says so beside ``invalid_json``."""
    elsewhere = read(b'{"id": "a", "text": "hello", "score": NaN, "range": [-Infinity, Infinity]}')
    assert isinstance(elsewhere, InputDocument) and elsewhere.id == "a"
    assert [getattr(read(v), "reason", None) for v in (b'{"id": NaN, "text": "t"}', b'{"text": Infinity}')] == [
        "invalid_id",
        "invalid_text",
    ]


def test_field_names_are_configurable() -> None:
    document = read(b'{"ad": "a1", "body": "hello"}', id_field="ad", text_field="body")
    assert isinstance(document, InputDocument) and document.id == "a1"


def test_nested_fields_are_read_by_json_pointer_and_a_missing_one_is_a_dead_letter_naming_it() -> None:
    value = b'{"meta": {"id": "m1"}, "payload": {"body": "Hello  World"}}'
    document = read(value, key=b"k", id_field="/meta/id", text_field="/payload/body")
    assert isinstance(document, InputDocument) and (document.id, document.text) == ("m1", "hello world")
    reading = InputReading(text_field="/payload/body")
    assert document_text(value, reading) == "hello world"
    letter = read(b'{"payload": {"text": "hello"}}', text_field="/payload/body")
    assert isinstance(letter, DeadLetter) and letter.reason == "missing_text" and "/payload/body" in letter.detail


def test_plain_text_values() -> None:
    document = read("Grüße aus Köln".encode(), key=b"k1", input_format="text")
    assert isinstance(document, InputDocument) and (document.id, document.text) == ("k1", "grüsse aus köln")


def test_refusals_carry_a_reason_code() -> None:
    cases = {
        b"\xff\xfe": "invalid_utf8",
        b"{nope": "invalid_json",
        b"42": "not_an_object",
        b'{"id": "x"}': "missing_text",
        b'{"id": "x", "text": ["a"]}': "invalid_text",
        b'{"id": "x", "text": "\\t "}': "empty_text",
        b'{"id": 1.5, "text": "t"}': "invalid_id",
        b'{"id": "x", "text": "' + b"a" * 100 + b'"}': "too_large",
        b"[" * 70 + b"]" * 70: "too_deep",
        b'{"id": "' + b"x" * 65 + b'", "text": "t"}': "id_too_long",
        b'{"id": ' + b"9" * 65 + b', "text": "t"}': "id_too_long",
    }
    for value, reason in cases.items():
        letter = read(value, max_document_bytes=80 if reason == "too_large" else 1000, max_id_bytes=64)
        assert isinstance(letter, DeadLetter), value
        assert letter.reason == reason, value
    assert read(b'{"text": "t"}', key=b"\xff").reason == "invalid_id"  # type: ignore[union-attr]
    assert read(None).reason == "missing_text"  # type: ignore[union-attr]
    assert read(b'{"text": "t"}', key=b"k" * 65, max_id_bytes=64).reason == "id_too_long"  # type: ignore[union-attr]


def test_a_hundred_thousand_nested_arrays_are_refused_in_milliseconds_without_recursion() -> None:
    for value in (b"[" * 100_000, b'{"text": "t", "a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"):
        started = time.perf_counter()
        letter = read(value)
        assert isinstance(letter, DeadLetter) and letter.reason == "too_deep"
        assert time.perf_counter() - started < 0.5


def test_brackets_inside_strings_do_not_count_as_nesting() -> None:
    assert json_depth('["]]]]", "[[[[", "\\"]"]') == 1
    assert json_depth('{"a": [{"b": "\\"[["}]}') == 3
    document = read(b'{"id": "[[[[", "text": "' + b"[" * 1000 + b'"}')
    assert isinstance(document, InputDocument) and document.id == "[[[["


_nested = st.tuples(
    st.integers(0, 130), st.sampled_from(["[", '{"a": ']), st.text(alphabet='[]{}"\\ a', max_size=80)
).map(lambda args: args[1] * args[0] + json.dumps(args[2]) + ("]" if args[1] == "[" else "}") * args[0])


@settings(max_examples=200, deadline=None)
@given(st.one_of(_nested, st.text(alphabet='[]{}"\\ a:,', max_size=200)))
def test_a_document_is_refused_as_too_deep_exactly_when_its_nesting_passes_the_limit(line: str) -> None:
    refusal = read_json_document(line)
    too_deep = isinstance(refusal, Refusal) and refusal.reason == "too_deep"
    assert too_deep == (json_depth(line) > MAX_JSON_DEPTH)


def test_the_string_scan_stays_linear_on_escaped_quotes() -> None:
    started = time.perf_counter()
    assert json_depth('"' + '\\"' * 300_000) == 0  # one unterminated string: quadratic with a naive pattern
    assert time.perf_counter() - started < 0.5


@pytest.mark.parametrize("text", ["a [b] {c} " * 200_000, "\\u00e9 [x] " * 200_000], ids=["plain", "escaped"])
def test_the_string_scan_of_a_long_document_takes_no_memory_per_character(text: str) -> None:
    # A long text holding brackets is scanned for its depth; the scan kept ~140 bytes a character (1.7 GB
    # for 15 MB of text), escapes or not.
    line = '{"id": "long", "text": "' + text + '"}'
    tracemalloc.start()
    try:
        assert json_depth(line) == 1
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(line) // 4


def _parsed_depth(value: Any) -> int:
    """Nesting of arrays and objects in a parsed JSON value."""
    if isinstance(value, list):
        return 1 + max(map(_parsed_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_parsed_depth, value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.text(alphabet='[]{}"\\ a\u00e9'),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(alphabet='[]{}"\\ a'), inner),
        max_leaves=12,
    ),
    st.booleans(),
)
def test_the_depth_counted_is_the_parsed_values(value: Any, ascii_only: bool) -> None:
    assert json_depth(json.dumps(value, ensure_ascii=ascii_only)) == _parsed_depth(value)


def test_an_exception_while_reading_a_record_makes_it_a_dead_letter_naming_the_exception() -> None:
    class Exploding(bytes):
        def decode(self, *args: Any, **kwargs: Any) -> str:
            raise MemoryError("cannot decode")

    letter = read(Exploding(b'{"id": "x", "text": "t"}'))
    assert isinstance(letter, DeadLetter)
    assert letter.reason == "internal_error" and letter.detail == "MemoryError: cannot decode"


def test_dead_letter_headers_keep_the_original_ones_and_add_reason_and_source() -> None:
    record = Record(value=b"{", headers=(("trace", b"abc"),))
    letter = read_record(record, InputReading())
    assert isinstance(letter, DeadLetter)
    headers = dict(dead_letter_headers(letter))
    assert headers["trace"] == b"abc"
    assert headers["stream-dedup-reason"] == b"invalid_json"
    assert (headers["stream-dedup-source-partition"], headers["stream-dedup-source-offset"]) == (b"2", b"41")
    assert headers["stream-dedup-source-timestamp"] == b"1700000000000"


def test_a_dead_letter_sent_back_to_the_input_keeps_its_old_reason_before_the_new_one() -> None:
    """The stage's headers come last, so the last header of a name is this stage's (Java's ``lastHeader``)."""
    old_headers = (("stream-dedup-reason", b"invalid_json"), ("stream-dedup-source-offset", b"7"))
    again = Record(value=b"[1]", headers=old_headers)
    letter = read_record(again, InputReading())
    assert isinstance(letter, DeadLetter)
    headers = dead_letter_headers(letter)
    assert headers[:2] == list(old_headers)
    assert [v for k, v in headers if k == "stream-dedup-reason"] == [b"invalid_json", b"not_an_object"]
    assert [v for k, v in headers if k == "stream-dedup-source-offset"] == [b"7", b"41"]


def test_verdict_value_names_the_source_and_the_parameters() -> None:
    document = read(b'{"id": "b", "text": "t"}')
    assert isinstance(document, InputDocument)
    matched = source_pointer(Source("documents", 1, 2**40 + 3, 0))
    value = json.loads(verdict_value(Verdict("b", "duplicate", "a", 0.91, matched, 2), document.source, "abcd"))
    assert value == {
        "format_version": 2,
        "id": "b",
        "verdict": "duplicate",
        "duplicate_of": "a",
        "similarity": 0.91,
        "hamming_distance": 2,
        "match_source": {"topic": "documents", "partition": 1, "offset": 2**40 + 3},
        "source": {"topic": "documents", "partition": 2, "offset": 41, "timestamp": 1_700_000_000_000},
        "params_fingerprint": "abcd",
    }


@settings(max_examples=200)
@given(partition=st.integers(0, 2**31 - 1), offset=st.integers(0, 2**63 - 1))
def test_a_match_source_comes_back_as_given_or_not_at_all(partition: int, offset: int) -> None:
    pointer = source_pointer(Source("documents", partition, offset, 0))
    if partition < 2**16 and offset < 2**48:
        verdict = Verdict("b", "duplicate", "a", 1.0, pointer)
        value = json.loads(verdict_value(verdict, Source("documents", 0, 0, 0), ""))
        assert value["match_source"] == {"topic": "documents", "partition": partition, "offset": offset}
    else:
        assert pointer == NO_SOURCE  # the engine reports no match source for it


@pytest.mark.parametrize(("name", "key", "value", "reason"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_every_kind_of_hostile_record_is_a_dead_letter_with_its_reason(
    name: str, key: bytes | None, value: bytes | None, reason: str
) -> None:
    letter = read_record(Record(key=key, value=value), InputReading(max_document_bytes=MAX_DOCUMENT_BYTES))
    assert isinstance(letter, DeadLetter), name
    assert letter.reason == reason


@pytest.mark.parametrize("kind", ["contained", "contains"])
def test_a_containment_verdict_value_is_format_3_with_the_containment(kind: str) -> None:
    document = read(b'{"id": "b", "text": "t"}')
    assert isinstance(document, InputDocument)
    matched = source_pointer(Source("documents", 0, 12, 0))
    verdict = Verdict("b", kind, "a", 0.5714, matched, None, 0.9512)  # type: ignore[arg-type]
    value = json.loads(verdict_value(verdict, document.source, "abcd"))
    assert value == {
        "format_version": 3,
        "id": "b",
        "verdict": kind,
        "duplicate_of": "a",
        "similarity": 0.5714,
        "hamming_distance": None,
        "containment": 0.9512,
        "match_source": {"topic": "documents", "partition": 0, "offset": 12},
        "source": {"topic": "documents", "partition": 2, "offset": 41, "timestamp": 1_700_000_000_000},
        "params_fingerprint": "abcd",
    }


def test_unique_and_duplicate_values_stay_format_2_without_a_containment_field() -> None:
    document = read(b'{"id": "b", "text": "t"}')
    assert isinstance(document, InputDocument)
    for verdict in (Verdict("b", "unique"), Verdict("b", "duplicate", "a", 0.9, 3)):
        value = json.loads(verdict_value(verdict, document.source, "abcd"))
        assert value["format_version"] == 2 and "containment" not in value


_JSON_VALUES = st.builds(
    lambda doc: json.dumps(doc).encode(),
    st.fixed_dictionaries(
        {"text": st.one_of(st.text(), st.integers(), st.none())},
        optional={"id": st.one_of(st.text(max_size=5), st.integers(), st.booleans()), "other": st.text(max_size=5)},
    ),
)


@settings(max_examples=300, deadline=None)
@given(
    value=st.one_of(st.none(), st.binary(max_size=64), _JSON_VALUES, st.sampled_from([h[2] for h in HOSTILE])),
    input_format=st.sampled_from(["json", "text"]),
)
def test_document_text_is_the_text_read_record_finds(value: bytes | None, input_format: str) -> None:
    reading = InputReading(input_format=input_format, max_document_bytes=MAX_DOCUMENT_BYTES)
    read = read_record(Record(key=b"k", value=value), reading)
    text = document_text(value, reading)
    if isinstance(read, InputDocument):
        assert text == read.text
    elif read.reason not in ("invalid_id", "id_too_long"):  # the id never changes the text
        assert text is None


@given(st.lists(st.tuples(st.integers(0, 2**16 - 1), st.integers(0, 2**48 - 1)), max_size=50))
def test_pointers_and_coordinates_round_trip_one_at_a_time_and_all_at_once(coordinates: list[tuple[int, int]]) -> None:
    pointers = np.array([pointer_of(p, o) for p, o in coordinates], dtype=np.uint64)
    partitions, offsets = coordinates_of(pointers)
    assert list(zip(partitions.tolist(), offsets.tolist(), strict=True)) == coordinates
    assert [match_coordinates(p) for p in pointers.tolist()] == coordinates


@pytest.mark.parametrize(("partition", "offset"), [(2**16, 0), (0, 2**48), (-1, 0), (0, -1)])
def test_coordinates_past_the_pointer_have_none(partition: int, offset: int) -> None:
    assert pointer_of(partition, offset) == NO_SOURCE


@pytest.mark.parametrize("input_format", ["json", "text"])
def test_a_text_of_invisible_characters_only_is_empty_and_a_dead_letter_unless_they_are_kept(
    input_format: str,
) -> None:
    invisible = "\u200b\u2060 \ufeff\u00ad\U000e0041"

    def value(text: str) -> bytes:
        return json.dumps({"id": "d", "text": text}).encode() if input_format == "json" else text.encode()

    letter = read(value(invisible), input_format=input_format)
    assert isinstance(letter, DeadLetter) and letter.reason == "empty_text"
    kept = read(value(invisible), input_format=input_format, ignore_invisible=False)
    assert isinstance(kept, InputDocument) and kept.text == "\u200b\u2060 \ufeff\u00ad\U000e0041"
    visible = read(value(invisible.replace("\u00ad", "x")), input_format=input_format)
    assert isinstance(visible, InputDocument) and visible.text == "x"


_FLOATS = st.none() | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.8, 1.0, 0.0, 1e-300])


@settings(max_examples=500, deadline=None)
@given(
    verdict=st.builds(
        Verdict,
        st.text(),
        st.sampled_from(["unique", "duplicate", "contained", "contains"]),
        st.none() | st.text(),
        _FLOATS,
        st.none() | st.integers(0, 2**64 - 1),
        st.none() | st.integers(0, 64),
        _FLOATS,
    ),
    source=st.builds(Source, st.text(), st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1), st.integers(-1, 2**62)),
    fingerprint=st.text(),
)
def test_a_verdict_value_is_its_fields_as_the_json_module_writes_them(
    verdict: Verdict, source: Source, fingerprint: str
) -> None:
    match = None
    if verdict.match_source is not None:
        partition, offset = match_coordinates(verdict.match_source)
        match = {"topic": source.topic, "partition": partition, "offset": offset}
    fields = {**verdict.to_dict(), "match_source": match, "source": source._asdict(), "params_fingerprint": fingerprint}
    expected = json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
    assert verdict_value(verdict, source, fingerprint) == expected.encode("utf-8")
