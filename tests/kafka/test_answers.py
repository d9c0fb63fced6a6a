"""Answer records: lossless round trips, parts that carry no progress, refusing foreign records."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.sharding import ANSWER_KINDS, ShardAnswer, sequence_keys
from stream_dedup.errors import ChangelogError
from stream_dedup.kafka.answers import AnswerRecord, decode_answer, encode_answers

DIGEST = "0123456789abcdef"


def answer_of(rows: list[tuple[int, int, float, int, str]], distances: bool, containment: bool = False) -> ShardAnswer:
    """Distances, sources and kinds come from the row's small integer, containment from its similarity."""
    return ShardAnswer(
        np.array([r[0] for r in rows], dtype=np.int64),
        np.array([r[1] for r in rows], dtype=np.int64),
        np.array([r[2] for r in rows], dtype=np.float64),
        np.array([r[3] for r in rows], dtype=np.int64) if distances else None,
        np.array([r[3] for r in rows], dtype=np.uint64),
        [r[4] for r in rows],
        np.array([r[3] % len(ANSWER_KINDS) for r in rows], dtype=np.uint8) if containment else None,
        np.array([r[2] / 3 for r in rows], dtype=np.float64) if containment else None,
    )


def rows_of(answer: ShardAnswer) -> list[tuple[object, ...]]:
    def listed(column: np.ndarray | None) -> list[object]:
        return column.tolist() if column is not None else [None] * len(answer)

    return list(
        zip(
            answer.keys.tolist(),
            answer.match_keys.tolist(),
            answer.similarity.tolist(),
            listed(answer.distances),
            answer.match_sources.tolist(),
            answer.match_ids,
            listed(answer.kinds),
            listed(answer.containment),
            strict=True,
        )
    )


answer_rows = st.lists(
    st.tuples(
        st.integers(0, 2**62),
        st.integers(0, 2**62),
        st.floats(0, 1),
        st.integers(0, 64),
        st.text(min_size=1, max_size=30),
    ),
    max_size=40,
).map(lambda rows: sorted(rows))


@settings(max_examples=100, deadline=None)
@given(
    rows=answer_rows,
    distances=st.booleans(),
    containment=st.booleans(),
    max_bytes=st.sampled_from([60, 400, 1 << 19]),
)
def test_an_answer_survives_encoding_whole_or_in_parts(
    rows: list[tuple[int, int, float, int, str]], distances: bool, containment: bool, max_bytes: int
) -> None:
    settings = DetectionConfig(containment_threshold=0.8 if containment else None).verdict_settings()
    record = AnswerRecord(2, 3, 17, 25, answer_of(rows, distances, containment), settings)

    parts = [decode_answer(value, DIGEST) for value in encode_answers(record, DIGEST, max_bytes)]

    assert rows_of(ShardAnswer.concat([p.answer for p in parts])) == rows_of(record.answer)
    assert {(p.shard, p.shards, p.first_offset) for p in parts} == {(2, 3, 17)}
    assert all(p.settings == settings for p in parts)
    # Only the last part says how far the shard got: a judge that read part of it waits for the rest.
    assert [p.end_offset for p in parts] == [17] * (len(parts) - 1) + [25]


def test_a_record_is_used_up_once_its_range_and_its_rows_are_judged() -> None:
    rows = [(int(sequence_keys(20, 3)[2]), 1, 0.9, 0, "m")]
    whole = AnswerRecord(0, 1, 10, 21, answer_of(rows, False))
    first_part = AnswerRecord(0, 1, 10, 10, answer_of(rows, False))
    progress_only = AnswerRecord(0, 1, 10, 21, answer_of([], False))

    assert not whole.used_up_before(20) and whole.used_up_before(21)
    assert not first_part.used_up_before(15) and first_part.used_up_before(21)
    assert progress_only.used_up_before(21) and not progress_only.used_up_before(20)


def test_a_record_of_a_shard_that_did_not_say_its_settings_decodes_without_them() -> None:
    (value,) = encode_answers(AnswerRecord(0, 1, 0, 1, answer_of([], False)), DIGEST)

    assert decode_answer(value, DIGEST).settings is None


def test_foreign_records_are_refused_with_a_reason() -> None:
    (value,) = encode_answers(AnswerRecord(0, 1, 0, 1, answer_of([], False)), DIGEST)
    with pytest.raises(ChangelogError, match="bad magic"):
        decode_answer(b"SDCL" + value[4:], DIGEST)
    with pytest.raises(ChangelogError, match="other signature parameters"):
        decode_answer(value, "fedcba9876543210")
    with pytest.raises(ChangelogError, match="format 9"):
        decode_answer(value[:4] + bytes([9]) + value[5:], DIGEST)
    (known,) = encode_answers(AnswerRecord(0, 1, 0, 1, answer_of([(5, 1, 0.9, 2, "m")], False, True)), DIGEST)
    assert decode_answer(known, DIGEST).answer.kinds is not None
    with pytest.raises(ChangelogError, match="kind of match"):
        decode_answer(
            known.replace(bytes([2]) + struct.pack("<d", 0.9 / 3), bytes([7]) + struct.pack("<d", 0.9 / 3)), DIGEST
        )
