"""Measuring a configuration against exact Jaccard similarity on a sample.

Used by ``stream-dedup params --sample`` so users can check parameters on
their own data. Ground truth is every pair with exact Jaccard ``>= t``,
found without comparing all pairs by *prefix filtering* (Chaudhuri et al.,
2006): with tokens ordered rarest first, two sets with Jaccard ``>= t`` must
share a token among the first ``|x| - ceil(t |x|) + 1`` tokens of each.

The *realised S-curve* (:func:`realised_curve`) is the same truth taken from a
lower similarity: of the pairs whose exact Jaccard falls in each bucket, the
share that became candidates (shared a band) and the share reported as
duplicates. Beside the theoretical curve ``P(s)`` it shows how sharp the
threshold is on the user's own data.
"""

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stream_dedup.config import DetectionConfig
from stream_dedup.distinct import distinct_sorted
from stream_dedup.engine.detector import make_detector
from stream_dedup.lsh.generation import SignedBatch
from stream_dedup.sketch.bit_sketch import bit_agreements, estimate_similarity
from stream_dedup.sketch.simhash import hamming_distance
from stream_dedup.text import normalize_all, shingle_chunks
from stream_dedup.text.distinct_pieces import whole_chunks

Pairs = set[tuple[int, int]]


@dataclass(frozen=True)
class PairAccuracy:
    """Pairwise precision and recall of a configuration on a sample."""

    documents: int
    true_pairs: int
    flagged_pairs: int
    correct_pairs: int

    @property
    def precision(self) -> float:
        return self.correct_pairs / self.flagged_pairs if self.flagged_pairs else 1.0

    @property
    def recall(self) -> float:
        return self.correct_pairs / self.true_pairs if self.true_pairs else 1.0


def shingle_hash_sets(texts: Sequence[str], config: DetectionConfig) -> list[npt.NDArray[np.uint64]]:
    """Each document's distinct shingle hashes (sorted), as the detector shingles it."""
    hasher = config.hasher()
    normalized = normalize_all(texts, config.shingling().folding)
    sets: list[npt.NDArray[np.uint64]] = [np.empty(0, np.uint64)] * len(texts)
    for chunk in whole_chunks(shingle_chunks(normalized, hasher.shingling, hasher.seed)):
        for row, hashes, count in zip(chunk.rows, chunk.hashes, chunk.counts, strict=True):
            sets[row] = distinct_sorted(hashes[:count])
    return sets


def jaccard(left: npt.NDArray[np.uint64], right: npt.NDArray[np.uint64]) -> float:
    """Exact Jaccard similarity of two sorted sets of distinct hashes."""
    shared = np.intersect1d(left, right, assume_unique=True).size
    return shared / (left.size + right.size - shared)


def similar_pairs(sets: list[npt.NDArray[np.uint64]], threshold: float) -> dict[tuple[int, int], float]:
    """Every pair ``(i, j)``, ``i < j``, with exact Jaccard ``>= threshold``, and its similarity."""
    tokens, frequency = np.unique(np.concatenate(sets), return_counts=True)
    candidates: dict[int, list[int]] = {}
    for doc, hashes in enumerate(sets):
        rarity = frequency[np.searchsorted(tokens, hashes)]
        prefix = hashes[np.lexsort((hashes, rarity))][: hashes.size - math.ceil(threshold * hashes.size) + 1]
        for token in prefix.tolist():
            candidates.setdefault(token, []).append(doc)
    found: dict[tuple[int, int], float] = {}
    # Pairs sharing several prefix tokens meet once per token: each is measured once.
    measured: Pairs = set()
    for docs in candidates.values():
        for a, i in enumerate(docs):
            for j in docs[a + 1 :]:
                if (i, j) not in measured:
                    measured.add((i, j))
                    similarity = jaccard(sets[i], sets[j])
                    if similarity >= threshold:
                        found[(i, j)] = similarity
    return found


def candidate_pairs(keys: npt.NDArray[np.uint32]) -> Pairs:
    """Pairs ``(i, j)``, ``i < j``, of rows of ``keys`` (one column per band) that share a key in some band."""
    candidates: Pairs = set()
    for band in range(keys.shape[1]):
        order = np.argsort(keys[:, band], kind="stable")
        sorted_keys = keys[order, band]
        boundaries = np.flatnonzero(np.diff(sorted_keys)) + 1
        for group in np.split(order, boundaries):
            for a, i in enumerate(group.tolist()):
                for j in group[a + 1 :].tolist():
                    candidates.add((min(i, j), max(i, j)))
    return candidates


def flagged_pairs(texts: Sequence[str], config: DetectionConfig) -> Pairs:
    """Pairs the configuration reports (see :func:`_candidates_and_reported`)."""
    return _candidates_and_reported(make_detector(config).sign(texts), config)[1]


