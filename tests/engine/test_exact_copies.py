"""Streams of many exact copies: each copy is measured against its earliest copy only, and verdicts stay as they were.

The reference is the detector measuring every candidate (no row bounded by
an exact copy, ``engine.exact_copies``): same matches, same similarities,
under retention that evicts a text's earliest copy, the hot-bucket cap,
both verifications, the combined method, containment, slots, and near-copies
of a few shingles that hide in a copy's sketch (a row whose bound fails).
"""

from collections.abc import Iterator
from contextlib import contextmanager
from unittest import mock

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector, Verdict
from stream_dedup.engine.exact_copies import NO_BOUND
from stream_dedup.lsh.generation import IndexedBatch, SignedBatch
from stream_dedup.lsh.index import BandIndex
from stream_dedup.text import normalize_all
from stream_dedup.text.spool import TextSpool
from tests.corpus import make_corpus
from tests.engine.test_sharding import batches_of, single_and_sharded

LONG = make_corpus(6, seed=5, copies=0.0)
SHORT = ["flat to rent near the park", "room in a quiet house, garden", "ok then", "thanks!"]
#: A 7-character text and the same with a letter added, Jaccard 0.75, whose sketches are identical.
HIDING = ["scp dln", "scp dlny"]  # (found among tests.engine.test_text_verification.tiny_near_copies)


def no_stored_bounds(index: BandIndex, batch: SignedBatch) -> tuple[np.ndarray, np.ndarray]:
    """No row bounded by a stored copy, and every row asking for its batch's earlier rows."""
    return np.full(len(batch), NO_BOUND, dtype=np.int64), np.ones(len(batch), dtype=bool)


def no_batch_bounds(bounds: np.ndarray, *_: object) -> np.ndarray:
    return bounds


@contextmanager
def every_candidate_measured() -> Iterator[None]:
    """No row bounded by an exact copy: every candidate measured, as before exact copies bounded them."""
    with (
        mock.patch("stream_dedup.engine.detector.stored_copy_bounds", no_stored_bounds),
        mock.patch("stream_dedup.engine.detector.batch_copy_bounds", no_batch_bounds),
    ):
        yield


def judged(config: DetectionConfig, texts: list[str], sizes: list[int]) -> tuple[list[Verdict], Detector]:
    """Verdicts of ``texts`` in batches of ``sizes`` (then of the rest), pairs near the threshold settled by text."""
    texts = normalize_all(texts)
    numbers = list(range(1, len(texts) + 1))
    detector = Detector(config)
    verdicts: list[Verdict] = []
    with TextSpool() as spool:
        spool.add(numbers, texts)
        start = 0
        for size in [*sizes, len(texts)]:
            rows = slice(start, start + size)
            verdicts += detector.process(
                [f"d{n}" for n in numbers[rows]],
                texts[rows],
                event_times=np.array(numbers[rows], dtype=float),
                normalized=True,
                sources=numbers[rows],
                document_texts=spool,
            )
            start += size
    return verdicts, detector


def test_the_sketches_of_the_hiding_pair_are_identical() -> None:
    # What the streams below need: a near-copy that a copy's sketch cannot tell apart from its original.
    signed = Detector(DetectionConfig()).sign(HIDING)
    assert (signed.sketches[0] == signed.sketches[1]).all()


configs = st.sampled_from(
    [
        DetectionConfig(),
        DetectionConfig(verification="exact"),
        DetectionConfig(max_bucket_size=2),
        DetectionConfig(max_bucket_size=3, max_documents=12),
        DetectionConfig(verification="exact", max_bucket_size=4, max_documents=8),
        DetectionConfig(threshold=0.99),
        DetectionConfig(method="combined", max_hamming=4, max_bucket_size=3),
        DetectionConfig(max_age_seconds=20.0, max_bucket_size=2),
        DetectionConfig(max_bucket_size=4, index_slots=6, max_documents=16),
        DetectionConfig(threshold=0.9, containment_threshold=0.7, max_bucket_size=3),
    ]
)


