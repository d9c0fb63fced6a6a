"""Retention against its documented rule, by brute force over exact copies.

Distinct texts and exact copies of them, so the truth needs no sketch: a copy
has Jaccard 1 with its original, and 0 (near enough) with everything else.
Batches are cut as the stage cuts them (at most a generation: a quarter of
``max_documents``, a quarter of ``max_age_seconds`` of event time past the
batch's first record). What the docs promise, with times in order:

- a copy is a duplicate when its original is at most ``max_documents``
  documents back and at most ``max_age_seconds`` older than the newest time
  seen (retention keeps at least that);
- a copy is never matched to a document more than ``max_documents`` and a
  quarter back (and two batches: a generation is sealed after the batch that
  fills it), nor one more than twice ``max_age_seconds`` older than the
  newest time seen before its batch (whole generations go, each spanning
  about a quarter, and a batch joins the generation open before it).
"""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from tests.corpus import make_corpus

TEXTS = make_corpus(200, seed=57, copies=0.0)


@st.composite
def streams(draw: st.DrawFn, max_age: float) -> tuple[list[int], list[float]]:
    """Each document's original (its own position if it is new), and event times in order: ties, and steps up
    to a fifth of ``max_age`` (a longer quiet spell is the known gap of retention forgetting after batches only)."""
    originals: list[int] = []
    for position in range(draw(st.integers(1, 160))):
        copy = position > 0 and draw(st.booleans())
        originals.append(originals[draw(st.integers(0, position - 1))] if copy else position)
    steps = draw(st.lists(st.sampled_from([0.0, 0.0, 0.01, 0.03, 0.1, 0.2]), min_size=len(originals)))
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


@settings(max_examples=60, deadline=None)
@given(st.none() | st.integers(1, 40), st.none() | st.sampled_from([20.0, 60.0, 300.0]), st.integers(1, 50), st.data())
def test_copies_are_caught_while_retained_and_never_long_after(
    max_documents: int | None, max_age: float | None, batch_size: int, data: st.DataObject
) -> None:
    originals, times = data.draw(streams(max_age or 100.0))
    config = DetectionConfig(max_documents=max_documents, max_age_seconds=max_age)
    retention = config.retention()
    capacity = retention.generation_documents
    most = min(batch_size, capacity or batch_size)
    detector = make_detector(config)
    matches: list[int | None] = []
    #: Each document's clock: the newest time of the batches before its own, or its batch's first time.
    clocks: list[float] = []
    start = 0
    for size in stage_batches(times, most, retention.generation_seconds):
        rows = range(start, start + size)
        verdicts = detector.process([str(i) for i in rows], [TEXTS[originals[i]] for i in rows], times[start:][:size])
        matches += [None if v.duplicate_of is None else int(v.duplicate_of) for v in verdicts]
        clocks += [times[start - 1] if start else times[0]] * size
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
            # Measured from the newest time seen before the batch: a batch's first record after a quiet spell
            # meets the index as the spell left it (retention forgets after batches).
            assert max_age is None or clocks[i] - times[match] <= 2 * max_age + 1e-6, (i, match)
