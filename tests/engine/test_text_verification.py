"""Pairs too near the threshold for the sketch, settled by their texts: verdicts as exact brute force gives them.

The stream is real prose (the standard library's documentation) with planted
copies edited at graded strengths, so that many pairs lie near the threshold,
where the one-bit sketch's estimate falls on either side of it. Truth is
exact brute force in stream order over the same shingle hashes.
"""

import math
import random
import string
from functools import cache

import numpy as np
import numpy.typing as npt
import pytest

from benchmarks.corpus import planted_stream
from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector
from stream_dedup.engine.text_verification import ambiguous_pairs, clearly_matched, hiding_bound, hiding_pairs
from stream_dedup.engine.verdict import Verdict
from stream_dedup.text import Shingling, normalize_all
from stream_dedup.text.shingle_sets import ShingleSets, exact_jaccard
from stream_dedup.text.spool import TextSpool
from tests.engine.test_hot_buckets import listings
from tests.engine.test_short_texts import brute_force_duplicates, title_stream
from tests.real_text import stdlib_paragraphs

CONFIG = DetectionConfig(threshold=0.8)


@cache
def stream() -> tuple[list[str], list[str]]:
    """Ids and normalised texts of 1,200 documents, 40% of them edited copies."""
    documents = planted_stream(1200, dup_fraction=0.4, seed=5, paragraphs=stdlib_paragraphs())
    return [d.id for d in documents], normalize_all(d.text for d in documents)


@cache
def shingle_sets() -> ShingleSets:
    _, texts = stream()
    hasher = CONFIG.hasher()
    return ShingleSets.of_texts(texts, hasher.shingling, hasher.seed)


@cache
def best_earlier_jaccard() -> npt.NDArray[np.float64]:
    """Each document's highest exact Jaccard with an earlier one (0 for the first), by brute force."""
    _, texts = stream()
    sets = shingle_sets()
    best = np.zeros(len(texts))
    for i in range(1, len(texts)):
        earlier = np.arange(i)
        best[i] = exact_jaccard(sets.take(np.full(i, i)), sets.take(earlier)).max()
    return best


class CountingTexts:
    """A spool that counts the texts asked for, and can forget some numbers."""

    def __init__(self, spool: TextSpool, forgotten: frozenset[int] = frozenset()) -> None:
        self.spool = spool
        self.forgotten = forgotten
        self.asked = 0

    def texts_of(self, sources: npt.NDArray[np.uint64]) -> list[str | None]:
        self.asked += sources.size
        texts = self.spool.texts_of(sources)
        return [None if n in self.forgotten else t for n, t in zip(sources.tolist(), texts, strict=True)]


def run(batch: int, forgotten: frozenset[int] | None = frozenset()) -> tuple[list[Verdict], Detector, int]:
    """Verdicts of the stream in batches of ``batch``; texts from a spool, none at all if ``forgotten`` is None."""
    ids, texts = stream()
    detector = Detector(CONFIG)
    verdicts: list[Verdict] = []
    with TextSpool() as spool:
        counting = CountingTexts(spool, forgotten or frozenset())
        for start in range(0, len(ids), batch):
            numbers = list(range(start + 1, min(start + batch, len(ids)) + 1))
            spool.add(numbers, texts[start : start + batch])
            verdicts += detector.process(
                ids[start : start + batch],
                texts[start : start + batch],
                normalized=True,
                sources=numbers,
                document_texts=None if forgotten is None else counting,
            )
    return verdicts, detector, counting.asked


def flagged(verdicts: list[Verdict]) -> npt.NDArray[np.bool_]:
    return np.array([v.verdict == "duplicate" for v in verdicts])


def test_the_stream_has_many_pairs_near_the_threshold() -> None:
    best = best_earlier_jaccard()
    assert np.count_nonzero(np.abs(best - 0.8) < 0.05) >= 40


def test_with_texts_every_verdict_is_the_brute_force_one_whatever_the_batches() -> None:
    truth = best_earlier_jaccard() >= CONFIG.threshold
    for batch in (1, 97, 1200):
        verdicts, detector, asked = run(batch)
        assert np.array_equal(flagged(verdicts), truth), f"batch {batch}"
        assert detector.stats.settled_by_text > 0 and detector.stats.unsettled == 0
        # Only the pairs near the threshold ask for texts: far fewer than the candidates.
        assert 0 < asked < detector.stats.candidates


