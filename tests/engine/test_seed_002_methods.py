"""The simhash and combined methods, checked against brute force over the same fingerprints and sketches.

Truth here never comes from the index under test: SimHash verdicts are
recomputed by comparing every document with every earlier one (XOR and
popcount), and combined verdicts from the MinHash detector's own pairs
filtered by brute-force Hamming distances.
"""

import functools
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.corpus import near_duplicate
from stream_dedup.cli.settings_sources import resolve_settings
from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector, Verdict, make_detector
from stream_dedup.engine.snapshot import load_snapshot, save_snapshot
from stream_dedup.engine.text_verification import AMBIGUITY_ERRORS
from stream_dedup.errors import ConfigError, IncompatibleSnapshotError
from stream_dedup.sketch.simhash import hamming_distance
from stream_dedup.text import normalize, shingle_chunks, shingle_set
from stream_dedup.text.spool import TextSpool
from tests.corpus import make_corpus
from tests.real_text import stdlib_paragraphs

SIMHASH = DetectionConfig(method="simhash", max_hamming=3, max_bucket_size=10_000)


def brute_force_simhash(texts: list[str], config: DetectionConfig) -> list[tuple[int, int] | None]:
    """For each document: ``(earlier index, distance)`` of its nearest earlier fingerprint within k, earliest first."""
    prints = config.simhasher().fingerprints(texts)
    best: list[tuple[int, int] | None] = []
    for i in range(len(texts)):
        distances = hamming_distance(prints[i], prints[:i]).astype(int)
        near = np.flatnonzero(distances <= config.max_hamming)
        if near.size == 0:
            best.append(None)
        else:
            nearest = near[np.argmin(distances[near])]  # argmin takes the first, i.e. earliest, of equals
            best.append((int(nearest), int(distances[nearest])))
    return best


def run_in_batches(detector_texts: list[str], config: DetectionConfig, sizes: list[int]) -> list[Verdict]:
    detector = make_detector(config)
    ids = [f"d{i}" for i in range(len(detector_texts))]
    verdicts: list[Verdict] = []
    start, turn = 0, 0
    while start < len(ids):
        stop = start + sizes[turn % len(sizes)]
        verdicts += detector.process(
            ids[start:stop], detector_texts[start:stop], sources=range(start, len(ids))[: stop - start]
        )
        start, turn = stop, turn + 1
    return verdicts


@settings(max_examples=25, deadline=None)
@given(
    words=st.lists(
        st.sampled_from(["red", "car", "fast", "blue", "road", "sun", "a", "the"]), min_size=40, max_size=80
    ),
    cuts=st.lists(st.integers(0, 60), min_size=8, max_size=30),
    sizes=st.lists(st.integers(1, 9), min_size=1, max_size=4),
)
def test_simhash_verdicts_equal_brute_force_whatever_the_batches(
    words: list[str], cuts: list[int], sizes: list[int]
) -> None:
    # Windows of one word sequence: many pairs within a few bits, some exact copies, some far apart.
    texts = [" ".join(words[c : c + 12]) or "empty" for c in cuts]
    verdicts = run_in_batches(texts, SIMHASH, sizes)
    for i, (verdict, truth) in enumerate(zip(verdicts, brute_force_simhash(texts, SIMHASH), strict=True)):
        if truth is None:
            assert verdict.verdict == "unique", (i, verdict)
        else:
            earlier, distance = truth
            assert (verdict.verdict, verdict.duplicate_of, verdict.hamming_distance) == (
                "duplicate",
                f"d{earlier}",
                distance,
            )
            assert verdict.similarity == round(1 - distance / 64, 4)
            assert verdict.match_source == earlier


def test_simhash_on_real_near_copies_matches_brute_force() -> None:
    texts = make_corpus(600, seed=3)
    verdicts = run_in_batches(texts, SIMHASH, [64])
    truth = brute_force_simhash(texts, SIMHASH)
    assert sum(t is not None for t in truth) >= 25
    assert [v.duplicate_of for v in verdicts] == [None if t is None else f"d{t[0]}" for t in truth]


def test_every_exact_copy_is_found_past_the_hot_cluster_cap() -> None:
    config = DetectionConfig(method="simhash", max_bucket_size=2)
    detector = make_detector(config)
    texts = ["the same boilerplate footer of a listing"] * 30 + ["another footer, quite different"] * 5
    verdicts = detector.process([f"c{i}" for i in range(len(texts))], texts)
    assert verdicts[0].verdict == verdicts[30].verdict == "unique"
    assert all(v.duplicate_of == "c0" and v.hamming_distance == 0 for v in verdicts[1:30])
    assert all(v.duplicate_of == "c30" and v.hamming_distance == 0 for v in verdicts[31:])
    assert detector.hot_bucket_skips == 33  # copies are kept, not entered in the tables again


