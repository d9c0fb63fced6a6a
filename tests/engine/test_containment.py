"""Containment verdicts, checked against exact containment computed by brute force on the shingle sets.

Truth never comes from the code under test: it is every earlier document's
exact containment, both ways, over the shingle strings of
:func:`~stream_dedup.text.shingle_set`. The streams are real prose (the
standard library's docstrings) with planted excerpts and expansions
(``benchmarks.corpus.containment_stream``).
"""

import functools
from dataclasses import dataclass, replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.corpus import Document, containment_stream
from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector, Verdict, make_detector
from stream_dedup.engine.containment import containment_standard_error, estimated_intersection
from stream_dedup.engine.detection import DetectorStats
from stream_dedup.errors import ConfigError
from stream_dedup.sketch.bit_sketch import bit_agreements, estimate_similarity
from stream_dedup.text import Shingling, normalize, shingle_set
from stream_dedup.text.spool import TextSpool
from tests.real_text import stdlib_paragraphs, texts_sharing_a_signature

CONTAINMENT = DetectionConfig(containment_threshold=0.8)
#: The measured spread of the estimate is within this factor of the delta-method standard error,
#: down to sets of 20 shingles (one-permutation bins of small sets are not independent).
_SMALL_SET_FACTOR = 1.4


@dataclass(frozen=True)
class Truth:
    """One document's exact relations to the earlier ones (pairs within the size ratio only)."""

    near_duplicate: bool
    contained_in: dict[int, float]
    contains: dict[int, float]

    @property
    def positive(self) -> bool:
        return not self.near_duplicate and bool(self.contained_in or self.contains)


@functools.cache
def planted_stream() -> tuple[Document, ...]:
    return tuple(containment_stream(700, paragraphs=stdlib_paragraphs(), seed=5))


@functools.cache
def exact_sets(texts: tuple[str, ...]) -> tuple[frozenset[str], ...]:
    return tuple(frozenset(shingle_set(normalize(text), Shingling())) for text in texts)


def brute_force(sets: tuple[frozenset[str], ...], config: DetectionConfig) -> list[Truth]:
    """Every pair, in stream order: near-duplicate (exact Jaccard), and containment both ways within the ratio."""
    assert config.containment_threshold is not None
    c, ratio = config.containment_threshold, config.containment_max_ratio
    truths = []
    for i, document in enumerate(sets):
        near, inside, holds = False, {}, {}
        for j in range(i):
            shared = len(document & sets[j])
            q, x = len(document), len(sets[j])
            near |= shared / (q + x - shared) >= config.threshold
            if max(q, x) <= ratio * min(q, x):
                if shared / q >= c:
                    inside[j] = shared / q
                if shared / x >= c:
                    holds[j] = shared / x
        truths.append(Truth(near, inside, holds))
    return truths


def judge(config: DetectionConfig, documents: tuple[Document, ...], batch: int = 100) -> list[Verdict]:
    detector = make_detector(config)
    verdicts: list[Verdict] = []
    for start in range(0, len(documents), batch):
        part = documents[start : start + batch]
        ids, texts = [d.id for d in part], [d.text for d in part]
        verdicts += detector.process(ids, texts, sources=range(start, start + len(part)))
    return verdicts


def exact_containment(verdict: Verdict, row: int, sets: tuple[frozenset[str], ...]) -> float:
    """The exact containment a containment verdict claims, in its direction (its source is the match's row)."""
    assert verdict.match_source is not None
    document, match = sets[row], sets[verdict.match_source]
    contained = document if verdict.verdict == "contained" else match
    return len(document & match) / len(contained)


@functools.cache
def stream_and_truth(config: DetectionConfig) -> tuple[tuple[Document, ...], tuple[frozenset[str], ...], list[Truth]]:
    documents = planted_stream()
    sets = exact_sets(tuple(d.text for d in documents))
    return documents, sets, brute_force(sets, config)


