import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.errors import ConfigError, InputError
from stream_dedup.sketch.simhash import SimHasher, hamming_distance
from stream_dedup.text import Shingling, normalize, shingle_chunks, shingle_set
from tests.corpus import make_corpus

GOLDEN_TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Straße",
    "a",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit; lorem ipsum dolor sit amet.",
]

words = st.text(alphabet="abcdefgh ", min_size=1, max_size=80).filter(lambda t: t.strip())
any_text = st.text(min_size=1, max_size=60).filter(lambda t: normalize(t))


def reference_fingerprint(text: str, hasher: SimHasher) -> int:
    """Charikar's definition, one shingle and one bit at a time: bit j set iff sum of +-1 votes >= 0."""
    normalized = normalize(text, hasher.shingling.folding)
    (chunk,) = shingle_chunks([normalized], hasher.shingling, hasher.seed)
    hashes = [int(h) for h in chunk.hashes[0, : chunk.counts[0]]]
    if hasher.weighting == "set":
        hashes = list(set(hashes))
    votes = [sum(1 if h >> bit & 1 else -1 for h in hashes) for bit in range(64)]
    return sum(1 << bit for bit, vote in enumerate(votes) if vote >= 0)


def test_golden_fingerprints_never_change() -> None:
    # Computed once, at the first release of SimHash. If this fails, every stored
    # fingerprint (snapshots, changelogs) became incomparable with new ones.
    expected = {
        SimHasher(): [0x981839466B402C1E, 0x7AA69E856337C312, 0xC6575AC9BA63D851, 0x53CF143CE2B3D8A3],
        SimHasher(weighting="frequency"): [
            0x981839466B402C1E,
            0x7AA69E856337C312,
            0xC6575AC9BA63D851,
            0x73CF3424E5B3D8A3,
        ],
        SimHasher(shingling=Shingling(unit="word", size=2), seed=42): [
            0x1748B2CDB75FD399,
            0x100F0A7B6FC65241,
            0xBAFF1EBB4FF6684D,
            0xB89B71ACFAE6E027,
        ],
    }
    for hasher, prints in expected.items():
        assert hasher.fingerprints(GOLDEN_TEXTS).tolist() == prints


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(any_text, min_size=1, max_size=6), weighting=st.sampled_from(["set", "frequency"]))
def test_fingerprints_follow_charikars_definition(texts: list[str], weighting: str) -> None:
    hasher = SimHasher(weighting=weighting)  # type: ignore[arg-type]
    assert hasher.fingerprints(texts).tolist() == [reference_fingerprint(t, hasher) for t in texts]


def test_long_documents_follow_charikars_definition() -> None:
    texts = make_corpus(40, seed=5, copies=0.0)
    texts = [" ".join(texts[i : i + 8]) for i in range(0, 40, 8)]  # ~3,000 characters each
    for weighting in ("set", "frequency"):
        hasher = SimHasher(weighting=weighting)  # type: ignore[arg-type]
        assert hasher.fingerprints(texts).tolist() == [reference_fingerprint(t, hasher) for t in texts]


@settings(max_examples=40, deadline=None)
@given(text=any_text, others=st.lists(any_text, max_size=8))
def test_a_fingerprint_does_not_depend_on_the_rest_of_the_batch(text: str, others: list[str]) -> None:
    hasher = SimHasher()
    alone = hasher.fingerprints([text])[0]
    assert hasher.fingerprints([*others, text])[-1] == alone


@settings(max_examples=40, deadline=None)
@given(text=words)
def test_texts_that_normalise_alike_get_the_same_fingerprint(text: str) -> None:
    variant = "  " + text.upper().replace(" ", " \t\n ") + "\n"
    for weighting in ("set", "frequency"):
        hasher = SimHasher(weighting=weighting)  # type: ignore[arg-type]
        first, second = hasher.fingerprints([text, variant])
        assert first == second


def test_a_one_shingle_document_has_its_shingle_hash_as_fingerprint() -> None:
    hasher = SimHasher()
    (chunk,) = shingle_chunks(["abc"], hasher.shingling, hasher.seed)  # shorter than 5: one shingle
    assert hasher.fingerprints(["abc"])[0] == chunk.hashes[0, 0]


def test_set_weighting_ignores_repeats_and_frequency_weighting_counts_them() -> None:
    word = Shingling(unit="word", size=1)
    base, repeated = "red green blue", "red green blue blue blue blue blue blue blue"
    as_set = SimHasher(shingling=word).fingerprints([base, repeated])
    by_frequency = SimHasher(shingling=word, weighting="frequency").fingerprints([base, repeated])
    assert as_set[0] == as_set[1]
    assert by_frequency[0] != by_frequency[1]
    # Seven votes of "blue" against one each of the others: the fingerprint is blue's hash.
    (chunk,) = shingle_chunks(["blue"], word, 1)
    assert by_frequency[1] == chunk.hashes[0, 0]


def test_mean_distance_estimates_the_angle_between_shingle_sets() -> None:
    a, b = make_corpus(2, seed=3, copies=0.0)
    b = a + " " + b[: len(b) // 2]
    left, right = shingle_set(normalize(a), Shingling()), shingle_set(normalize(b), Shingling())
    angle = math.acos(len(left & right) / math.sqrt(len(left) * len(right)))
    distances = [int(hamming_distance(*SimHasher(seed=seed).fingerprints([a, b]))) for seed in range(200)]
    # Each bit disagrees with probability angle / pi; 200 x 64 bits give a standard error of ~0.004.
    assert np.mean(distances) / 64 == pytest.approx(angle / math.pi, abs=0.015)


def test_near_copies_are_much_closer_than_unrelated_texts() -> None:
    a, b = make_corpus(2, seed=9, copies=0.0)
    near = a.replace(" ", "  ", 1)[:-3] + "xyz"
    fingerprints = SimHasher().fingerprints([a, near, b])
    assert hamming_distance(fingerprints[0], fingerprints[1]) <= 6
    assert hamming_distance(fingerprints[0], fingerprints[2]) >= 16


def test_the_seed_selects_the_hyperplanes() -> None:
    text = ["a reproducible fingerprint for ever"]
    assert SimHasher(seed=5).fingerprints(text)[0] == SimHasher(seed=5).fingerprints(text)[0]
    assert SimHasher(seed=5).fingerprints(text)[0] != SimHasher(seed=6).fingerprints(text)[0]


@given(
    left=st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=20),
    right=st.integers(0, 2**64 - 1),
)
def test_hamming_distance_is_a_symmetric_bit_count(left: list[int], right: int) -> None:
    xs, y = np.array(left, dtype=np.uint64), np.uint64(right)
    distances = hamming_distance(xs, y)
    assert distances.tolist() == [bin(x ^ right).count("1") for x in left]
    assert (hamming_distance(y, xs) == distances).all()
    assert (hamming_distance(xs, xs) == 0).all()


def test_unknown_weighting_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="weighting"):
        SimHasher(weighting="tfidf")  # type: ignore[arg-type]


def test_text_that_normalises_to_nothing_is_refused() -> None:
    with pytest.raises(InputError):
        SimHasher().fingerprints(["fine", "  \n "])
