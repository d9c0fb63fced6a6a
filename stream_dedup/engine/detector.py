"""The detector: probe, verify, insert, verdict, for a batch of documents at a time.

Semantics are those of a one-at-a-time loop: document ``i`` of the stream is
compared with every earlier indexed document (earlier batches *and* earlier
rows of its own batch), and is then indexed itself, duplicates included, so
that a later near-copy of a duplicate is still caught even if the original
has been evicted. Batching only changes the speed: verdicts do not depend on
batch boundaries.

Verification estimates the Jaccard similarity of each candidate pair from
the one-bit sketches or, with ``verification="exact"``, computes it from
the kept shingle sets; the best verified match (highest similarity, then the
earliest) becomes ``duplicate_of``, with its source. Exact verification first
lets the estimate rule out pairs more than six standard errors below the
threshold (a pair at or above it is lost so with probability under 1e-9), so
the costly set intersections go only to plausible pairs; and candidates are
verified in rounds of bounded size, so that a low threshold, which brings
many candidates, costs time but never unbounded memory.

Signing a document takes one pass over its shingle hashes: the one-permutation
sketch of ``sketch_bits`` bins gives the stored one-bit verification sketch,
and the same bins, grouped, the ``num_perm``-slot banding signature whose
full 32-bit values make the band keys.
"""

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.verdict import Verdict
from stream_dedup.lsh.band_keys import index_keys
from stream_dedup.lsh.generation import NO_SOURCE, IndexedBatch, SignedBatch
from stream_dedup.lsh.index import BandIndex, pairs_within_batch
from stream_dedup.sketch.bit_sketch import bit_agreements, coarsen, estimate_similarity, one_bit_sketches
from stream_dedup.text import fold_all
from stream_dedup.text.shingle_sets import ShingleSets, exact_jaccard

#: Bits of the sequence number in a packed (row, seq) pair key.
_SEQ_BITS = 40
#: Candidate pairs verified per round (their sketches, or shingle sets, are gathered at once).
_PAIRS_PER_ROUND = 1 << 14
#: Standard errors below the threshold under which an estimate rules a pair out of exact verification.
_EXACT_MARGIN_ERRORS = 6.0


@dataclass
class DetectorStats:
    """Running counters, for summaries and metrics."""

    documents: int = 0
    duplicates: int = 0
    candidates: int = 0
    verified: int = 0


