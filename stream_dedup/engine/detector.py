"""The MinHash detector: probe, verify, insert, verdict, for a batch of documents at a time.

Semantics are those of :class:`~stream_dedup.engine.detection.DuplicateDetector`:
every document is compared with every earlier indexed one, and is then
indexed itself, duplicates included, so that a later near-copy of a
duplicate is still caught even if the original has been evicted.

Verification estimates the Jaccard similarity of each candidate pair from
the one-bit sketches or, with ``verification="exact"``, computes it from
the kept shingle sets; the best verified match (highest similarity, then the
earliest) becomes ``duplicate_of``, with its source. Exact verification first
lets the estimate rule out pairs more than six standard errors below the
threshold (a pair at or above it is lost so with probability under 1e-9), so
the costly set intersections go only to plausible pairs; and candidates are
verified in rounds of bounded size, so that a low threshold, which brings
many candidates, costs time but never unbounded memory.

With ``containment_threshold`` set, the index is banded for containment
(``lsh.ensemble_params``): the candidates of every document come through
those bands, as the containment search's probe plan allows, and documents
that are not near-duplicates are then judged for containment
(``engine.containment``): an earlier document holding most of their
shingles, or one they hold most of.

The ``combined`` method (Henzinger, SIGIR 2006) keeps a SimHash fingerprint
beside each sketch and accepts a verified pair only if the fingerprints also
lie within ``max_hamming`` bits: two independent views of the text must both
agree, which removes false positives that one of them alone lets through.

Signing a document takes one pass over its shingle hashes: the one-permutation
sketch of ``sketch_bits`` bins gives the stored one-bit verification sketch,
and the same bins, grouped, the ``num_perm``-slot banding signature whose
full 32-bit values make the band keys.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stream_dedup.config import DetectionConfig
from stream_dedup.distinct import distinct_sorted
from stream_dedup.engine.containment import ContainmentSearch, containment_verdicts
from stream_dedup.engine.detection import BestMatches, DetectorStats, DuplicateDetector, verdicts_of
from stream_dedup.engine.exact_copies import NO_BOUND, batch_copy_bounds, bounded_pairs, proven, stored_copy_bounds
from stream_dedup.engine.pairs import (
    PAIRS_PER_ROUND,
    MeasuredPairs,
    best_of_each_row,
    earlier_shingle_sets,
    earlier_values,
)
from stream_dedup.engine.simhash_detector import SimHashDetector
from stream_dedup.engine.text_verification import (
    DocumentTexts,
    ambiguous_pairs,
    clearly_matched,
    hiding_pairs,
    text_similarity,
)
from stream_dedup.engine.verdict import Verdict
from stream_dedup.lsh.band_keys import content_slots, index_keys
from stream_dedup.lsh.generation import IndexedBatch, SignedBatch
from stream_dedup.lsh.index import BandIndex, BatchPairs, Lookup, pairs_within_batch, ranks_within_batch
from stream_dedup.lsh.retention import Retention
from stream_dedup.sketch.bit_sketch import bit_agreements, coarsen, estimate_similarity, one_bit_sketches
from stream_dedup.sketch.oph import EMPTY
from stream_dedup.sketch.simhash import hamming_distance
from stream_dedup.text import fold_all
from stream_dedup.text.shingle_sets import ShingleSets, distinct_counts, exact_jaccard

#: Bits of the sequence number in a packed (row, seq) pair key.
_SEQ_BITS = 40
#: Standard errors below the threshold under which an estimate rules a pair out of exact verification.
_EXACT_MARGIN_ERRORS = 6.0


@dataclass(frozen=True)
class Probe:
    """What probing a batch found, before anything of it is indexed.

    Attributes:
        best: each row's best match: a stored document's sequence number
            (below ``first_seq``), ``first_seq + row`` for an earlier row of
            the batch, or -1.
        first_seq: the sequence number the batch's first row gets if it is inserted next.
        counts: ``(n, bands + 1)`` documents already under each row's keys
            (newest generation and earlier rows of the batch): what the
            hot-bucket cap compares with ``max_bucket_size``.
        pairs: every candidate pair measured, which the containment search
            judges in turn.
    """

    best: BestMatches
    first_seq: int
    counts: npt.NDArray[np.int64]
    pairs: MeasuredPairs


def make_detector(config: DetectionConfig) -> DuplicateDetector:
    """An empty detector of ``config.method``."""
    return SimHashDetector(config) if config.method == "simhash" else Detector(config)


def band_index(config: DetectionConfig, retention: Retention | None = None) -> BandIndex:
    """An empty index for ``config`` (methods minhash and combined); ``retention`` replaces the config's."""
    return BandIndex(
        config.sketch_bits,
        config.banding(),
        config.max_bucket_size,
        config.retention() if retention is None else retention,
        keep_shingles=config.verification == "exact",
        keep_fingerprints=config.uses_simhash,
        keep_set_sizes=config.containment() is not None,
        slots=config.index_slots,
    )


