"""Measuring a configuration against exact Jaccard similarity on a sample.

Used by ``stream-dedup params --sample`` so users can check parameters on
their own data. Ground truth is every pair with exact Jaccard ``>= t``,
found without comparing all pairs by *prefix filtering* (Chaudhuri et al.,
2006): with tokens ordered rarest first, two sets with Jaccard ``>= t`` must
share a token among the first ``|x| - ceil(t |x|) + 1`` tokens of each.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import Detector
from stream_dedup.sketch.bit_sketch import bit_agreements, estimate_similarity
from stream_dedup.text import normalize_all, shingle_chunks

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
    normalized = normalize_all(texts, config.strip_punctuation)
    sets: list[npt.NDArray[np.uint64]] = [np.empty(0, np.uint64)] * len(texts)
    for chunk in shingle_chunks(normalized, hasher.shingling, hasher.seed):
        for row, hashes, count in zip(chunk.rows, chunk.hashes, chunk.counts, strict=True):
            sets[row] = np.unique(hashes[:count])
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


def flagged_pairs(texts: Sequence[str], config: DetectionConfig) -> Pairs:
    """Pairs the configuration reports: sharing a key and estimated similarity ``>= threshold``."""
    signed = Detector(config).sign(texts)
    keys = signed.keys
    flagged: Pairs = set()
    for band in range(keys.shape[1]):
        order = np.argsort(keys[:, band], kind="stable")
        sorted_keys = keys[order, band]
        boundaries = np.flatnonzero(np.diff(sorted_keys)) + 1
        for group in np.split(order, boundaries):
            for a, i in enumerate(group.tolist()):
                for j in group[a + 1 :].tolist():
                    flagged.add((min(i, j), max(i, j)))
    pairs = np.array(sorted(flagged), dtype=np.intp).reshape(-1, 2)
    agreements = bit_agreements(signed.sketches[pairs[:, 0]], signed.sketches[pairs[:, 1]])
    passed = estimate_similarity(agreements, config.sketch_bits) >= config.threshold
    return {(int(i), int(j)) for i, j in pairs[passed]}


def measure(texts: Sequence[str], config: DetectionConfig) -> PairAccuracy:
    """Pairwise precision and recall of ``config`` against exact Jaccard on ``texts``."""
    truth = set(similar_pairs(shingle_hash_sets(texts, config), config.threshold))
    flagged = flagged_pairs(texts, config)
    return PairAccuracy(len(texts), len(truth), len(flagged), len(truth & flagged))
