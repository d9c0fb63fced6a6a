"""Retention against its documented rule, by brute force over exact copies.

Distinct texts and exact copies of them, so the truth needs no sketch: a copy
has Jaccard 1 with its original, and 0 (near enough) with everything else.
Batches are cut as the stage cuts them (at most a generation: a quarter of
``max_documents``, a quarter of ``max_age_seconds`` of event time past the
batch's first record). What the docs promise, with times in order:

- a copy is a duplicate when its original is at most ``max_documents``
  documents back and at most ``max_age_seconds`` older than it (retention
  keeps at least that);
- a copy is never matched to a document more than ``max_documents`` and a
  quarter back (and two batches: a generation is sealed after the batch that
  fills it), nor one ``max_age_seconds`` or more twice over older than it
  (whole generations go, each spanning about a quarter, and a batch up to
  another quarter), even after a quiet spell or a jump in time.
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig, Method
from stream_dedup.engine import make_detector
from tests.corpus import make_corpus

TEXTS = make_corpus(200, seed=57, copies=0.0)


@st.composite
def streams(draw: st.DrawFn, max_age: float) -> tuple[list[int], list[float]]:
    """Each document's original (its own position if it is new), and event times in order: ties, steps up
    to a fifth of ``max_age``, and quiet spells of about one, three and a hundred times ``max_age``."""
    originals: list[int] = []
    for position in range(draw(st.integers(1, 160))):
        copy = position > 0 and draw(st.booleans())
        originals.append(originals[draw(st.integers(0, position - 1))] if copy else position)
    steps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.01, 0.03, 0.1, 0.2, 0.9, 3.0, 100.0]), min_size=len(originals)))
    return originals, (max_age * np.cumsum(steps[: len(originals)])).tolist()


def stage_batches(times: list[float], most: int, span: float | None) -> list[int]:
    """Batch sizes as the stage's intake cuts them: at most ``most`` records, none ``span`` past the first."""
    sizes, start = [], 0
    while start < len(times):
        stop = start + 1
        while stop < len(times) and stop - start < most and (span is None or times[stop] <= times[start] + span):
            stop += 1
        sizes.append(stop - start)
        start = stop
    return sizes


@settings(max_examples=90, deadline=None)
@given(
    st.sampled_from(["minhash", "simhash", "combined"]),
    st.none() | st.integers(1, 40),
    st.none() | st.sampled_from([20.0, 60.0, 300.0]),
    st.integers(1, 50),
    st.data(),
)
def test_copies_are_caught_while_retained_and_never_long_after(
    method: Method, max_documents: int | None, max_age: float | None, batch_size: int, data: st.DataObject
) -> None:
    originals, times = data.draw(streams(max_age or 100.0))
    config = DetectionConfig(method=method, max_documents=max_documents, max_age_seconds=max_age)
    retention = config.retention()
    capacity = retention.generation_documents
    most = min(batch_size, capacity or batch_size)
    detector = make_detector(config)
    matches: list[int | None] = []
    start = 0
    for size in stage_batches(times, most, retention.generation_seconds):
        rows = range(start, start + size)
        verdicts = detector.process([str(i) for i in rows], [TEXTS[originals[i]] for i in rows], times[start:][:size])
        matches += [None if v.duplicate_of is None else int(v.duplicate_of) for v in verdicts]
        start += size

    for i, match in enumerate(matches):
        retained = [
            j
            for j in range(i)
            if originals[j] == originals[i]
            and (max_documents is None or i - j <= max_documents)
            and (max_age is None or times[j] >= times[i] - max_age)
        ]
        if retained:
            assert match is not None, f"document {i} missed its copy {retained[-1]}, still retained"
        if match is not None:
            assert originals[match] == originals[i]
            # A generation is sealed after the batch that fills it: it may hold a batch less one past a quarter.
            assert max_documents is None or i - match <= max_documents + (capacity or 0) + 2 * most - 2, (i, match)
            # Measured from its own time: the batch's first record evicts before the batch is judged.
            assert max_age is None or times[i] - times[match] < 2 * max_age, (i, match)


def _verdicts(batches: list[tuple[list[int], list[float]]]) -> list[tuple[str, str | None]]:
    """(verdict, duplicate_of) of each document of ``batches`` (TEXTS by number, event times), under
    ``max_age_seconds = 60``; ids are ``d<number>@<time>``."""
    detector = make_detector(DetectionConfig(max_age_seconds=60.0))
    out = []
    for numbers, times in batches:
        ids = [f"d{n}@{t:g}" for n, t in zip(numbers, times, strict=True)]
        verdicts = detector.process(ids, [TEXTS[n][0] for n in numbers], event_times=times)
        out += [(v.verdict, v.duplicate_of) for v in verdicts]
    return out


def test_a_record_stamped_before_its_batch_lives_as_long_as_its_generation_as_documented() -> None:
    # docs/how-it-works.md (retention): 500 s before the rest of its batch, matched 550 s after its stamp.
    verdicts = _verdicts([([1, 2, 3, 0], [500.0, 500.0, 500.0, 0.0]), ([0], [550.0])])
    assert verdicts[-1] == ("duplicate", "d0@0")


def test_a_record_an_hour_ahead_alone_in_its_batch_holds_retention_for_that_hour_as_documented() -> None:
    # docs/how-it-works.md (retention): every generation evicted at once, then copies 1,800 s apart matched.
    verdicts = _verdicts([([0], [0.0]), ([1], [3600.0]), ([0], [600.0]), ([2], [700.0]), ([2], [2500.0])])
    assert verdicts[2] == ("unique", None)
    assert verdicts[4] == ("duplicate", "d2@700")
