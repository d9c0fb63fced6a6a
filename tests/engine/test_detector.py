import numpy as np
import pytest

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector, make_detector
from stream_dedup.errors import ConfigError, InputError
from stream_dedup.lsh import IndexedBatch, SignedBatch
from stream_dedup.text import Shingling, normalize, shingle_set
from tests.corpus import make_corpus


def run(detector: Detector, texts: list[str], batch: int) -> list[tuple[str, str | None]]:
    out = []
    for start in range(0, len(texts), batch):
        ids = [str(i) for i in range(start, min(start + batch, len(texts)))]
        out += [(v.verdict, v.duplicate_of) for v in detector.process(ids, texts[start : start + batch])]
    return out


def test_verdicts_do_not_depend_on_batch_boundaries() -> None:
    texts = make_corpus(700, seed=2)
    config = DetectionConfig(threshold=0.7)
    one_by_one = run(Detector(config), texts, batch=1)
    assert one_by_one == run(Detector(config), texts, batch=64)
    assert one_by_one == run(Detector(config), texts, batch=700)
    assert sum(v == "duplicate" for v, _ in one_by_one) > 100


def test_agrees_with_brute_force_exact_jaccard_in_stream_order() -> None:
    shingling = Shingling("char", 10)
    config = DetectionConfig(threshold=0.8, shingle_size=10)
    true_positives = flagged = duplicates = 0
    for seed in range(1, 9):
        texts = make_corpus(600, seed=seed)
        sets = [shingle_set(normalize(t), shingling) for t in texts]
        truth = [
            any(len(sets[i] & sets[j]) / len(sets[i] | sets[j]) >= 0.8 for j in range(i)) for i in range(len(texts))
        ]
        found = [v == "duplicate" for v, _ in run(Detector(config), texts, batch=100)]
        true_positives += sum(f and t for f, t in zip(found, truth, strict=True))
        flagged += sum(found)
        duplicates += sum(truth)
    assert duplicates > 400
    # This corpus is built to put many pairs right at the threshold, where the
    # 1,024-bit estimate (standard error ~0.019 at J=0.8) must err both ways;
    # benchmarks/accuracy.py measures real streams.
    assert true_positives / flagged >= 0.95
    assert true_positives / duplicates >= 0.95


def test_exact_verification_agrees_with_brute_force_in_stream_order() -> None:
    texts = make_corpus(600, seed=9)
    shingling = Shingling("char", 10)
    config = DetectionConfig(threshold=0.8, shingle_size=10, verification="exact")
    sets = [shingle_set(normalize(t), shingling) for t in texts]
    truth = [any(len(sets[i] & sets[j]) / len(sets[i] | sets[j]) >= 0.8 for j in range(i)) for i in range(len(texts))]
    found = [v == "duplicate" for v, _ in run(Detector(config), texts, batch=100)]
    true_positive = sum(f and t for f, t in zip(found, truth, strict=True))
    # Verification is exact, so every flagged document is a true duplicate;
    # only the LSH stage (candidate probability >= 0.998 at J=0.8) can miss.
    assert true_positive == sum(found)
    assert true_positive / sum(truth) >= 0.99


def test_exact_verification_reports_the_exact_similarity_and_keeps_batch_independence() -> None:
    texts = make_corpus(300, seed=4)
    config = DetectionConfig(threshold=0.7, verification="exact")
    assert run(Detector(config), texts, batch=1) == run(Detector(config), texts, batch=300)
    detector = Detector(config)
    a = "the quick brown fox jumps over the lazy dog near the river bank"
    b = a + " today"
    verdict = detector.process(["a", "b"], [a, b])[1]
    left, right = shingle_set(normalize(a), Shingling()), shingle_set(normalize(b), Shingling())
    assert verdict.similarity == round(len(left & right) / len(left | right), 4)


def test_exact_verification_needs_the_shingle_sets() -> None:
    detector = Detector(DetectionConfig(verification="exact"))
    signed = Detector(DetectionConfig()).sign(["some text"])
    with pytest.raises(ValueError, match="shingle sets"):
        detector.process_signed(IndexedBatch(["a"], signed, np.zeros(1), np.zeros(1, dtype=np.uint64)))


def test_sketches_and_keys_are_stable_across_releases() -> None:
    # Golden values of what indexes, snapshots and changelogs store: a failure
    # means they would be silently incomparable. Bump SIGNATURE_FORMAT and
    # the snapshot and changelog formats rather than editing these.
    signed = Detector(DetectionConfig()).sign(["golden signature text"])
    assert signed.sketches[0, :8].tolist() == [223, 104, 42, 210, 57, 115, 61, 147]
    assert signed.keys[0, :3].tolist() == [1268424663, 337362443, 239237043]
    assert int(signed.keys[0, -1]) == 3671611215


def test_exact_copies_point_to_the_earliest_and_are_indexed_too() -> None:
    detector = Detector(DetectionConfig())
    text = "an advert for a flat with two rooms near the station"
    verdicts = detector.process(["a", "b", "c"], [text, text, text])
    verdicts += detector.process(["d"], [text.upper()])
    assert [(v.verdict, v.duplicate_of, v.similarity) for v in verdicts] == [
        ("unique", None, None),
        ("duplicate", "a", 1.0),
        ("duplicate", "a", 1.0),
        ("duplicate", "a", 1.0),
    ]
    assert len(detector) == 4


