"""What ``watch`` prints for each record: a readable line per verdict, dead letters, anything else raw."""

import json
import re

from hypothesis import given
from hypothesis import strategies as st

from stream_dedup.cli.terminal_text import Style
from stream_dedup.cli.verdict_lines import ShownText, record_line, texts_lines
from stream_dedup.cli.watched_records import (
    Coordinates,
    DeadLetterRecord,
    OtherRecord,
    VerdictRecord,
    watched_record,
)
from stream_dedup.kafka.messages import ERROR_HEADER, REASON_HEADER, SOURCE_HEADERS, TIMESTAMP_HEADER

from .consumed import T0, consumed, verdict_value

PLAIN, COLOUR = Style(colour=False), Style(colour=True)


def _json_bytes(value: object) -> bytes:
    return json.dumps(value).encode()  # ensure_ascii: lone surrogates travel as escapes


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_a_duplicate_reads_as_a_sentence() -> None:
    record = watched_record(consumed(verdict_value("ad-0217", "ad-0051", 0.91372, match=(1, 12))))
    assert isinstance(record, VerdictRecord)
    assert record.match_source == Coordinates("documents", 1, 12)
    line = record_line(record, PLAIN)
    assert re.fullmatch(r"duplicate  ad-0217 +of ad-0051 +0\.914  at 1:73", line), line


def test_a_unique_verdict_lines_up_with_the_duplicates() -> None:
    unique = record_line(watched_record(consumed(verdict_value("ad-0218", source=(2, 74, T0)))), PLAIN)
    duplicate = record_line(watched_record(consumed(verdict_value("ad-0217", "ad-0051", 0.9, match=(1, 12)))), PLAIN)
    assert unique.startswith("unique     ad-0218 ")
    assert unique.index("at 2:74") == duplicate.index("at 1:73")


def test_colour_marks_the_verdict_and_changes_nothing_else() -> None:
    record = watched_record(consumed(verdict_value("ad-0217", "ad-0051", 0.9, match=(1, 12))))
    coloured = record_line(record, COLOUR)
    assert coloured.startswith("\x1b[1;33mduplicate\x1b[0m")
    assert _ANSI.sub("", coloured) == record_line(record, PLAIN)


def test_a_duplicate_without_similarity_shows_a_question_mark() -> None:
    line = record_line(watched_record(consumed(verdict_value("b", "a", None, match=(0, 1)))), PLAIN)
    assert re.search(r"of a +\?  +at 1:73$", line), line


def test_long_unicode_and_right_to_left_ids_are_shown_cut_and_escaped() -> None:
    long_id = "x" * 500
    line = record_line(watched_record(consumed(verdict_value(long_id, "דירה-יפה", 0.85, match=(0, 1)))), PLAIN)
    assert "x" * 59 + "…" in line and "x" * 61 not in line
    assert "of דירה-יפה" in line
    hostile = record_line(
        watched_record(consumed(verdict_value("ad\x1b[2J\u202e1", "\ud800", 0.9, match=(0, 1)))), PLAIN
    )
    assert "\x1b" not in hostile and "\u202e" not in hostile and "ad\\x1b[2J\\u202e1" in hostile
    hostile.encode("utf-8")


def test_a_dead_letter_shows_its_reason_error_and_source() -> None:
    headers = [
        ("origin", b"crawler"),
        (REASON_HEADER, b"invalid_json"),
        (ERROR_HEADER, b"not valid JSON: Expecting value at column 1"),
        *zip(SOURCE_HEADERS, (b"documents", b"2", b"40"), strict=True),
        (TIMESTAMP_HEADER, str(T0).encode()),
    ]
    record = watched_record(consumed(b"{not json", headers))
    assert record == DeadLetterRecord(
        "invalid_json", "not valid JSON: Expecting value at column 1", Coordinates("documents", 2, 40)
    )
    assert (
        record_line(record, PLAIN)
        == "dead letter  invalid_json: not valid JSON: Expecting value at column 1  from 2:40"
    )


def test_a_dead_letter_with_broken_headers_is_still_shown() -> None:
    record = watched_record(consumed(None, [(REASON_HEADER, b"\xff"), (SOURCE_HEADERS[1], b"x")]))
    assert isinstance(record, DeadLetterRecord) and record.source is None
    assert record_line(record, PLAIN).startswith("dead letter  \ufffd: ")


def test_records_that_are_not_verdicts_are_printed_raw() -> None:
    cases = {
        None: "verdicts 0:5  (tombstone: no value)",
        b"\xff\xfe": "verdicts 0:5  \ufffd\ufffd",
        b"[" * 100_000: "verdicts 0:5  " + "[" * 100_000,
        b'{"verdict": "duplicate", "id": true}': 'verdicts 0:5  {"verdict": "duplicate", "id": true}',
        b'{"verdict": "maybe", "id": "a"}': 'verdicts 0:5  {"verdict": "maybe", "id": "a"}',
        b'{"verdict": "unique", "id": "a", "similarity": "high"}\n': (
            'verdicts 0:5  {"verdict": "unique", "id": "a", "similarity": "high"}\\x0a'
        ),
        b"plain text, not JSON": "verdicts 0:5  plain text, not JSON",
    }
    for value, expected in cases.items():
        record = watched_record(consumed(value, offset=5))
        assert isinstance(record, OtherRecord), value
        assert record_line(record, PLAIN) == expected


def test_a_verdict_with_odd_coordinates_is_still_a_verdict() -> None:
    value = b'{"id": 7, "verdict": "unique", "source": {"topic": "d", "partition": -1, "offset": "3", "timestamp": -1}}'
    record = watched_record(consumed(value))
    assert isinstance(record, VerdictRecord)
    assert (record.id, record.source, record.source_timestamp) == ("7", None, None)
    assert record_line(record, PLAIN).endswith("at ?")


