"""Damaged records of the changelog, sequenced and answers topics: refused with a ChangelogError, never a traceback.

Whatever the bytes (random, cut short, a bit flipped, a header of the wrong
JSON), decoding raises :class:`ChangelogError` saying what is wrong, or
returns what was written. Records that decode but do not hold one row per
document in every array are refused too: replayed, they would give wrong
verdicts without a word.
"""

import contextlib
import json
import struct
from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from stream_dedup.engine.sharding import ShardAnswer
from stream_dedup.errors import ChangelogError
from stream_dedup.kafka import answers, changelog
from stream_dedup.kafka.answers import AnswerRecord, decode_answer, encode_answers
from stream_dedup.kafka.changelog import ChangelogEntry, decode_entry, encode_entry
from stream_dedup.kafka.packed_arrays import pack_record, unpack_record
from stream_dedup.lsh import IndexedBatch
from tests.corpus import make_corpus

CONFIG = DetectionConfig(method="combined", verification="exact", containment_threshold=0.8)
DIGEST = CONFIG.signature_fingerprint()
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def changelog_value(documents: int = 4) -> bytes:
    texts = make_corpus(documents, seed=5)
    batch = IndexedBatch(
        [f"doc-{i}-é" for i in range(documents)],
        make_detector(CONFIG).sign(texts),
        np.arange(documents, dtype=np.float64),
        np.arange(documents, dtype=np.uint64),
    )
    (value,) = encode_entry(ChangelogEntry(batch, "documents", {0: documents}), DIGEST)
    return value


def answer_value() -> bytes:
    answer = ShardAnswer(
        np.array([3, 9], dtype=np.int64),
        np.array([1, 2], dtype=np.int64),
        np.array([0.9, 0.8]),
        np.array([1, 2], dtype=np.int64),
        np.array([5, 6], dtype=np.uint64),
        ["m1", "m2-é"],
        np.array([0, 1], dtype=np.uint8),
        np.array([0.5, 0.6]),
    )
    (value,) = encode_answers(AnswerRecord(0, 2, 0, 10, answer, CONFIG.verdict_settings()), DIGEST)
    return value


CHANGELOG = changelog_value()
ANSWER = answer_value()
DECODERS: dict[str, tuple[bytes, Callable[[bytes], object]]] = {
    "changelog": (CHANGELOG, lambda value: decode_entry(value, DIGEST)),
    "sequenced": (CHANGELOG, lambda value: decode_entry(value, DIGEST, "sequenced_topic")),
    "answer": (ANSWER, lambda value: decode_answer(value, DIGEST)),
}


def decodes_or_refuses(decode: Callable[[bytes], object], value: bytes) -> None:
    """Decoding ``value`` returns, or raises ChangelogError: nothing else escapes."""
    with contextlib.suppress(ChangelogError):
        decode(value)


def with_header(value: bytes, header: object, magic: bytes) -> bytes:
    """``value`` with its JSON header replaced by ``header``, its arrays' bytes kept."""
    (length,) = struct.unpack_from("<I", value, 5)
    encoded = json.dumps(header).encode()
    return magic + value[4:5] + struct.pack("<I", len(encoded)) + encoded + value[9 + length :]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@pytest.mark.parametrize("kind", DECODERS)
@FUZZ
@given(data=st.data())
def test_random_cut_or_flipped_bytes_raise_only_changelog_error(kind: str, data: st.DataObject) -> None:
    valid, decode = DECODERS[kind]
    damaged = data.draw(
        st.one_of(
            st.binary(max_size=200),
            st.binary(max_size=200).map(lambda tail: valid[:5] + tail),
            st.integers(0, len(valid) - 1).map(lambda cut: valid[:cut]),
            st.lists(st.integers(0, len(valid) * 8 - 1), min_size=1, max_size=4).map(lambda bits: flipped(valid, bits)),
        )
    )
    decodes_or_refuses(decode, damaged)


@pytest.mark.parametrize("kind", DECODERS)
@FUZZ
@given(data=st.data())
def test_headers_of_any_json_raise_only_changelog_error(kind: str, data: st.DataObject) -> None:
    valid, decode = DECODERS[kind]
    header, _ = unpack_record(valid, valid[:4], valid[4], kind, "")
    header["arrays"] = json.loads(valid[9 : 9 + struct.unpack_from("<I", valid, 5)[0]])["arrays"]
    mutated = data.draw(
        st.one_of(
            json_values,
            st.sampled_from(sorted(header)).flatmap(
                lambda name: json_values.map(lambda changed: {**header, name: changed})
            ),
            st.sampled_from(sorted(header)).map(lambda name: {k: v for k, v in header.items() if k != name}),
        )
    )
    decodes_or_refuses(decode, with_header(valid, mutated, valid[:4]))