def _candidates_and_reported(signed: SignedBatch, config: DetectionConfig) -> tuple[Pairs, Pairs]:
    """The pairs of a signed sample that become candidates, and those reported, under ``config.method``.

    MinHash: candidates share a band or content key, and are reported when
    their sketches estimate ``>= threshold``. SimHash: fingerprints within
    ``max_hamming`` bits are both (the index finds every one). Combined:
    MinHash's candidates, reported when both tests pass.
    """
    near = _near_fingerprints(signed.fingerprints, config.max_hamming) if signed.fingerprints is not None else None
    if not config.uses_minhash:
        assert near is not None
        return near, near
    candidates = candidate_pairs(signed.keys)
    verified = _verified(candidates, signed.sketches, config)
    return candidates, verified & near if near is not None else verified


def _near_fingerprints(fingerprints: npt.NDArray[np.uint64], max_distance: int) -> Pairs:
    """Every pair ``(i, j)``, ``i < j``, of fingerprints within ``max_distance`` bits, by brute force."""
    pairs: Pairs = set()
    for i in range(fingerprints.size - 1):
        later = np.flatnonzero(hamming_distance(fingerprints[i], fingerprints[i + 1 :]) <= max_distance) + i + 1
        pairs.update((i, int(j)) for j in later)
    return pairs


def _verified(candidates: Pairs, sketches: npt.NDArray[np.uint8], config: DetectionConfig) -> Pairs:
    """The candidates whose sketches estimate a similarity ``>= threshold``."""
    pairs = np.array(sorted(candidates), dtype=np.intp).reshape(-1, 2)
    agreements = bit_agreements(sketches[pairs[:, 0]], sketches[pairs[:, 1]])
    passed = estimate_similarity(agreements, config.sketch_bits) >= config.threshold
    return {(int(i), int(j)) for i, j in pairs[passed]}


def measure(texts: Sequence[str], config: DetectionConfig) -> PairAccuracy:
    """Pairwise precision and recall of ``config`` against exact Jaccard on ``texts``."""
    truth = set(similar_pairs(shingle_hash_sets(texts, config), config.threshold))
    flagged = flagged_pairs(texts, config)
    return PairAccuracy(len(texts), len(truth), len(flagged), len(truth & flagged))


@dataclass(frozen=True)
class BucketRate:
    """Of the ``count`` items whose similarity is in ``[low, high)``, the share ``rate`` detected."""

    low: float
    high: float
    count: int
    rate: float

    @property
    def centre(self) -> float:
        return (self.low + self.high) / 2


def detection_rates(similarities: npt.ArrayLike, detected: npt.ArrayLike, edges: Sequence[float]) -> list[BucketRate]:
    """The detected share per bucket ``[edges[k], edges[k + 1])``; empty buckets are left out.

    Buckets are half-open: a last edge of 1.0 leaves identical items out, one
    just past it (``np.nextafter(1.0, 2.0)``) counts them in the last bucket.
    """
    similarity = np.asarray(similarities, dtype=np.float64)
    hit = np.asarray(detected, dtype=bool)
    rates = []
    for low, high in itertools.pairwise(edges):
        inside = (similarity >= low) & (similarity < high)
        if inside.any():
            rates.append(BucketRate(float(low), float(high), int(inside.sum()), float(hit[inside].mean())))
    return rates


def midpoint(rates: Sequence[BucketRate]) -> float:
    """Similarity where the detected share first crosses 1/2, interpolated between bucket centres (NaN if never)."""
    for before, after in itertools.pairwise(rates):
        if before.rate < 0.5 <= after.rate:
            return before.centre + (0.5 - before.rate) * (after.centre - before.centre) / (after.rate - before.rate)
    return float("nan")


@dataclass(frozen=True)
class RealisedCurve:
    """The realised S-curve on a sample: per bucket of exact Jaccard, the share of pairs detected.

    Attributes:
        documents: documents of the sample.
        pairs: pairs with exact Jaccard at or above the first edge (those bucketed).
        candidates: per bucket, the share of pairs sharing a band (the theoretical ``P(s)`` predicts it).
        flagged: per bucket, the share also verified (estimate ``>= threshold``): reported as duplicates.
    """

    documents: int
    pairs: int
    candidates: list[BucketRate]
    flagged: list[BucketRate]


def realised_curve(texts: Sequence[str], config: DetectionConfig, edges: Sequence[float]) -> RealisedCurve:
    """Every pair of ``texts`` with exact Jaccard ``>= edges[0]``, bucketed by ``edges``, against what ``config`` does.

    The cost grows with the number of such pairs: bound it with the number of
    texts, and keep ``edges[0]`` well above the similarity of unrelated texts.
    """
    truth = similar_pairs(shingle_hash_sets(texts, config), edges[0])
    candidates, flagged = _candidates_and_reported(make_detector(config).sign(texts), config)
    similarity = np.fromiter(truth.values(), dtype=np.float64, count=len(truth))
    return RealisedCurve(
        documents=len(texts),
        pairs=len(truth),
        candidates=detection_rates(similarity, [pair in candidates for pair in truth], edges),
        flagged=detection_rates(similarity, [pair in flagged for pair in truth], edges),
    )