@st.composite
def copy_streams(draw: st.DrawFn) -> tuple[list[str], list[int]]:
    """Mostly exact copies (some differing in case and spacing only), near-copies, the hiding pair, new texts;
    and batch sizes."""
    pool = [*LONG, *SHORT, *HIDING]
    texts: list[str] = []
    for _ in range(draw(st.integers(1, 120))):
        kind = draw(st.sampled_from(["copy", "copy", "copy", "copy", "spaced", "edited", "new"]))
        base = draw(st.sampled_from(texts or pool))
        if kind == "spaced":
            base = "  " + base.upper()
        elif kind == "edited":
            words = base.split()
            words[draw(st.integers(0, len(words) - 1))] = draw(st.sampled_from(["ok", "park", "xx"]))
            base = " ".join(words)
        elif kind == "new":
            base = draw(st.sampled_from(pool))
        texts.append(base)
    return texts, draw(st.lists(st.integers(1, 30), max_size=6))


@settings(max_examples=120, deadline=None)
@given(config=configs, stream=copy_streams())
def test_verdicts_of_streams_of_copies_are_those_of_measuring_every_candidate(
    config: DetectionConfig, stream: tuple[list[str], list[int]]
) -> None:
    texts, sizes = stream
    bounded, _ = judged(config, texts, sizes)
    with every_candidate_measured():
        expected, _ = judged(config, texts, sizes)
    assert bounded == expected


def test_a_copy_is_measured_against_its_earliest_copy_only_and_names_it() -> None:
    # Copies of five texts fill every band value's hot bucket; each copy's best is its text's first document.
    texts = [[*LONG[:2], *SHORT[:3]][i % 5] for i in range(1500)]
    verdicts, detector = judged(DetectionConfig(), texts, [1, 99, 400, 7])
    assert [v.duplicate_of for v in verdicts[5:]] == [f"d{i % 5 + 1}" for i in range(5, 1500)]
    assert {v.similarity for v in verdicts[5:]} == {1.0}
    assert detector.stats.candidates == 1495  # one pair a copy; measuring every candidate: about 120 a copy
    assert detector.hot_bucket_skips > 0
    with every_candidate_measured():
        _, reference = judged(DetectionConfig(), texts, [1, 99, 400, 7])
    assert reference.stats.candidates > 100 * 1495


def test_copies_of_a_near_copy_hiding_in_its_original_s_sketch_name_the_near_copy() -> None:
    # Their earliest copy under the content key is the original, at 0.75 by text: no bound, every candidate.
    texts = [HIDING[0], HIDING[1], HIDING[1], HIDING[0], HIDING[1]]
    verdicts, detector = judged(DetectionConfig(), texts, [2])
    assert [(v.duplicate_of, v.similarity) for v in verdicts] == [
        (None, None),
        (None, None),
        ("d2", 1.0),
        ("d1", 1.0),
        ("d2", 1.0),
    ]
    assert detector.stats.settled_by_text >= 4


def test_three_shards_judge_a_stream_of_copies_as_one_detector() -> None:
    texts = [[*LONG[:2], *SHORT, *HIDING][i % 8] for i in range(400)]
    config = DetectionConfig(max_bucket_size=6, index_slots=6, max_documents=90)
    with TextSpool() as spool:
        spool.add(list(range(1, 401)), normalize_all(texts))
        expected, merged = single_and_sharded(config, batches_of(texts, 37, "c"), 3, spool)
    assert merged == expected


def test_a_row_whose_content_key_collides_with_a_stored_document_still_pairs_with_its_batch() -> None:
    """Content keys are 32-bit hashes of a sketch: an index of millions holds some other sketch's key.

    A row whose content key finds a stored document of another sketch is not
    bounded by it, so it keeps every candidate, its batch's earlier rows too.
    """
    stored, original = LONG[0], LONG[1]
    near_copy = original.replace(" ", "  ", 1) + " and one more word"
    detector = Detector(DetectionConfig())
    detector.process(["stored"], [stored], event_times=np.array([1.0]))
    signed = detector.sign([original, near_copy])
    assert not (signed.sketches[0] == signed.sketches[1]).all()
    keys = signed.keys.copy()
    keys[1, -1] = detector.sign([stored]).keys[0, -1]  # the near-copy's content key collides with the stored one's
    collided = SignedBatch(signed.sketches, keys, filled_bins=signed.filled_bins)
    batch = IndexedBatch(["original", "near-copy"], collided, np.array([2.0, 3.0]), np.array([2, 3], dtype=np.uint64))
    verdicts = detector.process_signed(batch)
    assert verdicts[1].duplicate_of == "original"