def test_containment_verdicts_agree_with_brute_force_on_planted_excerpts_and_expansions() -> None:
    documents, sets, truths = stream_and_truth(CONTAINMENT)
    verdicts = judge(CONTAINMENT, documents)
    flagged = [(i, v) for i, v in enumerate(verdicts) if v.verdict in ("contained", "contains")]
    correct = [(i, v) for i, v in flagged if exact_containment(v, i, sets) >= 0.8]
    positives = [i for i, t in enumerate(truths) if t.positive]
    found = [i for i in positives if verdicts[i].verdict in ("contained", "contains")]
    assert len(positives) > 80
    assert {d.edit for d in documents} >= {"excerpt", "expansion"}
    # The estimate errs by 0.017 (equal sizes) to 0.047 (sizes 2x apart) at c = 0.8, and few planted
    # pairs sit right at the threshold: on 3,000 documents of the benchmark corpus, 1.0 and 1.0.
    assert len(correct) / len(flagged) >= 0.97
    assert len(found) / len(positives) >= 0.97
    for row, verdict in flagged:
        assert verdict.containment is not None and verdict.similarity is not None
        exact = exact_containment(verdict, row, sets)
        q, x = len(sets[row]), len(sets[verdict.match_source or 0])
        ratio = max(q, x) / min(q, x)
        assert ratio <= CONTAINMENT.containment_max_ratio
        bound = 6 * _SMALL_SET_FACTOR * containment_standard_error(exact, ratio, CONTAINMENT.sketch_bits)
        assert abs(verdict.containment - exact) <= bound + 1e-4, (row, verdict, exact)


def judge_with_texts(
    config: DetectionConfig, texts: list[str], batch: int = 100
) -> tuple[list[Verdict], DetectorStats]:
    """Verdicts with the texts at hand, as ``dedup`` and the stage have them: sources 1, 2, ... by row."""
    detector = make_detector(config)
    verdicts: list[Verdict] = []
    with TextSpool() as spool:
        for start in range(0, len(texts), batch):
            part, sources = texts[start : start + batch], range(start + 1, min(start + batch, len(texts)) + 1)
            spool.add(sources, [normalize(text) for text in part])
            verdicts += detector.process([f"t{i}" for i in sources], part, sources=sources, document_texts=spool)
    by_row = [v._replace(match_source=None if v.match_source is None else v.match_source - 1) for v in verdicts]
    return by_row, detector.stats


def test_containment_near_the_threshold_is_settled_by_the_texts_when_they_are_at_hand() -> None:
    texts = texts_sharing_a_signature(400)
    sets = exact_sets(tuple(texts))

    def below_threshold(verdicts: list[Verdict]) -> list[int]:
        return [
            row
            for row, v in enumerate(verdicts)
            if v.verdict in ("contained", "contains") and exact_containment(v, row, sets) < 0.8
        ]

    # Without texts (sources only), the highest of many estimates near the threshold passes it.
    assert below_threshold(judge(CONTAINMENT, tuple(Document(str(i), t) for i, t in enumerate(texts))))
    verdicts, stats = judge_with_texts(CONTAINMENT, texts)
    assert not below_threshold(verdicts)
    assert stats.settled_by_text > 0 and stats.unsettled == 0
    exact, _ = judge_with_texts(replace(CONTAINMENT, verification="exact"), texts)
    assert [(v.verdict, v.duplicate_of) for v in verdicts] == [(v.verdict, v.duplicate_of) for v in exact]
    assert sum(v.verdict in ("contained", "contains") for v in verdicts) > 25


def test_contained_is_reported_before_contains_and_names_the_best_match() -> None:
    documents, sets, truths = stream_and_truth(CONTAINMENT)
    verdicts = judge(CONTAINMENT, documents)
    for row, (verdict, truth) in enumerate(zip(verdicts, truths, strict=True)):
        if verdict.verdict == "contains":
            # No earlier document holds this one clearly enough to have been reported instead.
            assert all(value < 0.8 + 0.15 for value in truth.contained_in.values()), (row, verdict)
        if verdict.verdict in ("contained", "contains") and truth.positive:
            relation = truth.contained_in if verdict.verdict == "contained" else truth.contains
            best = max(relation.values(), default=0.0)
            assert exact_containment(verdict, row, sets) >= best - 0.15, (row, verdict, best)


def test_exact_verification_reports_only_true_containment_with_its_exact_value() -> None:
    config = DetectionConfig(containment_threshold=0.8, verification="exact")
    documents, sets, truths = stream_and_truth(config)
    verdicts = judge(config, documents)
    flagged = [(i, v) for i, v in enumerate(verdicts) if v.verdict in ("contained", "contains")]
    for row, verdict in flagged:
        exact = exact_containment(verdict, row, sets)
        assert exact >= 0.8
        # Sets hold the high 32 bits of 64-bit shingle hashes: a collision inside a document is rare.
        assert verdict.containment == pytest.approx(exact, abs=2e-3)
    positives = [i for i, t in enumerate(truths) if t.positive]
    found = [i for i in positives if verdicts[i].verdict in ("contained", "contains")]
    assert len(found) / len(positives) >= 0.97