def test_a_match_near_the_threshold_reports_its_exact_similarity() -> None:
    verdicts, _, _ = run(200)
    # A match further out reports its estimate: within 4 standard errors it was settled by the texts.
    near = [(i, v) for i, v in enumerate(verdicts) if v.similarity is not None and abs(v.similarity - 0.8) < 0.07]
    assert len(near) >= 10
    for i, verdict in near:
        assert verdict.match_source is not None
        pair = shingle_sets().take(np.array([i, verdict.match_source - 1]))
        exact = exact_jaccard(pair.take(np.array([0])), pair.take(np.array([1])))[0]
        assert verdict.similarity == round(exact, 4)


def test_without_texts_the_sketch_alone_errs_near_the_threshold() -> None:
    truth = best_earlier_jaccard() >= CONFIG.threshold
    verdicts, detector, _ = run(200, forgotten=None)
    assert not np.array_equal(flagged(verdicts), truth)
    assert detector.stats.settled_by_text == 0


def test_a_text_that_cannot_be_had_leaves_its_pairs_to_the_estimate() -> None:
    ids, _ = stream()
    everything = frozenset(range(1, len(ids) + 1))
    sketch_only, _, _ = run(200, forgotten=None)
    verdicts, detector, asked = run(200, forgotten=everything)
    assert [v.to_dict() for v in verdicts] == [v.to_dict() for v in sketch_only]
    assert detector.stats.settled_by_text == 0 and detector.stats.unsettled > 0 and asked > 0


def test_pairs_are_ambiguous_within_four_standard_errors_of_the_threshold() -> None:
    error = np.sqrt((1 - 0.8**2) / 1024)
    estimates = 0.8 + error * np.array([-4.01, -3.99, 0.0, 3.99, 4.01])
    assert ambiguous_pairs(estimates, 0.8, 1024).tolist() == [1, 2, 3]


def test_titles_and_one_word_texts_settled_by_text_are_brute_forces() -> None:
    # Half the texts are at most 10 characters (a single shingle or none of full length): the hostile end.
    texts = normalize_all(title_stream(2000, seed=17))
    numbers = list(range(1, len(texts) + 1))
    detector = Detector(DetectionConfig(threshold=0.8, shingle_size=10))
    with TextSpool() as spool:
        spool.add(numbers, texts)
        verdicts = detector.process(
            [f"t{n}" for n in numbers], texts, normalized=True, sources=numbers, document_texts=spool
        )
    assert flagged(verdicts).tolist() == brute_force_duplicates(texts, Shingling(unit="char", size=10), 0.8)
    assert detector.stats.settled_by_text > 0


def test_a_row_with_a_pair_six_errors_past_the_ambiguous_band_needs_no_texts_for_its_others() -> None:
    error = np.sqrt((1 - 0.8**2) / 1024)
    estimates = 0.8 + error * np.array([10.01, 0.0, 9.99, 0.0, 1.0])
    rows = np.array([0, 0, 1, 1, 2])
    assert clearly_matched(estimates, rows, 4, 0.8, 1024).tolist() == [True, False, False, False]


def test_reposts_of_a_template_with_an_exact_copy_ask_for_no_text() -> None:
    """Listing platforms repost: every repost here has an exact copy earlier, so its pairs near the threshold
    (the form's other variants) cannot change its verdict or its match, and no text is read for them."""
    variants = listings(seed=4, count=6)
    texts = normalize_all(variants + [variants[i % 6] for i in range(60)])
    asked: list[int] = []

    class Recording:
        def texts_of(self, sources: npt.NDArray[np.uint64]) -> list[str | None]:
            asked.extend(sources.tolist())
            return [texts[n - 1] for n in sources.tolist()]

    numbers = list(range(1, len(texts) + 1))
    detector = Detector(CONFIG)
    verdicts = detector.process(
        [str(n) for n in numbers], texts, normalized=True, sources=numbers, document_texts=Recording()
    )
    assert [v.similarity for v in verdicts[6:]] == [1.0] * 60
    assert [v.match_source for v in verdicts[6:]] == [1 + i % 6 for i in range(60)]
    assert asked and max(asked) <= 6  # only the variants' own pairs near the threshold