class Detector(DuplicateDetector):
    """Streaming near-duplicate detector over a banded LSH index (methods ``minhash`` and ``combined``).

    Example::

        detector = Detector(DetectionConfig(threshold=0.8))
        detector.process(["a", "b"], ["some text here", "some text here!"])
    """

    index: BandIndex

    def __init__(self, config: DetectionConfig, index: BandIndex | None = None) -> None:
        if not config.uses_minhash:
            raise ValueError("the simhash method has its own detector: use make_detector(config)")
        self.config = config
        self.hasher = config.hasher()
        self.simhasher = config.simhasher() if config.uses_simhash else None
        self.banding = config.banding()
        self.exact = config.verification == "exact"
        self.index = band_index(config) if index is None else index
        containment = config.containment()
        self.containment = (
            None if containment is None else ContainmentSearch(containment, self.index, config.sketch_bits, self.hasher)
        )
        self.stats = DetectorStats()
        self.last_batch_candidates = np.zeros(0, dtype=np.int64)

    def sign(self, texts: Sequence[str], normalized: bool = False) -> SignedBatch:
        """One-bit sketches and index keys of ``texts``, and what the settings keep besides.

        Shingle sets come with exact verification, SimHash fingerprints with
        the combined method, set sizes with containment on. What
        :meth:`process_signed` takes, and what the Kafka stage's
        changelog stores so that a restore need not re-shingle anything.
        """
        if not normalized:
            texts = fold_all(texts, self.config.shingling().folding)
        bits = np.empty((len(texts), self.config.sketch_bits // 8), dtype=np.uint8)
        band_signatures = np.empty((len(texts), self.config.num_perm), dtype=np.uint32)
        fingerprints = np.empty(len(texts), dtype=np.uint64) if self.simhasher is not None else None
        sizes = np.empty(len(texts), dtype=np.uint32) if self.containment is not None else None
        filled = np.empty(len(texts), dtype=np.uint16)
        sets, rows = [ShingleSets.empty()], [np.empty(0, np.intp)]
        # Chunk by chunk, so that each chunk's sketches are finished while they are in cache.
        # A long document's shingles are held together only if something here needs them (its set, its fingerprint).
        needs_shingles = self.exact or fingerprints is not None or sizes is not None
        for chunk_rows, sketches, chunk in self.hasher.sketch_chunks(texts, not normalized, needs_shingles):
            bits[chunk_rows] = one_bit_sketches(self.hasher.densified(sketches))
            filled[chunk_rows] = np.count_nonzero(sketches != EMPTY, axis=1)
            band_signatures[chunk_rows] = self.hasher.finalize(coarsen(sketches, self.config.num_perm))
            if chunk is None:
                continue
            if self.exact:
                sets.append(ShingleSets.of_chunk(chunk))
                rows.append(chunk.rows)
            if fingerprints is not None:
                assert self.simhasher is not None
                fingerprints[chunk.rows] = self.simhasher.fingerprint_chunk(chunk)
            if sizes is not None:
                sizes[chunk.rows] = distinct_counts(chunk)
        shingles = ShingleSets.concat(sets).take(np.argsort(np.concatenate(rows))) if self.exact else None
        keys = index_keys(band_signatures, bits, self.banding)
        return SignedBatch(bits, keys, shingles, fingerprints, sizes, filled)

    def process_signed(self, batch: IndexedBatch, document_texts: DocumentTexts | None = None) -> list[Verdict]:
        """Like :meth:`process`, for documents already signed by :meth:`sign`.

        With exact verification, the batch must carry its shingle sets.
        """
        self.index.make_way(batch.event_times)
        probe = self.probe(batch, document_texts=document_texts)
        verdicts = verdicts_of(batch, probe.best, self.index, probe.first_seq)
        if self.containment is not None:
            # Verdicts before the insert: retention may then evict a matched document and its id.
            found = self.containment.verify(batch, probe.pairs, probe.best.seqs < 0, probe.first_seq, document_texts)
            containment_verdicts(verdicts, batch, found, self.index, probe.first_seq)
            self.stats.contained += int(np.count_nonzero((found.seqs >= 0) & found.contained))
            self.stats.contains += int(np.count_nonzero((found.seqs >= 0) & ~found.contained))
            self.stats.containment_candidates += found.candidates
            self.stats.settled_by_text += found.settled_by_text
            self.stats.unsettled += found.unsettled
        self._index_and_count(batch, probe.best, probe.counts)
        return verdicts

    def probe(
        self,
        batch: IndexedBatch,
        earlier: npt.NDArray[np.bool_] | None = None,
        document_texts: DocumentTexts | None = None,
    ) -> Probe:
        """Each row's best verified match among the stored documents and the earlier rows of the batch.

        ``earlier`` (a mask over the batch's rows) keeps only the earlier rows
        it marks as possible matches: a shard's own rows, the others being
        some other shard's to answer for. ``document_texts`` settles the
        pairs whose estimate is too near the threshold to judge
        (:mod:`~stream_dedup.engine.text_verification`). Changes nothing in the index.
        """
        if self.exact and batch.signed.shingles is None:
            raise ValueError("exact verification needs the batch's shingle sets")
        if self.simhasher is not None and batch.signed.fingerprints is None:
            raise ValueError("the combined method needs the batch's SimHash fingerprints")
        if self.containment is not None and batch.signed.set_sizes is None:
            raise ValueError("containment is on: the batch needs its set sizes")
        keys = batch.signed.keys
        # Exact copies first: each row's candidates after its earliest copy cannot be its best (engine.exact_copies).
        bounds, unbounded = stored_copy_bounds(self.index, batch.signed)
        within = self._batch_pairs(keys, unbounded, earlier)
        ranks = ranks_within_batch(keys, self.index.slots) if self.index.slots > 1 else within.ranks
        first_seq = self.index.next_seq
        bounds = batch_copy_bounds(bounds, unbounded, batch.signed, within, first_seq)
        # Bounds cost a search per query: most batches of a stream have no exact copy to be bounded by.
        lookup = self.index.lookup(keys, within.ranks, bounds if (bounds != NO_BOUND).any() else None)
        counts = lookup.newest_counts + ranks
        rows, seqs = self._candidates(batch, lookup, bounded_pairs(within, bounds, first_seq), first_seq)
        pairs = self._measure(batch, rows, seqs, first_seq, document_texts)
        best, verified = self._verify(batch.signed, pairs, first_seq)
        unproven = ~proven(best, bounds)
        if unproven.any():
            # A copy's sketch hid a near-copy: those rows are measured against all their candidates.
            every = self._batch_pairs(keys, unproven, earlier)
            rows, seqs = self._candidates(batch, self.index.lookup(keys, within.ranks), every, first_seq)
            again = unproven[rows]
            more = self._measure(batch, rows[again], seqs[again], first_seq, document_texts)
            pairs = MeasuredPairs.concat([pairs.take(np.flatnonzero(~unproven[pairs.rows])), more])
            best, verified = self._verify(batch.signed, pairs, first_seq)
        self.stats.verified += verified
        self.last_batch_candidates = np.bincount(pairs.rows, minlength=len(batch.ids))
        return Probe(best, first_seq, counts, pairs)

    def insert(self, batch: IndexedBatch, counts: npt.NDArray[np.int64]) -> None:
        """Index ``batch`` (sequence numbers ``index.next_seq`` onwards), its rows' :attr:`Probe.counts` given."""
        self.index.add(batch, counts)

    def slots_of(self, batch: SignedBatch, slots: int) -> npt.NDArray[np.intp]:
        """The content slot of each row's keys (``lsh.band_keys.content_slots``)."""
        return content_slots(batch.keys, slots)

    def _batch_pairs(
        self, keys: npt.NDArray[np.uint32], wanting: npt.NDArray[np.bool_], earlier: npt.NDArray[np.bool_] | None
    ) -> BatchPairs:
        """The batch's pairs (:func:`pairs_within_batch`) of the rows ``wanting`` them, with the earlier rows
        ``earlier`` marks (all if ``None``)."""
        within = pairs_within_batch(keys, self.config.max_bucket_size, self.index.slots, wanting)
        if earlier is None:
            return within
        # An earlier row another shard owns is entered there, not here.
        kept = earlier[within.earlier_rows]
        return within._replace(
            rows=within.rows[kept], earlier_rows=within.earlier_rows[kept], tables=within.tables[kept]
        )

    def _candidates(
        self, batch: IndexedBatch, lookup: Lookup, within: BatchPairs, first_seq: int
    ) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.int64]]:
        """``(rows, seqs)``: the candidate pairs of the stored documents and the batch's earlier rows (some twice)."""
        if self.containment is not None:
            return self.containment.candidates(batch, lookup, within, first_seq)
        rows = np.concatenate((lookup.rows, within.rows))
        return rows, np.concatenate((lookup.seqs, within.earlier_rows.astype(np.int64) + first_seq))

    def _measure(
        self,
        batch: IndexedBatch,
        rows: npt.NDArray[np.intp],
        seqs: npt.NDArray[np.int64],
        first_seq: int,
        document_texts: DocumentTexts | None,
    ) -> MeasuredPairs:
        """Every candidate pair once, with its Jaccard estimate and the similarity verification judges."""
        packed = distinct_sorted((rows.astype(np.int64) << _SEQ_BITS) | seqs)
        self.stats.candidates += int(packed.size)
        rows = (packed >> _SEQ_BITS).astype(np.intp)
        seqs = packed & ((1 << _SEQ_BITS) - 1)
        pairs = MeasuredPairs(rows, seqs, np.empty(packed.size), np.empty(packed.size))
        for start in range(0, packed.size, PAIRS_PER_ROUND):
            part = slice(start, start + PAIRS_PER_ROUND)
            pairs.estimates[part], pairs.similarity[part] = self._similarity(
                batch.signed, rows[part], seqs[part], first_seq
            )
        if document_texts is not None and batch.signed.shingles is None:
            self._settle_with_texts(batch, pairs, first_seq, document_texts)
        return pairs

    def _settle_with_texts(
        self, batch: IndexedBatch, pairs: MeasuredPairs, first_seq: int, document_texts: DocumentTexts
    ) -> None:
        """Set the similarity of pairs too near the threshold to their texts' exact Jaccard, where known.

        So too for pairs whose sketches may hide a near-copy below the
        threshold (:func:`hiding_pairs`), which make no row clear either.
        """
        config = self.config
        t, bits = config.threshold, config.sketch_bits
        filled = batch.signed.filled_bins
        hiding = hiding_pairs(pairs.estimates, filled[pairs.rows], t, bits) if filled is not None else np.empty(0, int)
        near = ambiguous_pairs(pairs.estimates, t, bits)
        if self.simhasher is None:  # (combined: a clear pair may still fail its Hamming distance)
            proven = pairs.estimates.copy()
            proven[hiding] = 0.0
            clear = clearly_matched(proven, pairs.rows, len(batch.ids), t, bits)
            near = near[~clear[pairs.rows[near]]]
        near = np.union1d(near, hiding)
        if not near.size:
            return
        earlier = earlier_values(batch.sources, self.index.sources_of, pairs.seqs[near], first_seq)
        exact = text_similarity(document_texts, self.hasher, batch.sources[pairs.rows[near]], earlier)
        known = ~np.isnan(exact)
        pairs.similarity[near[known]] = exact[known]
        self.stats.settled_by_text += int(np.count_nonzero(known))
        self.stats.unsettled += int(near.size - np.count_nonzero(known))

    def _verify(self, batch: SignedBatch, pairs: MeasuredPairs, first_seq: int) -> tuple[BestMatches, int]:
        """Best verified match of every row (and, for the combined method, its Hamming distance), and how many
        pairs verified."""
        n = len(batch)
        best_seq = np.full(n, -1, dtype=np.int64)
        best_similarity = np.zeros(n)
        best_distance = np.zeros(n, dtype=np.int64) if self.simhasher is not None else None
        passed = pairs.similarity >= self.config.threshold
        rows, seqs, similarity = pairs.rows[passed], pairs.seqs[passed], pairs.similarity[passed]
        distances = self._hamming_distances(batch, rows, seqs, first_seq)
        if distances is not None:
            near = distances <= self.config.max_hamming
            rows, seqs, similarity, distances = rows[near], seqs[near], similarity[near], distances[near]
        firsts = best_of_each_row(rows, seqs, similarity)
        best_seq[rows[firsts]] = seqs[firsts]
        best_similarity[rows[firsts]] = similarity[firsts]
        if best_distance is not None and distances is not None:
            best_distance[rows[firsts]] = distances[firsts]
        return BestMatches(best_seq, best_similarity, best_distance), int(rows.size)

    def _hamming_distances(
        self, batch: SignedBatch, rows: npt.NDArray[np.intp], seqs: npt.NDArray[np.int64], first_seq: int
    ) -> npt.NDArray[np.int64] | None:
        """Hamming distances of the pairs' SimHash fingerprints (combined method), else ``None``."""
        if batch.fingerprints is None or self.simhasher is None:
            return None
        others = earlier_values(batch.fingerprints, self.index.fingerprints_of, seqs, first_seq)
        return hamming_distance(batch.fingerprints[rows], others).astype(np.int64)

    def _similarity(
        self, batch: SignedBatch, rows: npt.NDArray[np.intp], seqs: npt.NDArray[np.int64], first_seq: int
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """Jaccard estimates of pairs (batch row, earlier document), and the similarity verification judges:
        the estimate, or the exact Jaccard where the estimate allows the threshold."""
        estimate = self._estimated_similarity(batch.sketches, rows, seqs, first_seq)
        if batch.shingles is None:
            return estimate, estimate
        t = self.config.threshold
        margin = _EXACT_MARGIN_ERRORS * math.sqrt((1.0 - t * t) / self.config.sketch_bits)
        plausible = np.flatnonzero(estimate >= t - margin)
        exact = np.full(estimate.size, -1.0)
        exact[plausible] = self._exact_similarity(batch.shingles, rows[plausible], seqs[plausible], first_seq)
        return estimate, exact

    def _estimated_similarity(
        self, sketches: npt.NDArray[np.uint8], rows: npt.NDArray[np.intp], seqs: npt.NDArray[np.int64], first_seq: int
    ) -> npt.NDArray[np.float64]:
        """Jaccard estimates of pairs (batch row, earlier document) from one-bit sketches."""
        others = earlier_values(sketches, self.index.sketches_of, seqs, first_seq)
        return estimate_similarity(bit_agreements(sketches[rows], others), self.config.sketch_bits)

    def _exact_similarity(
        self, shingles: ShingleSets, rows: npt.NDArray[np.intp], seqs: npt.NDArray[np.int64], first_seq: int
    ) -> npt.NDArray[np.float64]:
        """Exact Jaccard of pairs (batch row, earlier document) from their shingle sets."""
        return exact_jaccard(shingles.take(rows), earlier_shingle_sets(shingles, self.index, seqs, first_seq))