def flipped(value: bytes, bits: list[int]) -> bytes:
    damaged = bytearray(value)
    for bit in bits:
        damaged[bit // 8] ^= 1 << (bit % 8)
    return bytes(damaged)


@pytest.mark.parametrize(
    ("cut", "reason"),
    [(7, "too few for a header length"), (20, "a header of"), (-3, "runs past the end")],
    ids=["in-the-header-length", "in-the-header", "in-the-arrays"],
)
def test_a_truncated_record_says_it_is_truncated(cut: int, reason: str) -> None:
    with pytest.raises(ChangelogError, match=f"the changelog record is damaged: truncated: .*{reason}"):
        decode_entry(CHANGELOG[:cut], DIGEST)


def test_a_header_that_is_not_json_says_so() -> None:
    with pytest.raises(ChangelogError, match="the changelog record is damaged"):
        decode_entry(CHANGELOG[:9] + b"\xff" + CHANGELOG[10:], DIGEST)


def rewritten(value: bytes, module: ModuleType, change: Callable[[dict[str, np.ndarray]], None]) -> bytes:
    """``value`` written again (in the format of ``module``) with its arrays as ``change`` leaves them."""
    magic, version = module.MAGIC, module.FORMAT_VERSION
    header, arrays = unpack_record(value, magic, version, "test", "")
    arrays = {name: array.copy() for name, array in arrays.items()}
    change(arrays)
    return pack_record(magic, version, header, list(arrays.items()))


def drop_last_row(name: str) -> Callable[[dict[str, np.ndarray]], None]:
    def change(arrays: dict[str, np.ndarray]) -> None:
        arrays[name] = arrays[name][:-1]

    return change


@pytest.mark.parametrize(
    "name",
    [
        "sketches",
        "keys",
        "fingerprints",
        "set_sizes",
        "filled_bins",
        "event_times",
        "sources",
        "shingle_ends",
        "id_ends",
    ],
)
def test_a_changelog_array_without_a_row_per_document_is_refused(name: str) -> None:
    with pytest.raises(ChangelogError, match="the changelog record is damaged"):
        decode_entry(rewritten(CHANGELOG, changelog, drop_last_row(name)), DIGEST)


def set_ends(name: str, ends: Callable[[np.ndarray], np.ndarray]) -> Callable[[dict[str, np.ndarray]], None]:
    def change(arrays: dict[str, np.ndarray]) -> None:
        arrays[name] = ends(arrays[name]).astype("<i8")

    return change


@pytest.mark.parametrize("name", ["id_ends", "shingle_ends"])
@pytest.mark.parametrize(
    "ends",
    [lambda ends: ends + 1, lambda ends: ends - 1, lambda ends: ends[[1, 0, 2, 3]]],
    ids=["past-the-bytes", "short-of-the-bytes", "not-in-order"],
)
def test_ends_that_do_not_cut_their_bytes_in_order_are_refused(
    name: str, ends: Callable[[np.ndarray], np.ndarray]
) -> None:
    with pytest.raises(ChangelogError, match=f"ends of '{name.removesuffix('_ends')}"):
        decode_entry(rewritten(CHANGELOG, changelog, set_ends(name, ends)), DIGEST)


def test_an_array_of_another_dtype_is_refused() -> None:
    def as_floats(arrays: dict[str, np.ndarray]) -> None:
        arrays["sources"] = arrays["sources"].astype("<f8")

    with pytest.raises(ChangelogError, match="array 'sources' is <f8"):
        decode_entry(rewritten(CHANGELOG, changelog, as_floats), DIGEST)


def test_a_negative_size_in_the_array_directory_is_refused() -> None:
    header, _ = unpack_record(CHANGELOG, changelog.MAGIC, changelog.FORMAT_VERSION, "changelog", "")
    (length,) = struct.unpack_from("<I", CHANGELOG, 5)
    directory = json.loads(CHANGELOG[9 : 9 + length])["arrays"]
    directory[-1][2] = [-1]  # the last array, id_ends: numpy would take what is left
    with pytest.raises(ChangelogError, match="array 'id_ends' has shape \\[-1\\]"):
        decode_entry(with_header(CHANGELOG, {**header, "arrays": directory}, changelog.MAGIC), DIGEST)


def test_an_array_listed_twice_is_refused() -> None:
    """Else the second, of other values, would stand for the first, whose bytes nothing would read."""
    header, arrays = unpack_record(CHANGELOG, changelog.MAGIC, changelog.FORMAT_VERSION, "changelog", "")
    sources = arrays["sources"]
    value = pack_record(
        changelog.MAGIC,
        changelog.FORMAT_VERSION,
        header,
        [*arrays.items(), ("sources", (sources + 1).astype(sources.dtype))],
    )
    with pytest.raises(ChangelogError, match="array 'sources' is listed twice"):
        decode_entry(value, DIGEST)


@pytest.mark.parametrize("name", ["match_keys", "similarity", "distances", "match_sources", "kinds", "id_ends"])
def test_an_answer_array_without_a_value_per_row_is_refused(name: str) -> None:
    with pytest.raises(ChangelogError, match="the answer record is damaged"):
        decode_answer(rewritten(ANSWER, answers, drop_last_row(name)), DIGEST)


def test_a_foreign_record_is_named_by_the_kind_it_was_read_as() -> None:
    with pytest.raises(ChangelogError, match=r"^the record is not a stream-dedup answer record"):
        decode_answer(CHANGELOG, DIGEST)
    with pytest.raises(ChangelogError, match=r"^sequenced record format 9") as raised:
        decode_entry(CHANGELOG[:4] + bytes([9]) + CHANGELOG[5:], DIGEST, "sequenced_topic")
    assert "new group_id" in str(raised.value)