def test_best_match_wins_over_an_earlier_weaker_one() -> None:
    base = "the quick brown fox jumps over the lazy dog near the river bank today"
    weaker = base.replace("today", "yesterday at noon")
    detector = Detector(DetectionConfig(threshold=0.6))
    verdicts = detector.process(["weak", "exact", "probe"], [weaker, base, base])
    assert verdicts[2].duplicate_of == "exact"


def test_empty_text_is_rejected_without_changing_the_index() -> None:
    detector = Detector(DetectionConfig())
    detector.process(["a"], ["some text"])
    with pytest.raises(InputError):
        detector.process(["b", "c"], ["more text", " "])
    assert len(detector) == 1
    assert detector.process(["b"], ["more text"])[0].verdict == "unique"


def test_an_empty_batch_is_a_no_op() -> None:
    detector = Detector(DetectionConfig())
    assert detector.process([], []) == []
    detector.process(["a"], ["some text"])
    assert detector.process([], []) == []
    assert len(detector) == 1


@pytest.mark.parametrize(
    "config", [DetectionConfig(), DetectionConfig(containment_threshold=0.8)], ids=["default", "containment"]
)
def test_memory_per_document_stays_within_budget(config: DetectionConfig) -> None:
    detector = Detector(config)
    rng = np.random.default_rng(0)
    tables = detector.banding.bands + 1
    containment = config.containment_threshold is not None
    for start in range(0, 200_000, 20_000):
        ids = [f"doc-{i}" for i in range(start, start + 20_000)]
        signed = SignedBatch(
            rng.integers(0, 256, (20_000, 128), dtype=np.uint8),
            rng.integers(0, 2**32, (20_000, tables), dtype=np.uint32) | np.uint32(1),
            set_sizes=rng.integers(100, 2_000, 20_000).astype(np.uint32) if containment else None,
        )
        sources = np.arange(start, start + 20_000, dtype=np.uint64)
        detector.process_signed(IndexedBatch(ids, signed, np.zeros(20_000), sources))
    assert detector.memory_bytes() / len(detector) <= 400


@pytest.mark.parametrize(
    ("setting", "kwargs"),
    [
        ("threshold", {"threshold": 0.0}),
        ("bands", {"bands": 4}),
        ("bands", {"bands": 40, "rows_per_band": 4}),
        ("shingle_size", {"shingle_size": 0}),
        ("max_documents", {"max_documents": 0}),
        ("max_bucket_size", {"max_bucket_size": 0}),
        ("verification", {"verification": "approximate"}),
    ],
)
def test_bad_settings_name_the_setting(setting: str, kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=setting):
        Detector(DetectionConfig(**kwargs))  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["minhash", "simhash", "combined"])
@pytest.mark.parametrize("cap", [0, -1, 2.5, True, 1_000_001])
def test_a_hot_bucket_cap_outside_1_to_a_million_is_refused_for_every_method(method: str, cap: object) -> None:
    """Refused with the settings, before anything is built: a simhash cap of 0 would silently enter nothing."""
    with pytest.raises(ConfigError, match="'max_bucket_size': must be a whole number from 1 to 1000000"):
        DetectionConfig(method=method, max_bucket_size=cap)  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["minhash", "simhash", "combined"])
def test_invisible_characters_do_not_hide_a_copy(method: str) -> None:
    """A zero-width space between letters, soft hyphens in long words: unseen, so the copy is a copy."""
    text = "Spacious two-room apartment near the central station, newly renovated, available from March"
    hidden = "\u200b".join(text[:40]) + text[40:].replace("renovated", "reno\u00adva\u00adted") + "\ufe0f\U000e0041"
    verdicts = make_detector(DetectionConfig(method=method)).process(["ad", "spam"], [text, hidden])
    assert (verdicts[1].verdict, verdicts[1].duplicate_of, verdicts[1].similarity) == ("duplicate", "ad", 1.0)
    kept = make_detector(DetectionConfig(method=method, ignore_invisible=False)).process(["ad", "spam"], [text, hidden])
    assert kept[1].verdict == "unique"


@pytest.mark.parametrize(
    "method, verification",
    [("minhash", "estimate"), ("minhash", "exact"), ("simhash", "estimate"), ("combined", "exact")],
)
def test_a_lone_surrogate_is_a_character_like_any_other(method: str, verification: str) -> None:
    """Text decoded with ``surrogateescape`` (file names, bytes of unknown encoding) holds lone surrogates:
    signing raised ``UnicodeEncodeError`` for them. Their copies are copies, and the character counts."""
    text = "Spacious two-room apartment near the central station, \udcc3\udca9 newly renovated, from March"
    other = text.replace("\udcc3\udca9", "\udcc3\udca8")
    detector = make_detector(DetectionConfig(method=method, verification=verification))  # type: ignore[arg-type]
    verdicts = detector.process(["ad", "copy", "other"], [text, text, other])
    assert (verdicts[1].verdict, verdicts[1].duplicate_of, verdicts[1].similarity) == ("duplicate", "ad", 1.0)
    assert verdicts[2].similarity != 1.0
