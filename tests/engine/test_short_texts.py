"""Short documents (titles, names, chat lines) and exact copies, against exact brute force.

The real text is the Python documentation shipped with every interpreter
(``pydoc_data.topics``): lines and words of it, cut into titles and
fragments, half of them 10 characters or fewer.
"""

import random
import re
from collections import defaultdict
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector
from stream_dedup.lsh import IndexedBatch, SignedBatch
from stream_dedup.text import Shingling, normalize, shingle_set
from stream_dedup.text.shingle_sets import ShingleSets


@cache
def real_lines() -> tuple[list[str], list[str]]:
    """Distinct lines (11-80 characters) and distinct words (2-10 letters) of the Python documentation."""
    from pydoc_data.topics import topics

    text = "\n".join(topics[name] for name in sorted(topics))
    lines = sorted({" ".join(line.split()) for line in text.splitlines()})
    lines = [line for line in lines if 11 <= len(line) <= 80 and line[0].isalpha()]
    words = sorted({w for w in re.findall(r"[A-Za-z][A-Za-z_]+", text) if 2 <= len(w) <= 10})
    return lines, words


def title_stream(documents: int, seed: int) -> list[str]:
    """Titles and fragments, half of them at most 10 characters, 30% re-posted with an edit."""
    lines, words = real_lines()
    rng = random.Random(seed)
    stream: list[str] = []
    for _ in range(documents):
        if stream and rng.random() < 0.3:
            stream.append(_edited(rng.choice(stream), rng, words))
        elif rng.random() < 0.5:
            stream.append(rng.choice(words) if rng.random() < 0.7 else rng.choice(lines)[: rng.randint(3, 10)])
        else:
            stream.append(rng.choice(lines))
    return stream


def _edited(text: str, rng: random.Random, words: list[str]) -> str:
    """Another case, other spacing, a typo, an appended word, a cut-off end, or no edit."""
    at = rng.randrange(len(text))
    kept = text.strip()
    edits = [
        text.upper(),
        "  " + text.replace(" ", "   ") + " ",
        text[:at] + rng.choice("xyzq") + text[at + 1 :],
        f"{text} {rng.choice(words)}",
        kept[: max(1, len(kept) - rng.randint(1, 6))],
        text,
    ]
    return rng.choice(edits)


def brute_force_duplicates(texts: list[str], shingling: Shingling, threshold: float) -> list[bool]:
    """Whether each text has an earlier one of exact Jaccard >= threshold (they must share a shingle)."""
    sets = [shingle_set(normalize(text), shingling) for text in texts]
    holders: defaultdict[str, list[int]] = defaultdict(list)
    found = []
    for i, shingles in enumerate(sets):
        earlier = {j for s in shingles for j in holders[s]}
        found.append(any(len(shingles & sets[j]) >= threshold * len(shingles | sets[j]) for j in earlier))
        for s in shingles:
            holders[s].append(i)
    return found


def detected(config: DetectionConfig, texts: list[str], batch: int = 500) -> list[bool]:
    detector = Detector(config)
    flags: list[bool] = []
    for start in range(0, len(texts), batch):
        part = texts[start : start + batch]
        ids = [str(start + i) for i in range(len(part))]
        flags += [v.verdict == "duplicate" for v in detector.process(ids, part)]
    return flags


@pytest.mark.parametrize("config", [DetectionConfig(), DetectionConfig(shingle_size=10)], ids=["k5", "k10"])
def test_distinct_four_letter_words_are_never_duplicates(config: DetectionConfig) -> None:
    rng = random.Random(1)
    words = sorted({"".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(4)) for _ in range(3300)})[:3000]
    assert len(words) == 3000
    assert not any(detected(config, words))


def test_titles_and_fragments_are_neither_merged_nor_missed() -> None:
    texts = title_stream(6000, seed=3)
    assert sum(len(normalize(t)) <= 10 for t in texts) >= 0.45 * len(texts)
    truth = brute_force_duplicates(texts, Shingling("char", 10), 0.8)
    found = detected(DetectionConfig(shingle_size=10, threshold=0.8), texts)
    true_positives = sum(f and t for f, t in zip(found, truth, strict=True))
    assert sum(truth) > 1000
    assert true_positives / sum(found) >= 0.99
    assert true_positives / sum(truth) >= 0.98