@pytest.mark.parametrize(
    "config",
    [
        # Retention evicts, and a hot cluster (the banner) keeps documents out of the tables.
        DetectionConfig(method="simhash", max_bucket_size=3, max_documents=400),
        DetectionConfig(method="combined", max_documents=400),
    ],
    ids=["simhash", "combined"],
)
def test_a_snapshot_resumes_with_the_verdicts_of_one_run(tmp_path: Path, config: DetectionConfig) -> None:
    texts = make_corpus(900, seed=4) + ["a repeated banner line"] * 20
    ids = [f"d{i}" for i in range(len(texts))]
    uninterrupted = make_detector(config).process(ids, texts, event_times=[0.0] * len(texts))
    first = make_detector(config)
    first.process(ids[:500], texts[:500], event_times=[0.0] * 500)
    save_snapshot(first, tmp_path / "s.snap")
    restored, _ = load_snapshot(tmp_path / "s.snap", config)
    assert type(restored) is type(first)
    assert (len(restored), restored.evicted_documents, restored.hot_bucket_skips) == (
        len(first),
        first.evicted_documents,
        first.hot_bucket_skips,
    )
    resumed = restored.process(ids[500:], texts[500:], event_times=[0.0] * (len(texts) - 500))
    assert resumed == uninterrupted[500:]
    assert any(v.hamming_distance is not None for v in resumed)


def test_a_snapshot_of_another_method_is_refused_naming_the_method(tmp_path: Path) -> None:
    detector = make_detector(DetectionConfig())
    detector.process(["a"], ["some text to index"])
    save_snapshot(detector, tmp_path / "m.snap")
    with pytest.raises(IncompatibleSnapshotError, match="method='minhash' but this run uses method='simhash'"):
        load_snapshot(tmp_path / "m.snap", DetectionConfig(method="simhash"))


def test_combined_duplicates_are_minhash_duplicates_that_simhash_confirms() -> None:
    texts = make_corpus(800, seed=5)
    ids = [f"d{i}" for i in range(len(texts))]
    combined_config = DetectionConfig(method="combined", max_hamming=4)
    combined = make_detector(combined_config).process(ids, texts, sources=range(len(texts)))
    minhash = Detector(DetectionConfig()).process(ids, texts, sources=range(len(texts)))
    prints = combined_config.simhasher().fingerprints(texts)
    confirmed = 0
    for i, (both, alone) in enumerate(zip(combined, minhash, strict=True)):
        if both.verdict == "duplicate":
            assert both.match_source is not None and both.similarity is not None
            assert both.similarity >= 0.8
            assert both.hamming_distance == int(hamming_distance(prints[i], prints[both.match_source]))
            assert both.hamming_distance <= 4
            assert alone.verdict == "duplicate"  # never a pair MinHash alone would not report
        elif alone.verdict == "duplicate" and alone.match_source is not None:
            # MinHash's best match was not within 4 bits (else it would be kept).
            assert int(hamming_distance(prints[i], prints[alone.match_source])) > 4
        confirmed += both.verdict == "duplicate"
    assert 0 < confirmed < sum(v.verdict == "duplicate" for v in minhash) + 1


@pytest.mark.parametrize(
    ("settings_", "named"),
    [
        ({"method": "lsh"}, "method"),
        ({"method": "simhash", "verification": "exact"}, "verification"),
        ({"max_hamming": 17}, "max_hamming"),
        ({"max_hamming": -1}, "max_hamming"),
        ({"simhash_weighting": "tfidf"}, "simhash_weighting"),
    ],
)
def test_bad_method_settings_stop_start_up_naming_the_setting(settings_: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=f"'{named}'"):
        DetectionConfig(**settings_)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "settings_", [{"threshold": 0.01}, {"bands": 100, "rows_per_band": 2}], ids=["threshold", "bands"]
)
def test_a_banding_that_cannot_be_is_refused_for_simhash_saying_that_simhash_does_not_read_it(
    settings_: dict[str, object],
) -> None:
    """It named num_perm alone, as for a MinHash index: a SimHash user was told to raise a setting never read."""
    with pytest.raises(ConfigError, match="method simhash reads none of threshold, num_perm, bands"):
        DetectionConfig(method="simhash", **settings_)  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as minhash:
        DetectionConfig(**settings_)  # type: ignore[arg-type]
    assert "simhash" not in str(minhash.value)


