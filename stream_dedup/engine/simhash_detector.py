"""The ``simhash`` method: 64-bit SimHash fingerprints in an exact Hamming index.

A document is a duplicate of the nearest earlier document whose fingerprint
differs in at most ``max_hamming`` bits (among equals, the earliest); its
similarity is ``1 - distance / 64``. The index finds every such fingerprint
(Manku et al.'s permuted tables, :class:`~stream_dedup.lsh.HammingIndex`), so
unlike MinHash banding nothing is left to chance once fingerprints are
computed: the error lies all in the fingerprint, whose distance estimates the
angle between the documents' shingle vectors (Charikar). About 60 bytes per
document with its id, a sixth of MinHash's: the method for very large
indexes, with a coarser notion of similarity.
"""

from collections.abc import Sequence

import numpy as np

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detection import BestMatches, DetectorStats, DuplicateDetector, verdicts_of
from stream_dedup.engine.pairs import best_of_each_row
from stream_dedup.engine.text_verification import DocumentTexts
from stream_dedup.engine.verdict import Verdict
from stream_dedup.lsh.generation import IndexedBatch, SignedBatch
from stream_dedup.lsh.hamming import HammingIndex
from stream_dedup.lsh.hamming_params import FINGERPRINT_BITS
from stream_dedup.text import normalize_all


class SimHashDetector(DuplicateDetector):
    """Streaming near-duplicate detection by SimHash fingerprints within ``max_hamming`` bits.

    Example::

        detector = SimHashDetector(DetectionConfig(method="simhash", max_hamming=3))
        detector.process(["a", "b"], ["some text here and more", "some text here and more!"])
    """

    index: HammingIndex

    def __init__(self, config: DetectionConfig, index: HammingIndex | None = None) -> None:
        if config.method != "simhash":
            raise ValueError(f"SimHashDetector is the simhash method, not {config.method!r}")
        self.config = config
        self.hasher = config.simhasher()
        self.index = index or HammingIndex(config.hamming_layout(), config.retention(), config.max_bucket_size)
        self.stats = DetectorStats()
        self.last_batch_candidates = np.zeros(0, dtype=np.int64)

    def sign(self, texts: Sequence[str], normalized: bool = False) -> SignedBatch:
        """The fingerprints of ``texts`` (sketches and keys are empty: this method has none)."""
        if not normalized:
            texts = normalize_all(texts, self.config.strip_punctuation, self.config.ignore_invisible)
        fingerprints = self.hasher.fingerprints(texts, normalized=True)
        n = len(texts)
        return SignedBatch(np.empty((n, 0), np.uint8), np.empty((n, 0), np.uint32), None, fingerprints)

    def process_signed(self, batch: IndexedBatch, document_texts: DocumentTexts | None = None) -> list[Verdict]:
        fingerprints = batch.signed.fingerprints
        if fingerprints is None:
            raise ValueError("the simhash method needs the batch's fingerprints")
        first_seq = self.index.next_seq
        matches = self.index.search_batch(fingerprints)
        n = len(batch.ids)
        self.last_batch_candidates = np.bincount(matches.rows, minlength=n).astype(np.int64)
        self.stats.candidates += len(matches)
        self.stats.verified += len(matches)
        # Best first: smallest distance, then the earliest document.
        firsts = best_of_each_row(matches.rows, matches.seqs, -matches.distances.astype(np.float64))
        best_seqs = np.full(n, -1, dtype=np.int64)
        distances = np.zeros(n, dtype=np.int64)
        best_seqs[matches.rows[firsts]] = matches.seqs[firsts]
        distances[matches.rows[firsts]] = matches.distances[firsts]
        similarity = 1.0 - distances / FINGERPRINT_BITS
        # Verdicts before the insert: retention may then evict a matched document and its id.
        verdicts = verdicts_of(batch, BestMatches(best_seqs, similarity, distances), self.index, first_seq)
        self.index.add(fingerprints, batch.ids, batch.event_times, batch.sources, matches)
        self.stats.documents += n
        self.stats.duplicates += int(firsts.size)
        return verdicts
