"""The signing pipeline: a batch comes back signed one step later, as if signed in place; dropped ones never do."""

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import Detector
from stream_dedup.engine.documents import Refusal
from stream_dedup.errors import StreamDedupError
from stream_dedup.kafka.messages import InputReading
from stream_dedup.worker.isolation import ISOLATED_REASON, coordinates
from stream_dedup.worker.pipeline import LocalSigners, SigningFailedError, SigningPipeline
from stream_dedup.worker.signing import SignedRecords, read_and_sign
from tests.corpus import make_corpus
from tests.worker.fakes import document, record

READING = InputReading()
SIGNER = Detector(DetectionConfig())


def batch(first: int, count: int) -> list[Any]:
    texts = make_corpus(first + count, seed=4)
    return [document("documents", i % 3, i, f"d{i}", texts[i]) for i in range(first, first + count)]


def same(left: SignedRecords, right: SignedRecords) -> bool:
    return (
        left.records == right.records
        and left.outcomes == right.outcomes
        and np.array_equal(left.signed.sketches, right.signed.sketches)
        and np.array_equal(left.signed.keys, right.signed.keys)
        and left.texts == right.texts
        and left.blocks == right.blocks
    )


class RecordingSigners(LocalSigners):
    """Local signing that remembers what it was given, and can be made to fail."""

    def __init__(self, error: Exception | None = None) -> None:
        super().__init__(SIGNER, READING)
        self.given: list[list[Any]] = []
        self.error = error

    def submit(self, records: list[Any]) -> None:
        self.given.append(records)
        super().submit(records)

    def collect(self) -> SignedRecords:
        if self.error is not None:
            raise self.error
        return super().collect()


def test_each_batch_comes_back_one_step_later_signed_as_in_place() -> None:
    pipeline = SigningPipeline(RecordingSigners(), {})
    first, second = batch(0, 5), [*batch(5, 4), record("documents", 0, 99, b"not json")]
    assert pipeline.advance(first) is None and pipeline.in_flight == 5
    signed = pipeline.advance(second)
    assert signed is not None and same(signed, read_and_sign(first, READING, SIGNER, True))
    signed = pipeline.advance([])
    assert signed is not None and same(signed, read_and_sign(second, READING, SIGNER, True))
    assert signed.outcomes[-1] == Refusal("invalid_json", signed.outcomes[-1].detail)  # type: ignore[union-attr]
    assert pipeline.advance([]) is None and pipeline.in_flight == 0


def test_a_dropped_batch_never_comes_back() -> None:
    pipeline = SigningPipeline(RecordingSigners(), {})
    pipeline.advance(batch(0, 3))
    pipeline.drop()
    assert pipeline.in_flight == 0
    assert pipeline.advance(batch(3, 2)) is None
    signed = pipeline.advance([])
    assert signed is not None and [r.offset for r in signed.records] == [3, 4]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=12))
def test_isolated_records_are_never_signed_and_keep_their_place_as_dead_letters(isolated: list[bool]) -> None:
    records = batch(0, len(isolated))
    offenders = {coordinates(r): "RuntimeError: boom" for r, bad in zip(records, isolated, strict=True) if bad}
    signers = RecordingSigners()
    pipeline = SigningPipeline(signers, offenders)
    pipeline.advance(records)
    signed = pipeline.advance([])
    assert signed is not None and signed.records == records
    assert signers.given == [[r for r, bad in zip(records, isolated, strict=True) if not bad]]
    alone = read_and_sign(signers.given[0], READING, SIGNER, True)
    kept = iter(alone.outcomes)
    for outcome, bad in zip(signed.outcomes, isolated, strict=True):
        if bad:
            assert outcome == Refusal(ISOLATED_REASON, "its batch kept failing: RuntimeError: boom")
        else:
            assert outcome == next(kept)
    assert np.array_equal(signed.signed.sketches, alone.signed.sketches)


def test_a_batch_that_cannot_be_signed_fails_with_its_records_and_the_next_is_not_started() -> None:
    signers = RecordingSigners(RuntimeError("signer tripped"))
    pipeline = SigningPipeline(signers, {})
    first = batch(0, 3)
    pipeline.advance(first)
    with pytest.raises(SigningFailedError) as failed:
        pipeline.advance(batch(3, 3))
    assert failed.value.records == first and isinstance(failed.value.cause, RuntimeError)
    assert len(signers.given) == 1 and pipeline.in_flight == 0


def test_signers_that_cannot_work_at_all_are_not_blamed_on_the_batch() -> None:
    pipeline = SigningPipeline(RecordingSigners(StreamDedupError("no signer process starts")), {})
    pipeline.advance(batch(0, 2))
    with pytest.raises(StreamDedupError) as failed:
        pipeline.advance([])
    assert not isinstance(failed.value, SigningFailedError)