@pytest.mark.parametrize("method", ["minhash", "combined"])
def test_containment_finds_the_same_near_duplicates_through_its_own_bands(method: str) -> None:
    # With containment on, near-duplicates are found through the containment banding (each pair at the
    # threshold with probability >= min_recall, as through the Jaccard bands), and verified the same way.
    documents = planted_stream()
    without = judge(DetectionConfig(method=method), documents)  # type: ignore[arg-type]
    with_containment = judge(DetectionConfig(method=method, containment_threshold=0.8), documents)  # type: ignore[arg-type]
    duplicates = [i for i, v in enumerate(without) if v.verdict == "duplicate"]
    same = sum(with_containment[i] == without[i] for i in duplicates)
    assert len(duplicates) >= 10 and same >= 0.99 * len(duplicates)  # combined (SimHash within 3 bits) finds few
    assert sum(v.verdict == "duplicate" for v in with_containment) <= len(duplicates) * 1.01 + 1
    for plain, extended in zip(without, with_containment, strict=True):
        if plain.verdict == "unique" and extended.verdict != "unique":
            assert extended.verdict in ("contained", "contains", "duplicate")
    assert sum(v.verdict in ("contained", "contains") for v in with_containment) > 80


@pytest.mark.parametrize("batch", [1, 37, 700])
def test_containment_verdicts_do_not_depend_on_batch_boundaries(batch: int) -> None:
    documents = planted_stream()[:300]
    assert judge(CONTAINMENT, documents, batch) == judge(CONTAINMENT, documents, 100)