def tiny_near_copies(pairs: int, seed: int) -> list[str]:
    """Texts of 3 shingles (7 characters at k=5), each then with a letter added: Jaccard 0.75, below 0.8."""
    rng = random.Random(seed)

    def word() -> str:
        return "".join(rng.choice(string.ascii_lowercase) for _ in range(3))

    texts = []
    for _ in range(pairs):
        text = f"{word()} {word()}"
        texts += [text, text + rng.choice(string.ascii_lowercase)]
    return texts


def judged(texts: list[str], with_texts: bool) -> tuple[list[bool], Detector]:
    numbers = list(range(1, len(texts) + 1))
    detector = Detector(CONFIG)
    with TextSpool() as spool:
        spool.add(numbers, texts)
        verdicts = detector.process(
            [f"t{n}" for n in numbers],
            texts,
            normalized=True,
            sources=numbers,
            document_texts=spool if with_texts else None,
        )
    return flagged(verdicts).tolist(), detector


def test_a_near_copy_of_a_few_shingles_hiding_in_the_sketch_is_settled_by_its_texts() -> None:
    # Its extra shingle landed in a bin the other three fill, and lost there: identical sketches, an estimate
    # of 1 far outside the ambiguous band, and a duplicate at Jaccard 0.75 (1 pair in 300 here).
    texts = normalize_all(tiny_near_copies(1500, seed=3))
    truth = brute_force_duplicates(texts, CONFIG.shingling(), CONFIG.threshold)
    without, _ = judged(texts, with_texts=False)
    assert sum(w and not t for w, t in zip(without, truth, strict=True)) >= 2  # the sketch alone hides some
    flags, detector = judged(texts, with_texts=True)
    assert flags == truth
    assert detector.stats.settled_by_text >= 2


def test_a_near_copy_of_a_few_shingles_with_one_shingle_hidden_is_settled_by_its_texts() -> None:
    # 8 shingles each, 7 shared: Jaccard 7/9 = 0.78. The other's last shingle hides in a bin a shared one
    # fills, so the sketches agree as at 7/8: estimated 0.88, above the ambiguous band, and it was a duplicate.
    texts = ["吟噀俊哬垀倽勩叝囹壽吀刬", "吟噀俊哬垀倽勩叝囹壽吀埡"]
    assert brute_force_duplicates(texts, CONFIG.shingling(), CONFIG.threshold) == [False, False]
    without, _ = judged(texts, with_texts=False)
    assert without == [False, True]  # the sketch alone passes it
    flags, detector = judged(texts, with_texts=True)
    assert flags == [False, False]
    assert detector.stats.settled_by_text == 1


def test_exact_copies_of_a_few_shingles_stay_duplicates_at_similarity_1() -> None:
    texts = normalize_all(["ok then", "thanks!", "ok then", "thanks!", "ok then"])
    numbers = list(range(1, len(texts) + 1))
    with TextSpool() as spool:
        spool.add(numbers, texts)
        verdicts = Detector(CONFIG).process(
            [str(n) for n in numbers], texts, normalized=True, sources=numbers, document_texts=spool
        )
    assert [(v.verdict, v.similarity, v.match_source) for v in verdicts[2:]] == [
        ("duplicate", 1.0, 1),
        ("duplicate", 1.0, 2),
        ("duplicate", 1.0, 1),
    ]


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.9, 0.95])
def test_the_hiding_bound_is_where_a_near_copy_below_the_threshold_hides_with_a_chance_under_1e_9(
    threshold: float,
) -> None:
    def hiding_chance(filled: int) -> float:
        return float(min(filled / 2048, 0.5) ** math.ceil((1 - threshold) * filled))

    bound = hiding_bound(threshold, 1024)
    assert hiding_chance(bound) < 1e-9 <= hiding_chance(bound - 1)
    # Under the bound, every pair the estimate passes (identical sketches, or one shingle hidden); none from it.
    passing = (threshold + 1.0) / 2
    assert hiding_pairs(
        np.array([1.0, 1.0, passing, threshold, threshold - 0.01]),
        np.array([bound - 1, bound, 1, bound - 1, 1], np.uint16),
        threshold,
        1024,
    ).tolist() == [0, 2, 3]