@pytest.mark.parametrize("verification", ["estimate", "exact"])
@pytest.mark.parametrize("cap", [1, 2, 64])
def test_an_exact_copy_is_found_when_every_band_of_its_original_is_full(verification: str, cap: int) -> None:
    # Documents 0..cap*bands-1 fill every band key of the original (but differ
    # in content), so the original is entered in no band at all; its exact
    # copy must still be found, at similarity 1, by its content key.
    config = DetectionConfig(max_bucket_size=cap, verification=verification)  # type: ignore[arg-type]
    detector = Detector(config)
    bands = detector.banding.bands
    original_keys = np.arange(1, 2 * bands + 1, 2, dtype=np.uint32) * np.uint32(2654435761) | np.uint32(1)
    rng = np.random.default_rng(cap)
    fillers = cap * bands
    keys = rng.integers(0, 2**32, (fillers, bands + 1), dtype=np.uint32) | np.uint32(1)
    for i in range(fillers):
        keys[i, i % bands] = original_keys[i % bands]
    sketches = rng.integers(0, 256, (fillers, config.sketch_bits // 8), dtype=np.uint8)
    original = SignedBatch(
        rng.integers(0, 256, (1, config.sketch_bits // 8), dtype=np.uint8),
        np.append(original_keys, np.uint32(12345677))[None, :],
        ShingleSets(np.array([5, 9, 77], np.uint32), np.array([3])),
    )
    filler_sets = ShingleSets(rng.integers(100, 2**32, 3 * fillers, dtype=np.uint32), np.arange(3, 3 * fillers + 1, 3))
    exact = verification == "exact"

    def feed(ids: list[str], signed: SignedBatch) -> list[tuple[str, str | None, float | None]]:
        batch = IndexedBatch(ids, signed, np.zeros(len(ids)), np.arange(len(ids), dtype=np.uint64))
        return [(v.verdict, v.duplicate_of, v.similarity) for v in detector.process_signed(batch)]

    feed([f"filler-{i}" for i in range(fillers)], SignedBatch(sketches, keys, filler_sets if exact else None))
    feed(["original"], original if exact else SignedBatch(original.sketches, original.keys))
    assert detector.index.hot_bucket_skips >= bands  # the original went into no band
    copy = original if exact else SignedBatch(original.sketches, original.keys)
    assert feed(["copy"], copy) == [("duplicate", "original", 1.0)]


@pytest.mark.parametrize("verification", ["estimate", "exact"])
def test_case_and_spacing_copies_of_short_texts_are_found_within_one_batch_at_cap_one(verification: str) -> None:
    config = DetectionConfig(max_bucket_size=1, verification=verification)  # type: ignore[arg-type]
    texts = ["zn", "ab", "ZN", " zn ", "Ab", "abc", "ABC"]
    verdicts = Detector(config).process([str(i) for i in range(len(texts))], texts)
    assert [(v.verdict, v.duplicate_of) for v in verdicts] == [
        ("unique", None),
        ("unique", None),
        ("duplicate", "0"),
        ("duplicate", "0"),
        ("duplicate", "1"),
        ("unique", None),
        ("duplicate", "5"),
    ]


@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(st.text(min_size=1, max_size=40), min_size=2, max_size=40),
    picks=st.lists(st.integers(0, 10**6), min_size=1, max_size=20),
    cap=st.integers(1, 3),
    verification=st.sampled_from(["estimate", "exact"]),
    batch=st.integers(1, 50),
)
def test_every_exact_copy_after_normalisation_is_a_duplicate_at_any_cap(
    texts: list[str], picks: list[int], cap: int, verification: str, batch: int
) -> None:
    usable = [t for t in texts if normalize(t)]
    if not usable:
        return
    stream = usable + [usable[p % len(usable)].swapcase() + " " for p in picks]
    config = DetectionConfig(max_bucket_size=cap, verification=verification)  # type: ignore[arg-type]
    detector = Detector(config)
    verdicts = []
    for start in range(0, len(stream), batch):
        part = stream[start : start + batch]
        verdicts += detector.process([str(start + i) for i in range(len(part))], part)
    seen: set[str] = set()
    for text, verdict in zip(stream, verdicts, strict=True):
        key = normalize(text)
        if key in seen:
            assert (verdict.verdict, verdict.similarity) == ("duplicate", 1.0), (text, verdict)
        seen.add(key)