def test_pairs_beyond_the_size_ratio_are_not_judged() -> None:
    article = " ".join(stdlib_paragraphs()[:3])
    quote = " ".join(article.split(" ")[: len(article.split(" ")) // 3])
    for ratio, expected in ((2.0, "unique"), (4.0, "contained")):
        detector = Detector(DetectionConfig(containment_threshold=0.8, containment_max_ratio=ratio))
        verdict = detector.process(["article", "quote"], [article, quote])[1]
        assert verdict.verdict == expected, (ratio, verdict)


def test_contained_wins_over_contains_for_the_same_document() -> None:
    paragraphs = stdlib_paragraphs()
    first = next(p for p in paragraphs if 500 <= len(p) <= 700)
    second = next(p for p in paragraphs if 0.4 * len(first) <= len(p) <= 0.5 * len(first))
    third = next(p for p in paragraphs if 0.6 * len(first) <= len(p) <= 0.7 * len(first))
    # "middle" holds all of "quoted" (sizes ~1.45x apart) and is held by "article" (~1.45x): both relations
    # hold, and it is a near-duplicate of neither.
    texts = {"quoted": first, "article": f"{first} {second} {third}", "middle": f"{first} {second}"}
    sets = exact_sets(tuple(texts.values()))
    assert len(sets[0] & sets[2]) / len(sets[0]) >= 0.95 and len(sets[1] & sets[2]) / len(sets[2]) >= 0.95
    detector = Detector(CONTAINMENT)
    verdicts = detector.process(list(texts), list(texts.values()), sources=[0, 1, 2])
    assert verdicts[2].verdict == "contained", verdicts
    assert verdicts[2].duplicate_of == "article" and verdicts[2].match_source == 1
    assert verdicts[2].containment is not None and verdicts[2].containment >= 0.9


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(20, 600),
    ratio=st.floats(1.0, 3.0),
    share=st.floats(0.3, 1.0),
    seed=st.integers(1, 2**31),
)
def test_estimated_containment_is_within_its_error_of_the_exact_one(
    size: int, ratio: float, share: float, seed: int
) -> None:
    # One-word shingles of distinct words: a text is exactly its set of words.
    shared = max(1, round(share * size))
    other_size = max(shared, round(size * ratio))
    words = [f"w{i}" for i in range(size)]
    other = words[:shared] + [f"v{i}" for i in range(other_size - shared)]
    config = DetectionConfig(shingle_unit="word", shingle_size=1, seed=seed, containment_threshold=0.8)
    signed = Detector(config).sign([" ".join(words), " ".join(other)])
    assert signed.set_sizes is not None
    assert signed.set_sizes.tolist() == [size, other_size]
    jaccard = estimate_similarity(bit_agreements(signed.sketches[:1], signed.sketches[1:]), config.sketch_bits)
    intersection = float(estimated_intersection(jaccard, size, other_size)[0])
    for estimate, exact, sizes_ratio in ((intersection / size, shared / size, other_size / size),):
        error = containment_standard_error(exact, sizes_ratio, config.sketch_bits)
        assert abs(estimate - exact) <= 6 * _SMALL_SET_FACTOR * error + 1e-9
    contained_other = intersection / other_size
    error = containment_standard_error(shared / other_size, size / other_size, config.sketch_bits)
    assert abs(contained_other - shared / other_size) <= 6 * _SMALL_SET_FACTOR * error + 1e-9


def test_estimated_containment_is_unbiased_and_as_precise_as_its_error_says() -> None:
    size, other_size, shared = 300, 600, 240  # c = 0.8, sizes 2x apart: standard error 0.047
    errors = []
    for seed in range(1, 81):
        config = DetectionConfig(shingle_unit="word", shingle_size=1, seed=seed, containment_threshold=0.8)
        words = [f"w{i}" for i in range(size)]
        other = words[:shared] + [f"v{i}" for i in range(other_size - shared)]
        signed = Detector(config).sign([" ".join(words), " ".join(other)])
        jaccard = estimate_similarity(bit_agreements(signed.sketches[:1], signed.sketches[1:]), 1024)
        errors.append(float(estimated_intersection(jaccard, size, other_size)[0]) / size - 0.8)
    expected = containment_standard_error(0.8, 2.0, 1024)
    assert abs(np.mean(errors)) <= 3 * expected / np.sqrt(len(errors))
    assert 0.7 * expected <= np.std(errors) <= _SMALL_SET_FACTOR * expected


@pytest.mark.parametrize(
    ("setting", "kwargs"),
    [
        ("containment_threshold", {"containment_threshold": 1.0}),
        ("containment_threshold", {"containment_threshold": 0.0}),
        ("containment_threshold", {"containment_threshold": 0.8, "method": "simhash"}),
        ("containment_max_ratio", {"containment_max_ratio": 0.5}),
        ("containment_max_ratio", {"containment_threshold": 0.5, "containment_max_ratio": 64.0}),
        ("containment_min_recall", {"containment_min_recall": 1.0}),
        # The containment banding serves the near-duplicate search too, at min_recall: a math domain error before.
        ("min_recall", {"containment_threshold": 0.8, "min_recall": 1.0}),
        ("min_recall", {"containment_threshold": 0.8, "min_recall": 2.0}),
        ("min_recall", {"containment_threshold": 0.8, "min_recall": float("nan")}),
        # Taken without a word before (one band of one row would do).
        ("min_recall", {"containment_threshold": 0.8, "min_recall": 0.0}),
        ("containment_bands", {"containment_bands": 10}),
        ("containment_bands", {"containment_threshold": 0.8, "containment_bands": 0, "containment_rows_per_band": 2}),
        ("containment_rows_per_band", {"containment_bands": 4, "containment_rows_per_band": 0}),
        ("bands", {"containment_threshold": 0.8, "bands": 16, "rows_per_band": 6}),
        ("containment_bands", {"containment_threshold": 0.8, "containment_bands": 70, "containment_rows_per_band": 2}),
    ],
)
def test_bad_containment_settings_name_the_setting(setting: str, kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=f"'{setting}'"):
        DetectionConfig(**kwargs)  # type: ignore[arg-type]


def test_containment_settings_change_the_fingerprints_only_when_containment_is_on() -> None:
    plain = DetectionConfig()
    idle = DetectionConfig(containment_max_ratio=3.0, containment_min_recall=0.9)
    assert (idle.fingerprint(), idle.signature_fingerprint()) == (plain.fingerprint(), plain.signature_fingerprint())
    on = DetectionConfig(containment_threshold=0.8)
    assert on.fingerprint() != plain.fingerprint()
    assert on.signature_fingerprint() != plain.signature_fingerprint()
    # The threshold decides verdicts, not what is stored: with the banding fixed, only the fingerprint moves.
    fixed = {"containment_bands": 20, "containment_rows_per_band": 2}
    low, high = DetectionConfig(containment_threshold=0.7, **fixed), DetectionConfig(containment_threshold=0.9, **fixed)
    assert low.signature_fingerprint() == high.signature_fingerprint()
    assert low.fingerprint() != high.fingerprint()