class Detector:
    """Streaming near-duplicate detector over a banded LSH index.

    Example::

        detector = Detector(DetectionConfig(threshold=0.8))
        detector.process(["a", "b"], ["some text here", "some text here!"])
    """

    def __init__(self, config: DetectionConfig, index: BandIndex | None = None) -> None:
        self.config = config
        self.hasher = config.hasher()
        self.banding = config.banding()
        self.exact = config.verification == "exact"
        self.index = index or BandIndex(
            config.sketch_bits, self.banding, config.max_bucket_size, config.retention(), keep_shingles=self.exact
        )
        self.stats = DetectorStats()
        #: Candidates of each document of the latest batch (for a metric's histogram).
        self.last_batch_candidates: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.index)

    def memory_bytes(self) -> int:
        """Bytes held by the index (sketches, keys, sources, ids, band tables, shingle sets if kept)."""
        return self.index.nbytes

    def process(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        event_times: npt.NDArray[np.float64] | Sequence[float] | None = None,
        normalized: bool = False,
        sources: npt.NDArray[np.uint64] | Sequence[int] | None = None,
    ) -> list[Verdict]:
        """Verdicts for a batch of documents in stream order, then index them.

        ``event_times`` (seconds) drive age-based retention; they default to
        now. ``normalized=True`` says the texts already went through
        :func:`~stream_dedup.text.normalize` (callers that reject empty texts
        one by one normalise first and need not pay twice). ``sources`` are
        opaque 64-bit pointers to the documents' records (a line number, a
        packed Kafka partition and offset) that verdicts return for a match;
        they default to none. Raises :class:`~stream_dedup.errors.InputError`
        (and changes nothing) if a text is empty after normalisation.
        """
        if event_times is None:
            times = np.full(len(ids), time.time())
        else:
            times = np.asarray(event_times, dtype=np.float64)
        if sources is None:
            pointers = np.full(len(ids), NO_SOURCE, dtype=np.uint64)
        else:
            pointers = np.asarray(sources, dtype=np.uint64)
        if not texts:
            return []
        return self.process_signed(IndexedBatch(list(ids), self.sign(texts, normalized), times, pointers))

    def sign(self, texts: Sequence[str], normalized: bool = False) -> SignedBatch:
        """One-bit sketches and index keys of ``texts`` and, with exact verification, their shingle sets.

        What :meth:`process_signed` takes, and what the Kafka stage's
        changelog stores so that a restore need not re-shingle anything.
        """
        if not normalized:
            texts = fold_all(texts, self.config.strip_punctuation)
        bits = np.empty((len(texts), self.config.sketch_bits // 8), dtype=np.uint8)
        band_signatures = np.empty((len(texts), self.config.num_perm), dtype=np.uint32)
        sets, rows = [ShingleSets.empty()], [np.empty(0, np.intp)]
        # Chunk by chunk, so that each chunk's sketches are finished while they are in cache.
        for chunk, sketches in self.hasher.sketch_chunks(texts, folded=not normalized):
            bits[chunk.rows] = one_bit_sketches(self.hasher.densified(sketches))
            band_signatures[chunk.rows] = self.hasher.finalize(coarsen(sketches, self.config.num_perm))
            if self.exact:
                sets.append(ShingleSets.of_chunk(chunk))
                rows.append(chunk.rows)
        shingles = ShingleSets.concat(sets).take(np.argsort(np.concatenate(rows))) if self.exact else None
        return SignedBatch(bits, index_keys(band_signatures, bits, self.banding), shingles)

    def process_signed(self, batch: IndexedBatch) -> list[Verdict]:
        """Like :meth:`process`, for documents already signed by :meth:`sign`.

        With exact verification, the batch must carry its shingle sets.
        """
        if self.exact and batch.signed.shingles is None:
            raise ValueError("exact verification needs the batch's shingle sets")
        keys = batch.signed.keys
        lookup = self.index.lookup(keys)
        batch_rows, earlier_rows, ranks = pairs_within_batch(keys, self.config.max_bucket_size)
        first_seq = self.index.next_seq
        rows = np.concatenate((lookup.rows, batch_rows))
        seqs = np.concatenate((lookup.seqs, earlier_rows.astype(np.int64) + first_seq))
        best_seq, best_similarity = self._verify(batch.signed, rows, seqs, first_seq)
        verdicts = self._verdicts(batch, best_seq, best_similarity, first_seq)
        self.index.add(batch, lookup.newest_counts + ranks)
        self.stats.documents += len(batch.ids)
        self.stats.duplicates += int(np.count_nonzero(best_seq >= 0))
        return verdicts

    def _verify(
        self,
        batch: SignedBatch,
        rows: npt.NDArray[np.intp],
        seqs: npt.NDArray[np.int64],
        first_seq: int,
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """Best verified match of every row: ``(seq or -1, similarity)``."""
        n = len(batch)
        best_seq = np.full(n, -1, dtype=np.int64)
        best_similarity = np.zeros(n)
        pairs = np.unique((rows.astype(np.int64) << _SEQ_BITS) | seqs)
        self.stats.candidates += int(pairs.size)
        self.last_batch_candidates = np.bincount(pairs >> _SEQ_BITS, minlength=n)
        if pairs.size == 0:
            return best_seq, best_similarity
        rows = (pairs >> _SEQ_BITS).astype(np.intp)
        seqs = pairs & ((1 << _SEQ_BITS) - 1)
        similarity = np.empty(pairs.size)
        for start in range(0, pairs.size, _PAIRS_PER_ROUND):
            part = slice(start, start + _PAIRS_PER_ROUND)
            similarity[part] = self._similarity(batch, rows[part], seqs[part], first_seq)
        passed = similarity >= self.config.threshold
        self.stats.verified += int(np.count_nonzero(passed))
        rows, seqs, similarity = rows[passed], seqs[passed], similarity[passed]
        # Best first: highest similarity, then the earliest document.
        order = np.lexsort((seqs, -similarity, rows))
        firsts = order[np.unique(rows[order], return_index=True)[1]]
        best_seq[rows[firsts]] = seqs[firsts]
        best_similarity[rows[firsts]] = similarity[firsts]
        return best_seq, best_similarity

    def _similarity(
        self, batch: SignedBatch, rows: npt.NDArray[np.intp], seqs: npt.NDArray[np.int64], first_seq: int
    ) -> npt.NDArray[np.float64]:
        """Similarity of pairs (batch row, earlier document): estimated, or exact where it may pass."""
        estimate = self._estimated_similarity(batch.sketches, rows, seqs, first_seq)
        if batch.shingles is None:
            return estimate
        t = self.config.threshold
        margin = _EXACT_MARGIN_ERRORS * math.sqrt((1.0 - t * t) / self.config.sketch_bits)
        plausible = np.flatnonzero(estimate >= t - margin)
        exact = np.full(estimate.size, -1.0)
        exact[plausible] = self._exact_similarity(batch.shingles, rows[plausible], seqs[plausible], first_seq)
        return exact

    def _estimated_similarity(
        self, sketches: npt.NDArray[np.uint8], rows: npt.NDArray[np.intp], seqs: npt.NDArray[np.int64], first_seq: int
    ) -> npt.NDArray[np.float64]:
        """Jaccard estimates of pairs (batch row, earlier document) from one-bit sketches."""
        others = np.empty((seqs.size, sketches.shape[1]), dtype=np.uint8)
        in_batch = seqs >= first_seq
        others[in_batch] = sketches[seqs[in_batch] - first_seq]
        others[~in_batch] = self.index.sketches_of(seqs[~in_batch])
        return estimate_similarity(bit_agreements(sketches[rows], others), self.config.sketch_bits)

    def _exact_similarity(
        self, shingles: ShingleSets, rows: npt.NDArray[np.intp], seqs: npt.NDArray[np.int64], first_seq: int
    ) -> npt.NDArray[np.float64]:
        """Exact Jaccard of pairs (batch row, earlier document) from their shingle sets."""
        in_batch = seqs >= first_seq
        earlier = ShingleSets.concat(
            [shingles.take((seqs[in_batch] - first_seq).astype(np.intp)), self.index.shingle_sets_of(seqs[~in_batch])]
        )
        pair_order = np.concatenate((np.flatnonzero(in_batch), np.flatnonzero(~in_batch)))
        return exact_jaccard(shingles.take(rows), earlier.take(np.argsort(pair_order)))

    def _verdicts(
        self, batch: IndexedBatch, best_seq: npt.NDArray[np.int64], similarity: npt.NDArray[np.float64], first_seq: int
    ) -> list[Verdict]:
        """One verdict per row; the ids and sources of stored matches are fetched in one call each."""
        ids = batch.ids
        verdicts = [Verdict(doc_id, "unique") for doc_id in ids]
        rows = np.flatnonzero(best_seq >= 0)
        seqs = best_seq[rows]
        in_batch = seqs >= first_seq
        stored_ids = iter(self.index.ids_of(seqs[~in_batch]))
        sources = np.empty(seqs.size, dtype=np.uint64)
        sources[in_batch] = batch.sources[seqs[in_batch] - first_seq]
        sources[~in_batch] = self.index.sources_of(seqs[~in_batch])
        for row, seq, score, batched, source in zip(
            rows.tolist(), seqs.tolist(), similarity[rows].tolist(), in_batch.tolist(), sources.tolist(), strict=True
        ):
            match = ids[seq - first_seq] if batched else next(stored_ids)
            matched_source = None if source == NO_SOURCE else source
            verdicts[row] = Verdict(ids[row], "duplicate", match, round(score, 4), matched_source)
        return verdicts
