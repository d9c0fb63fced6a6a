"""The ``simhash`` method: 64-bit SimHash fingerprints in an exact Hamming index.

A document is a duplicate of the nearest earlier document whose fingerprint
differs in at most ``max_hamming`` bits (among equals, the earliest); its
similarity is ``1 - distance / 64``. The index finds every such fingerprint
(Manku et al.'s permuted tables, :class:`~stream_dedup.lsh.hamming.HammingIndex`), so
unlike MinHash banding nothing is left to chance once fingerprints are
computed: the error lies all in the fingerprint, whose distance estimates the
angle between the documents' shingle vectors (Charikar). About 60 bytes per
document with its id, a sixth of MinHash's: the method for very large
indexes, with a coarser notion of similarity.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detection import BestMatches, DetectorStats, DuplicateDetector, verdicts_of
from stream_dedup.engine.pairs import best_of_each_row
from stream_dedup.engine.text_verification import DocumentTexts
from stream_dedup.engine.verdict import Verdict
from stream_dedup.lsh.generation import IndexedBatch, SignedBatch
from stream_dedup.lsh.hamming import HammingIndex, fingerprint_slots
from stream_dedup.lsh.hamming_params import FINGERPRINT_BITS
from stream_dedup.lsh.retention import Retention
from stream_dedup.text import normalize_all


@dataclass(frozen=True)
class HammingProbe:
    """What probing a batch found, before anything of it is indexed.

    Attributes:
        best: each row's nearest earlier document (sequence numbers as in
            :class:`~stream_dedup.engine.detector.Probe`), with its distance.
        first_seq: the sequence number the batch's first row gets if it is inserted next.
        counts: ``(n, 2)`` each row's near fingerprints and exact copies in
            the newest generation and its slot: what the hot-cluster cap reads.
    """

    best: BestMatches
    first_seq: int
    counts: npt.NDArray[np.int64]


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
        self.index = hamming_index(config) if index is None else index
        self.stats = DetectorStats()
        self.last_batch_candidates = np.zeros(0, dtype=np.int64)

    def sign(self, texts: Sequence[str], normalized: bool = False) -> SignedBatch:
        """The fingerprints of ``texts`` (sketches and keys are empty: this method has none)."""
        if not normalized:
            texts = normalize_all(texts, self.config.shingling().folding)
        fingerprints = self.hasher.fingerprints(texts, normalized=True)
        n = len(texts)
        return SignedBatch(np.empty((n, 0), np.uint8), np.empty((n, 0), np.uint32), None, fingerprints)

    def process_signed(self, batch: IndexedBatch, document_texts: DocumentTexts | None = None) -> list[Verdict]:
        self.index.make_way(batch.event_times)
        probe = self.probe(batch)
        # Verdicts before the insert: retention may then evict a matched document and its id.
        verdicts = verdicts_of(batch, probe.best, self.index, probe.first_seq)
        self._index_and_count(batch, probe.best, probe.counts)
        return verdicts

    def probe(
        self,
        batch: IndexedBatch,
        earlier: npt.NDArray[np.bool_] | None = None,
        document_texts: DocumentTexts | None = None,
    ) -> HammingProbe:
        """Each row's nearest earlier document within ``max_hamming`` bits; changes nothing in the index.

        ``earlier`` (a mask over the batch's rows) keeps only the earlier rows
        it marks as possible matches, as :meth:`~stream_dedup.engine.detector.Detector.probe` does.
        ``document_texts`` is not read: a fingerprint's distance is exact,
        so no pair is left too near a threshold to judge.
        """
        fingerprints = self._fingerprints(batch.signed)
        matches, crowding = self.index.capped(self.index.search_batch(fingerprints, earlier), fingerprints)
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
        best = BestMatches(best_seqs, similarity, distances)
        return HammingProbe(best, self.index.next_seq, crowding)

    def insert(self, batch: IndexedBatch, counts: npt.NDArray[np.int64]) -> None:
        """Index ``batch`` (sequence numbers ``index.next_seq`` onwards), its rows' :attr:`HammingProbe.counts`
        given."""
        self.index.add(self._fingerprints(batch.signed), batch.ids, batch.event_times, batch.sources, counts)

    def slots_of(self, batch: SignedBatch, slots: int) -> npt.NDArray[np.intp]:
        """The slot of each row's fingerprint (:func:`~stream_dedup.lsh.hamming.fingerprint_slots`)."""
        return fingerprint_slots(self._fingerprints(batch), slots)

    @staticmethod
    def _fingerprints(batch: SignedBatch) -> npt.NDArray[np.uint64]:
        if batch.fingerprints is None:
            raise ValueError("the simhash method needs the batch's fingerprints")
        return batch.fingerprints


def hamming_index(config: DetectionConfig, retention: Retention | None = None) -> HammingIndex:
    """An empty index for ``config`` (method simhash); ``retention`` replaces the config's."""
    return HammingIndex(
        config.hamming_layout(),
        config.retention() if retention is None else retention,
        config.max_bucket_size,
        config.index_slots,
    )