def test_fingerprints_cover_what_the_method_reads_and_nothing_else() -> None:
    assert DetectionConfig(method="simhash").fingerprint() != DetectionConfig().fingerprint()
    assert DetectionConfig(method="combined").signature_fingerprint() != DetectionConfig().signature_fingerprint()
    # Settings a method never reads cannot tell its verdicts apart.
    assert DetectionConfig(max_hamming=5).fingerprint() == DetectionConfig().fingerprint()
    assert (
        DetectionConfig(method="simhash", threshold=0.5).fingerprint()
        == DetectionConfig(method="simhash").fingerprint()
    )
    assert (
        DetectionConfig(method="simhash", max_hamming=5).fingerprint()
        != DetectionConfig(method="simhash").fingerprint()
    )
    weighted = DetectionConfig(method="simhash", simhash_weighting="frequency")
    assert weighted.signature_fingerprint() != DetectionConfig(method="simhash").signature_fingerprint()
    # SimHash's hot-cluster cap is counted per slot too.
    assert (
        DetectionConfig(method="simhash", index_slots=6).fingerprint()
        != DetectionConfig(method="simhash").fingerprint()
        == DetectionConfig(method="simhash", index_slots=1).fingerprint()
    )


def test_a_setting_given_as_a_whole_number_fingerprints_as_the_stage_reads_it() -> None:
    """The stage reads ``max_age_seconds = 3600`` (a TOML integer, or a variable) as 3600.0: a library config of
    the integer must give the same ``params_fingerprint``, or verdicts of equal settings look made under others."""
    given = {"max_age_seconds": 3600, "containment_threshold": 0.8, "containment_max_ratio": 2}
    stage = resolve_settings({}, {f"STREAM_DEDUP_{k.upper()}": str(v) for k, v in given.items()}).detection
    library = DetectionConfig(**given)  # type: ignore[arg-type]
    assert library.fingerprint() == stage.fingerprint()
    assert library.signature_fingerprint() == stage.signature_fingerprint()


