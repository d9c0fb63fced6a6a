import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.errors import ConfigError, InputError
from stream_dedup.sketch import MinHasher, SignatureBuilder, estimate_jaccard
from stream_dedup.text import ShingleChunk, Shingling, normalize, shingle_chunks, shingle_set
from tests.corpus import make_corpus


def exact_jaccard(a: str, b: str, shingling: Shingling) -> float:
    left, right = shingle_set(normalize(a), shingling), shingle_set(normalize(b), shingling)
    return len(left & right) / len(left | right)


def estimation_errors(scheme: str, pairs: list[tuple[str, str]], num_perm: int = 128) -> np.ndarray:
    """Estimate minus exact Jaccard per pair, each pair under its own seed.

    The estimate is random over the choice of hash functions, not over pairs:
    a fresh seed per pair makes the errors independent draws.
    """
    errors = []
    for seed, (a, b) in enumerate(pairs):
        hasher = MinHasher(num_perm=num_perm, scheme=scheme, seed=seed)  # type: ignore[arg-type]
        sigs = hasher.signatures([a, b])
        errors.append(estimate_jaccard(sigs[0], sigs[1]) - exact_jaccard(a, b, hasher.shingling))
    return np.array(errors)


@pytest.fixture(scope="module")
def near_pairs() -> list[tuple[str, str]]:
    texts = make_corpus(600, seed=11, copies=0.5)
    hasher = MinHasher()
    pairs = []
    for i in range(1, len(texts)):
        for j in range(max(0, i - 40), i):
            similarity = exact_jaccard(texts[i], texts[j], hasher.shingling)
            if 0.2 <= similarity < 1.0 and (texts[j], texts[i]) not in pairs:
                pairs.append((texts[i], texts[j]))
    return pairs[:400]


@pytest.mark.parametrize("scheme", ["oph", "classic"])
def test_estimates_are_unbiased_and_within_minhash_error(scheme: str, near_pairs: list[tuple[str, str]]) -> None:
    errors = estimation_errors(scheme, near_pairs)
    assert len(near_pairs) >= 200
    assert abs(errors.mean()) < 0.01  # unbiased
    assert np.sqrt((errors**2).mean()) < 0.05  # about sqrt(J(1-J)/128) <= 0.044


def test_one_permutation_is_at_least_as_accurate_as_classic(
    near_pairs: list[tuple[str, str]],
) -> None:
    oph = np.sqrt((estimation_errors("oph", near_pairs) ** 2).mean())
    classic = np.sqrt((estimation_errors("classic", near_pairs) ** 2).mean())
    assert oph <= classic * 1.05


