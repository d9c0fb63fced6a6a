"""A long document signed in pieces gets exactly the signature, sets and fingerprint it gets signed whole.

Pieces are made small (:data:`~stream_dedup.text.shingles.PIECE_TOKENS`) so
that ordinary texts are long documents; the reference is the same texts
with pieces larger than any of them, which is how every document was signed
before pieces. Equal element for element: a changed bit would change a
verdict, a stored snapshot's meaning and the changelog's.
"""

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from stream_dedup.lsh import SignedBatch
from stream_dedup.sketch.minhash import MinHasher
from stream_dedup.sketch.simhash import SimHasher
from stream_dedup.text import Shingling
from stream_dedup.text import shingles as shingles_module
from stream_dedup.text.shingle_sets import ShingleSets
from tests.corpus import make_corpus

CONFIGS = {
    "minhash": DetectionConfig(),
    "exact": DetectionConfig(verification="exact"),
    "combined": DetectionConfig(method="combined", max_hamming=10),
    "combined frequency": DetectionConfig(method="combined", max_hamming=10, simhash_weighting="frequency"),
    "simhash": DetectionConfig(method="simhash"),
    "simhash frequency": DetectionConfig(method="simhash", simhash_weighting="frequency"),
    "containment": DetectionConfig(containment_threshold=0.8),
    "words": DetectionConfig(shingle_unit="word", shingle_size=3, containment_threshold=0.8),
    "classic": DetectionConfig(scheme="classic"),
}
TEXTS = make_corpus(40, seed=3)
#: A text repeated many times: its shingles repeat across pieces, which the distinct sets must fold.
TEXTS.append(" ".join(TEXTS[:3]) * 20)


@contextmanager
def pieces_of(tokens: int) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shingles_module, "PIECE_TOKENS", tokens)
        yield


def assert_same(left: SignedBatch, right: SignedBatch) -> None:
    assert np.array_equal(left.sketches, right.sketches)
    assert np.array_equal(left.keys, right.keys)
    for part in ("fingerprints", "set_sizes"):
        mine, theirs = getattr(left, part), getattr(right, part)
        assert (mine is None) == (theirs is None) and (mine is None or np.array_equal(mine, theirs)), part
    assert (left.shingles is None) == (right.shingles is None)
    if left.shingles is not None and right.shingles is not None:
        assert np.array_equal(left.shingles.values, right.shingles.values)
        assert np.array_equal(left.shingles.ends, right.shingles.ends)


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
@pytest.mark.parametrize("piece", [5, 64, 1000])
def test_signing_in_pieces_gives_exactly_the_batch_signed_whole(config: DetectionConfig, piece: int) -> None:
    whole = make_detector(config).sign(TEXTS)
    with pieces_of(piece):
        assert_same(make_detector(config).sign(TEXTS), whole)
        assert_same(make_detector(config).sign(TEXTS, normalized=True), make_detector(config).sign(TEXTS))


@pytest.mark.parametrize("piece", [5, 300])
def test_verdicts_of_long_documents_are_those_signed_whole(piece: int) -> None:
    config = DetectionConfig(threshold=0.7)
    ids = [str(i) for i in range(len(TEXTS))]
    whole = make_detector(config).process(ids, TEXTS)
    with pieces_of(piece):
        assert make_detector(config).process(ids, TEXTS) == whole
    assert any(verdict.verdict == "duplicate" for verdict in whole)


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.text(alphabet="abc dé", min_size=1, max_size=200).filter(str.strip), min_size=1, max_size=5),
    unit=st.sampled_from(["char", "word"]),
    piece=st.integers(1, 12),
)
def test_minhash_signatures_simhash_fingerprints_and_shingle_sets_do_not_depend_on_pieces(
    texts: list[str], unit: str, piece: int
) -> None:
    shingling = Shingling(unit, 3)  # type: ignore[arg-type]
    minhasher = MinHasher(num_perm=64, shingling=shingling)
    simhashers = [SimHasher(shingling, weighting=weighting) for weighting in ("set", "frequency")]
    normalised = [" ".join(text.split()) for text in texts]

    def signed() -> list[np.ndarray]:
        sets = ShingleSets.of_texts(normalised, shingling, 1)
        return [
            minhasher.signatures(texts),
            *(hasher.fingerprints(texts) for hasher in simhashers),
            sets.values,
            sets.ends,
        ]

    whole = signed()
    with pieces_of(piece):
        for mine, theirs in zip(signed(), whole, strict=True):
            assert np.array_equal(mine, theirs)