def test_texts_show_shared_passages_marked_in_both() -> None:
    document = ShownText("ad-2", "sunny flat near the park with a lift, rent 900 euro")
    match = ShownText("ad-1", "rent 950 euro: sunny flat near the park with a lift")
    lines = texts_lines(document, match, PLAIN)
    assert lines == [
        "    document  ad-2  «sunny flat near the park with a» lift, rent 900 euro",
        "    match     ad-1  rent 950 euro: «sunny flat near the park with a» lift",
    ]
    coloured = texts_lines(document, match, COLOUR)
    assert "\x1b[7msunny flat near the park with a\x1b[0m" in coloured[0]
    assert [_ANSI.sub("", line) for line in coloured] == [line.replace("«", "").replace("»", "") for line in lines]


def test_a_missing_text_says_why() -> None:
    lines = texts_lines(ShownText("ad-2", "a text"), ShownText("ad-1", None, "record 1:12 is gone: deleted"), PLAIN)
    assert lines == ["    document  ad-2  a text", "    match     ad-1  (record 1:12 is gone: deleted)"]


def test_empty_right_to_left_and_hostile_texts() -> None:
    hebrew = "דירה יפה ליד הפארק עם מעלית"
    lines = texts_lines(ShownText("a", hebrew + " חדשה"), ShownText("b", hebrew), PLAIN)
    assert lines[0].endswith(f"«{hebrew}» חדשה") and lines[1].endswith(f"«{hebrew}»")
    assert texts_lines(ShownText("a", ""), ShownText("b", "x"), PLAIN) == ["    document  a  ", "    match     b  x"]
    hostile = texts_lines(ShownText("a", "\x1b]0;owned\x07 same words here"), ShownText("b", "same words here"), PLAIN)
    assert "\x1b" not in "".join(hostile) and "\\x1b]0;owned\\x07" in hostile[0]


def test_long_texts_are_shown_from_near_their_first_difference() -> None:
    common = " ".join(f"word{i}" for i in range(60))
    lines = texts_lines(ShownText("a", common + " first ending"), ShownText("b", common + " second ending"), PLAIN, 100)
    assert all(len(line) < 100 + 40 for line in lines)
    assert "first ending" in lines[0] and "second ending" in lines[1]
    assert "«…" in lines[0] and "word0 " not in lines[0]


@given(
    st.lists(st.sampled_from(["flat", "park", "near", "the", "rent", "lift", "דירה"]), max_size=20),
    st.lists(st.sampled_from(["flat", "park", "near", "the", "rent", "lift", "דירה"]), max_size=20),
)
def test_every_marked_passage_occurs_in_both_texts(a_words: list[str], b_words: list[str]) -> None:
    a, b = " ".join(a_words), " ".join(b_words)
    lines = texts_lines(ShownText("a", a), ShownText("b", b), PLAIN)
    marked = [re.findall(r"«([^«»]*)»", line) for line in lines]
    assert sorted(marked[0]) == sorted(marked[1])
    for passage in marked[0]:
        assert passage in a and passage in b


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_VERDICT_LIKE = st.fixed_dictionaries(
    {"verdict": st.sampled_from(["unique", "duplicate", "maybe"])},
    optional={
        "id": _JSON,
        "duplicate_of": _JSON,
        "similarity": _JSON,
        "source": st.dictionaries(st.sampled_from(["topic", "partition", "offset", "timestamp"]), _JSON),
        "match_source": _JSON,
    },
)


@given(
    st.one_of(st.none(), st.binary(max_size=200), _JSON.map(_json_bytes), _VERDICT_LIKE.map(_json_bytes)),
    st.lists(st.tuples(st.sampled_from([REASON_HEADER, ERROR_HEADER, *SOURCE_HEADERS, "x"]), st.binary(max_size=20))),
)
def test_any_record_becomes_one_safe_line(value: bytes | None, headers: list[tuple[str, bytes]]) -> None:
    record = watched_record(consumed(value, headers))
    line = record_line(record, PLAIN)
    line.encode("utf-8")
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0x202A <= ord(c) <= 0x202E for c in line)
    assert _ANSI.sub("", record_line(record, COLOUR)) == line


def test_containment_verdicts_read_as_sentences_with_their_containment() -> None:
    contained = watched_record(
        consumed(verdict_value("ad-0300", "ad-0051", 0.47, match=(1, 12), containment=("contained", 0.9641)))
    )
    contains = watched_record(
        consumed(verdict_value("ad-0301", "ad-0052", 0.69, match=(1, 13), containment=("contains", 0.9873)))
    )
    assert isinstance(contained, VerdictRecord) and isinstance(contains, VerdictRecord)
    assert (contained.verdict, contained.containment) == ("contained", 0.9641)
    assert re.fullmatch(r"contained  ad-0300 +in ad-0051 +0\.964  at 1:73", record_line(contained, PLAIN))
    assert re.fullmatch(r"contains   ad-0301 +of ad-0052 +0\.987  at 1:73", record_line(contains, PLAIN))
    assert record_line(contained, COLOUR).startswith("\x1b[1;33mcontained\x1b[0m")


def test_a_containment_that_is_not_a_number_makes_the_record_unknown() -> None:
    value = json.loads(verdict_value("ad-0300", "ad-0051", 0.47, match=(1, 12), containment=("contained", 0.9)))
    value["containment"] = "0.9"
    assert isinstance(watched_record(consumed(_json_bytes(value))), OtherRecord)