def test_estimate_converges_to_exact_jaccard_as_num_perm_grows() -> None:
    a, b = make_corpus(2, seed=3, copies=0.0)
    b = a + " " + b[: len(b) // 3]
    exact = exact_jaccard(a, b, Shingling())
    rmse = []
    for num_perm in (32, 256, 2048):
        errors = [
            estimate_jaccard(*MinHasher(num_perm=num_perm, seed=seed).signatures([a, b])) - exact for seed in range(30)
        ]
        rmse.append(float(np.sqrt(np.mean(np.square(errors)))))
    assert rmse[0] > rmse[1] > rmse[2]
    assert rmse[2] < 0.01


def test_signatures_are_reproducible_and_depend_on_the_seed() -> None:
    text = ["a reproducible signature for ever"]
    first = MinHasher(seed=5).signatures(text)
    assert (first == MinHasher(seed=5).signatures(text)).all()
    assert not (first == MinHasher(seed=6).signatures(text)).any()
    assert first.dtype == np.uint32 and first.shape == (1, 128)


def test_signatures_are_stable_across_releases() -> None:
    # Golden values: a failure means stored indexes and snapshots would be
    # silently incomparable. Bump SIGNATURE_FORMAT rather than editing these.
    oph = MinHasher().signatures(["golden signature text"])[0, :4].tolist()
    classic = MinHasher(scheme="classic").signatures(["golden signature text"])[0, :4].tolist()
    assert oph == GOLDEN_OPH
    assert classic == GOLDEN_CLASSIC


def test_short_documents_do_not_collapse_into_one_signature() -> None:
    sigs = MinHasher().signatures(["ab", "cd", "x", "yz"])
    assert len({row.tobytes() for row in sigs}) == 4


def test_empty_text_is_bad_input() -> None:
    with pytest.raises(InputError):
        MinHasher().signatures(["fine", "   "])


@pytest.mark.parametrize(
    ("setting", "kwargs"),
    [("num_perm", {"num_perm": 4}), ("scheme", {"scheme": "x"}), ("seed", {"seed": -1})],
)
def test_bad_parameters_name_the_setting(setting: str, kwargs: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match=setting):
        MinHasher(**kwargs)  # type: ignore[arg-type]


@settings(max_examples=80, deadline=None)
@given(
    text=st.text(alphabet="abc de\tXY\n中文ก", min_size=1, max_size=120).filter(lambda t: normalize(t) != ""),
    cuts=st.lists(st.integers(0, 120), max_size=6),
    unit=st.sampled_from(["char", "word"]),
    size=st.integers(1, 6),
    scheme=st.sampled_from(["oph", "classic"]),
)
def test_signing_in_pieces_equals_signing_whole(text: str, cuts: list[int], unit: str, size: int, scheme: str) -> None:
    hasher = MinHasher(num_perm=64, scheme=scheme, shingling=Shingling(unit, size))  # type: ignore[arg-type]
    builder = SignatureBuilder(hasher)
    bounds = [0, *sorted(c for c in cuts if c <= len(text)), len(text)]
    for start, end in itertools.pairwise(bounds):
        builder.update(text[start:end])
    assert (builder.signature() == hasher.signatures([text])[0]).all()


def union_signature(hasher: MinHasher, texts: list[str]) -> np.ndarray:
    """The signature of the set union of the texts' shingle hashes, signed as one document."""
    normalized = [normalize(text) for text in texts]
    hashes = [
        chunk.hashes[row, : chunk.counts[row]]
        for chunk in shingle_chunks(normalized, hasher.shingling, hasher.seed)
        for row in range(len(chunk.rows))
    ]
    union = np.unique(np.concatenate(hashes))
    chunk = ShingleChunk(rows=np.zeros(1, dtype=np.intp), hashes=union[None, :], counts=np.array([union.size]))
    return hasher.finalize(hasher.sketch_chunk(chunk))[0]


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(
        st.text(alphabet="abc de\tXY\n", min_size=1, max_size=80).filter(lambda t: normalize(t) != ""),
        min_size=2,
        max_size=2,
    ),
    unit=st.sampled_from(["char", "word"]),
    size=st.integers(1, 6),
    scheme=st.sampled_from(["oph", "classic"]),
)
def test_merging_builders_signs_the_union_of_shingle_sets(texts: list[str], unit: str, size: int, scheme: str) -> None:
    hasher = MinHasher(num_perm=64, scheme=scheme, shingling=Shingling(unit, size))  # type: ignore[arg-type]
    left, right = SignatureBuilder(hasher), SignatureBuilder(hasher)
    left.update(texts[0])
    right.update(texts[1])
    left.merge(right)
    assert (left.signature() == union_signature(hasher, texts)).all()


def test_builder_with_no_text_is_bad_input() -> None:
    builder = SignatureBuilder(MinHasher())
    builder.update("   ")
    with pytest.raises(InputError):
        builder.signature()


GOLDEN_OPH = [435092492, 4241037083, 1403915889, 2655596249]
GOLDEN_CLASSIC = [2119068508, 3780222324, 2521203180, 3885352738]


@settings(max_examples=60, deadline=None)
@given(
    num_bins=st.sampled_from([8, 64, 128, 1024]),
    rows=st.lists(st.lists(st.integers(0, 2**40), min_size=1, max_size=80), min_size=1, max_size=12),
    seed=st.integers(0, 2**32),
)
def test_every_densification_path_fills_each_bin_from_its_first_non_empty_probe(
    num_bins: int, rows: list[list[int]], seed: int
) -> None:
    from stream_dedup.sketch.oph import (
        EMPTY,
        _attempts_by_probing,
        _attempts_by_rank,
        densify,
        probe_offsets,
        rank_table,
    )

    sketch = np.full((len(rows), num_bins), EMPTY, dtype=np.uint64)
    for r, values in enumerate(rows):
        sketch[r, np.array(values) % num_bins] = np.array(values, dtype=np.uint64)
    empty = sketch == EMPTY
    offsets, _ = probe_offsets(num_bins, seed)
    # The definition, one bin at a time: the first non-empty bin of i + offsets[0], i + offsets[1], ...
    expected_attempts = np.zeros(sketch.shape, dtype=np.intp)
    expected = sketch.copy()
    for r, i in zip(*np.nonzero(empty), strict=True):
        attempt = next(a for a, j in enumerate((i + offsets) % num_bins) if not empty[r, j])
        expected_attempts[r, i] = attempt
        expected[r, i] = sketch[r, (i + offsets[attempt]) % num_bins]
    for fill in (_attempts_by_rank, _attempts_by_probing):
        for rows_given in (np.arange(len(rows)), np.arange(0, len(rows), 2)):
            attempts = np.zeros(sketch.shape, dtype=np.intp)
            fill(attempts, empty, rows_given, rank_table(num_bins, seed) if fill is _attempts_by_rank else offsets)
            assert (attempts[rows_given][empty[rows_given]] == expected_attempts[rows_given][empty[rows_given]]).all()
    assert (densify(sketch, seed) == expected).all()