@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(st.text(min_size=1, max_size=300).filter(lambda t: normalize(t)), min_size=1, max_size=25),
    split=st.integers(1, 25),
)
def test_any_unicode_text_gets_the_brute_force_simhash_verdict_and_batches_do_not_matter(
    texts: list[str], split: int
) -> None:
    # Any script, length one to hundreds of characters, repeats drawn from the list itself.
    texts = texts + texts[: len(texts) // 2]
    whole = run_in_batches(texts, SIMHASH, [len(texts)])
    assert run_in_batches(texts, SIMHASH, [split]) == whole
    truth = brute_force_simhash(texts, SIMHASH)
    assert [v.duplicate_of for v in whole] == [None if t is None else f"d{t[0]}" for t in truth]
    combined = DetectionConfig(method="combined", max_hamming=6)
    assert run_in_batches(texts, combined, [split]) == run_in_batches(texts, combined, [len(texts)])


#: Texts of scripts written with and without spaces, cut anywhere for short and one-character documents.
SCRIPTS = (
    "東京は日本の首都で、大きな都市です。",
    "สวัสดีครับ วันนี้อากาศดีมาก",
    "مرحبا بالعالم، هذا نص عربي قصير",
    "שלום עולם, זה טקסט קצר בעברית",
    "Привет, мир: это короткий русский текст",
    "😀 🎉 👍🏽 👨‍👩‍👧 🙂",
)


@functools.cache
def mixed_stream(documents: int = 300, seed: int = 8) -> tuple[str, ...]:
    """Real paragraphs, their near-copies (real edits: typos, cuts, boilerplate...), fragments of 1-12
    characters and texts of other scripts, with copies of those too."""
    rng = random.Random(seed)
    paragraphs = stdlib_paragraphs()[:200]
    texts: list[str] = []
    while len(texts) < documents:
        draw = rng.random()
        if texts and draw < 0.4:
            original = rng.choice(texts)
            # (The edits work on words; a fragment of one or two gets a letter more, or is copied as it is.)
            text = near_duplicate(original, rng)[0] if len(original.split()) > 3 else original + rng.choice(["", "s"])
        elif draw < 0.55:
            text = rng.choice(paragraphs)[: rng.randint(1, 12)]
        elif draw < 0.65:
            script = rng.choice(SCRIPTS)
            text = script[rng.randrange(len(script) // 2) :]
        else:
            text = rng.choice(paragraphs)
        if normalize(text):
            texts.append(text)
    return tuple(texts)


def charikar_fingerprint(text: str, config: DetectionConfig) -> int:
    """SimHash by definition: bit j is set iff at least half the distinct shingle hashes have bit j set."""
    (chunk,) = shingle_chunks([normalize(text)], config.shingling(), config.seed)
    hashes = np.unique(chunk.hashes[0, : chunk.counts[0]])
    ones = ((hashes[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)).sum(axis=0)
    return sum(1 << bit for bit in range(64) if 2 * int(ones[bit]) >= hashes.size)


def combined_truth(texts: tuple[str, ...], config: DetectionConfig) -> list[dict[int, tuple[float, int]]]:
    """Per document, every earlier one within ``max_hamming`` bits at exact Jaccard >= threshold: its Jaccard and
    distance."""
    sets = [shingle_set(normalize(text), config.shingling()) for text in texts]
    prints = [charikar_fingerprint(text, config) for text in texts]
    truth = []
    for i, document in enumerate(sets):
        passing = {}
        for j in range(i):
            shared = len(document & sets[j])
            jaccard = shared / (len(document) + len(sets[j]) - shared)
            distance = (prints[i] ^ prints[j]).bit_count()
            if jaccard >= config.threshold and distance <= config.max_hamming:
                passing[j] = (jaccard, distance)
        truth.append(passing)
    return truth


def judged_with_texts(texts: tuple[str, ...], config: DetectionConfig, sizes: list[int]) -> list[Verdict]:
    """Verdicts with the texts at hand, as ``dedup`` and the stage have them; ``match_source`` is the match's row."""
    detector = make_detector(config)
    verdicts: list[Verdict] = []
    start, turn = 0, 0
    with TextSpool() as spool:
        while start < len(texts):
            stop = min(len(texts), start + sizes[turn % len(sizes)])
            sources = range(start + 1, stop + 1)
            normalized = [normalize(text) for text in texts[start:stop]]
            spool.add(sources, normalized)
            ids = [f"d{i}" for i in range(start, stop)]
            verdicts += detector.process(ids, normalized, normalized=True, sources=sources, document_texts=spool)
            start, turn = stop, turn + 1
    return [v._replace(match_source=None if v.match_source is None else v.match_source - 1) for v in verdicts]


@pytest.mark.parametrize(
    "config",
    [
        DetectionConfig(method="combined", threshold=0.7, max_hamming=12, verification="exact"),
        DetectionConfig(method="combined", threshold=0.7, max_hamming=12),
        DetectionConfig(method="combined", threshold=0.5, max_hamming=8, shingle_unit="word", shingle_size=2),
    ],
    ids=["exact", "texts", "words"],
)
def test_combined_reports_only_pairs_over_the_threshold_by_exact_jaccard_and_within_k_bits(
    config: DetectionConfig,
) -> None:
    """Against brute force over every earlier document: exact Jaccard of the shingle sets and the Hamming
    distance of fingerprints made bit by bit. Exact verification reports the exact Jaccard; the default
    verification, with the texts at hand, reports it wherever the estimate lay within the ambiguous band."""
    texts = mixed_stream()
    truth = combined_truth(texts, config)
    verdicts = judged_with_texts(texts, config, [1, 17, 64])
    band = AMBIGUITY_ERRORS * np.sqrt((1 - config.threshold**2) / config.sketch_bits)
    positives = [i for i, passing in enumerate(truth) if passing]
    assert len(positives) > 60
    best_found = 0
    for i, verdict in enumerate(verdicts):
        if verdict.verdict == "unique":
            continue
        assert verdict.verdict == "duplicate" and verdict.match_source is not None
        assert verdict.match_source in truth[i], (i, verdict)  # an earlier document, over both bars
        jaccard, distance = truth[i][verdict.match_source]
        assert (verdict.duplicate_of, verdict.hamming_distance) == (f"d{verdict.match_source}", distance)
        assert verdict.similarity is not None
        if config.verification == "exact" or abs(verdict.similarity - config.threshold) <= band:
            assert verdict.similarity == round(jaccard, 4), (i, verdict, jaccard)
        best_found += jaccard == max(j for j, _ in truth[i].values())
    found = [i for i in positives if verdicts[i].verdict == "duplicate"]
    # The banding finds a pair at the threshold with probability 0.99, and most lie above it.
    assert len(found) >= 0.99 * len(positives)
    assert best_found >= 0.97 * len(found)
