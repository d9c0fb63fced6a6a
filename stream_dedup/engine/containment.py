"""Containment: the earlier document that holds a new one, or that the new one holds (Broder, seed 002).

Only documents that are not near-duplicates are asked. A document ``A``
(``q`` distinct shingles) gets verdict ``contained`` when an earlier indexed
document ``B`` (``x`` shingles) holds at least ``containment_threshold`` of
its shingles, ``c(A, B) = |A ∩ B| / q``; failing that, ``contains`` when it
holds at least that share of an earlier document's, ``c(B, A) = |A ∩ B| / x``.
``contained`` comes first because it says more (the document adds little to
an earlier one); within a direction the best match has the highest
containment, then is the earliest. Pairs whose sizes differ by more than
``containment_max_ratio`` are not judged. Candidates come from the index's
bands, which with containment on are chosen for it, through the probe plan
of ``lsh.ensemble_params`` (:meth:`ContainmentSearch.candidates`).

**The estimate.** The one-bit sketches estimate the pair's Jaccard
similarity ``J`` (``sketch.bit_sketch``), and the two stored set sizes turn
it into the intersection: ``J = I / (q + x - I)`` gives

    I = J (q + x) / (1 + J),   c(A, B) = I / q,   c(B, A) = I / x

(``I`` clipped to ``min(q, x)``). Its error is the sketch's,
``sqrt((1 - J**2) / K)`` for ``K`` bits, times ``dc/dJ = (1 + x/q) / (1 + J)**2``
(:func:`containment_standard_error`): with 1,024 bits, 0.017 at ``c = 0.8``
for equal sizes, 0.047 for sizes 2x apart, 0.11 at 4x. With
``verification = "exact"`` the intersection is counted on the kept shingle
sets instead, after the estimate has ruled out pairs more than six standard
errors short of the threshold.

**Pairs too near the threshold** are settled by their texts, as the
near-duplicate search settles its own
(:mod:`~stream_dedup.engine.text_verification`): a pair whose containment,
either way, is estimated within ``AMBIGUITY_ERRORS`` of its standard errors
of the threshold gets its exact Jaccard from the two texts when the caller
can give them, and so its exact intersection. Without it a document that
shares boilerplate with many earlier ones, each holding a little under the
threshold of it, was reported ``contained`` by whichever estimate erred
highest: on real short texts sharing a signature, a fifth of such verdicts
were below the threshold, some by 0.12.
"""

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stream_dedup.engine.detection import StoredDocuments, matches_of, optional_sources
from stream_dedup.engine.pairs import (
    PAIRS_PER_ROUND,
    MeasuredPairs,
    best_of_each_row,
    earlier_shingle_sets,
    earlier_values,
)
from stream_dedup.engine.text_verification import AMBIGUITY_ERRORS, DocumentTexts, text_similarity
from stream_dedup.engine.verdict import Verdict, VerdictKind
from stream_dedup.lsh.band_table import IntArray
from stream_dedup.lsh.ensemble_params import EnsembleParameters, implied_jaccard
from stream_dedup.lsh.generation import IndexedBatch, SignedBatch
from stream_dedup.lsh.index import BandIndex, BatchPairs, Lookup
from stream_dedup.sketch.minhash import MinHasher
from stream_dedup.text.shingle_sets import shared_counts

#: Standard errors below the implied Jaccard under which an estimate rules a pair out of exact counting.
_EXACT_MARGIN_ERRORS = 6.0

FloatArray = npt.NDArray[np.float64]


def estimated_intersection(jaccard: npt.ArrayLike, sizes: npt.ArrayLike, other_sizes: npt.ArrayLike) -> FloatArray:
    """``|A ∩ B|`` from the Jaccard similarity of ``A`` and ``B`` and their sizes, at most the smaller size.

    >>> float(estimated_intersection(0.5, 100, 200))
    100.0
    """
    j = np.asarray(jaccard, dtype=np.float64)
    a, b = np.asarray(sizes, dtype=np.float64), np.asarray(other_sizes, dtype=np.float64)
    return np.asarray(np.minimum(j * (a + b) / (1.0 + j), np.minimum(a, b)), dtype=np.float64)


def containment_standard_error(containment: float, ratio: float, sketch_bits: int) -> float:
    """Standard error of the estimate of ``c(A, B)`` when ``|B| = ratio * |A|`` (delta method).

    >>> round(containment_standard_error(0.8, 2.0, 1024), 3)
    0.047
    """
    return float(containment_standard_errors(containment, np.float64(ratio), sketch_bits))


def containment_standard_errors(containment: float, ratios: npt.ArrayLike, sketch_bits: int) -> FloatArray:
    """:func:`containment_standard_error` at each of ``ratios``; 0 where ``ratio < containment`` cannot hold it."""
    ratio = np.asarray(ratios, dtype=np.float64)
    jaccard = np.minimum(containment / (1.0 + ratio - containment), 1.0)
    return np.asarray((1.0 + ratio) / (1.0 + jaccard) ** 2 * np.sqrt((1.0 - jaccard**2) / sketch_bits))


@dataclass(frozen=True)
class BestContainments:
    """Each row's containment match.

    Attributes:
        seqs: the match's sequence number, -1 for none.
        contained: whether the row is the one contained (``contained``) or the match is (``contains``).
        values: the containment.
        similarity: the pair's Jaccard similarity (estimated, or exact with exact verification).
    """

    seqs: npt.NDArray[np.int64]
    contained: npt.NDArray[np.bool_]
    values: FloatArray
    similarity: FloatArray
    #: Candidate pairs verified for the batch.
    candidates: int = 0
    #: Pairs too near the threshold judged by their texts, and those left to the estimate (no text).
    settled_by_text: int = 0
    unsettled: int = 0


class ContainmentSearch:
    """With containment on: the candidates of both searches, and the containment of the rows not near-duplicates.

    The index is then banded for containment (``lsh.ensemble_params``), and
    the :class:`~stream_dedup.engine.detector.Detector` takes the candidates
    of every row from :meth:`candidates`, verifies them for near-duplicates
    as usual, and passes those of the rows that are not to :meth:`verify`.
    """

    def __init__(self, parameters: EnsembleParameters, index: BandIndex, sketch_bits: int, hasher: MinHasher):
        self.parameters = parameters
        self.index = index
        self.sketch_bits = sketch_bits
        self.hasher = hasher

    def candidates(
        self, batch: IndexedBatch, lookup: Lookup, within: BatchPairs, first_seq: int
    ) -> tuple[IntArray, npt.NDArray[np.int64]]:
        """``(rows, seqs)``: the pairs of ``lookup`` (stored documents) and of the batch's own rows (``within``,
        from :func:`~stream_dedup.lsh.index.pairs_within_batch`) that count.

        A match found through band ``k`` counts only if the row's plan gives
        the match's size partition more than ``k`` bands: the candidates that
        separate tables per partition, probed as planned, would give, for one
        probe per band. A match under the content key (an exact copy) always
        counts. A pair may come more than once.
        """
        sizes = batch.signed.set_sizes
        if sizes is None:
            raise ValueError("containment is on: the batch must carry its set sizes")
        keys = batch.signed.keys
        content = keys.shape[1] - 1
        partitions = self.parameters.partitions
        plan = self.parameters.probe_bands(sizes)
        stored_sizes = self.index.set_sizes_of(lookup.seqs)
        stored = (lookup.tables == content) | (lookup.tables < plan.bands_at(lookup.rows, partitions.of(stored_sizes)))
        rows, earlier, tables = within.rows, within.earlier_rows, within.tables
        in_batch = (tables == content) | (tables < plan.bands_at(rows, partitions.of(sizes[earlier])))
        return (
            np.concatenate((lookup.rows[stored], rows[in_batch])),
            np.concatenate((lookup.seqs[stored], earlier[in_batch].astype(np.int64) + first_seq)),
        )

    def verify(
        self,
        indexed: IndexedBatch,
        pairs: MeasuredPairs,
        queries: npt.NDArray[np.bool_],
        first_seq: int,
        document_texts: DocumentTexts | None = None,
    ) -> BestContainments:
        """Containment both ways of the pairs of the rows marked in ``queries``, and each such row's best match.

        ``document_texts`` settles the pairs too near the threshold for the estimate (module docstring).
        """
        batch = indexed.signed
        sizes = batch.set_sizes
        if sizes is None:
            raise ValueError("containment is on: the batch must carry its set sizes")
        n = len(batch)
        asked = np.flatnonzero(queries[pairs.rows])
        rows, seqs, estimates = pairs.rows[asked], pairs.seqs[asked], pairs.estimates[asked]
        other_sizes = earlier_values(sizes, self.index.set_sizes_of, seqs, first_seq)
        judged = self.parameters.judged(sizes[rows], other_sizes)
        rows, seqs, estimates, other_sizes = rows[judged], seqs[judged], estimates[judged], other_sizes[judged]
        row_share, other_share, similarity = np.empty(rows.size), np.empty(rows.size), np.empty(rows.size)
        for start in range(0, rows.size, PAIRS_PER_ROUND):
            part = slice(start, start + PAIRS_PER_ROUND)
            row_share[part], other_share[part], similarity[part] = self._containments(
                batch, rows[part], seqs[part], estimates[part], sizes[rows[part]], other_sizes[part], first_seq
            )
        settled = unsettled = 0
        if document_texts is not None and batch.shingles is None:
            shares = (row_share, other_share, similarity)
            settled, unsettled = self._settle_with_texts(
                indexed, rows, seqs, sizes[rows], other_sizes, shares, first_seq, document_texts
            )
        threshold = self.parameters.threshold
        best_seqs = np.full(n, -1, dtype=np.int64)
        contained = np.zeros(n, dtype=bool)
        values, best_similarity = np.zeros(n), np.zeros(n)
        # "contains" first, so that "contained" overwrites it where a row has both.
        for is_contained, share in ((False, other_share), (True, row_share)):
            passed = np.flatnonzero(share >= threshold)
            best = passed[best_of_each_row(rows[passed], seqs[passed], share[passed])]
            best_seqs[rows[best]] = seqs[best]
            contained[rows[best]] = is_contained
            values[rows[best]] = share[best]
            best_similarity[rows[best]] = similarity[best]
        return BestContainments(
            best_seqs, contained, values, best_similarity, int(asked.size), settled_by_text=settled, unsettled=unsettled
        )

    def _settle_with_texts(
        self,
        batch: IndexedBatch,
        rows: IntArray,
        seqs: npt.NDArray[np.int64],
        sizes: npt.NDArray[np.uint32],
        other_sizes: npt.NDArray[np.uint32],
        shares: tuple[FloatArray, FloatArray, FloatArray],
        first_seq: int,
        document_texts: DocumentTexts,
    ) -> tuple[int, int]:
        """Set ``shares`` (both containments and the Jaccard similarity, in place) of the pairs estimated too
        near the threshold to their exact values, from the texts of the two documents where they can be had.

        Returns the numbers of such pairs settled, and left to the estimate for want of a text.
        """
        row_share, other_share, similarity = shares
        threshold, bits = self.parameters.threshold, self.sketch_bits
        a, b = sizes.astype(np.float64), other_sizes.astype(np.float64)
        row_band = AMBIGUITY_ERRORS * containment_standard_errors(threshold, b / a, bits)
        other_band = AMBIGUITY_ERRORS * containment_standard_errors(threshold, a / b, bits)
        near = np.flatnonzero(
            (np.abs(row_share - threshold) <= row_band) | (np.abs(other_share - threshold) <= other_band)
        )
        if not near.size:
            return 0, 0
        earlier = earlier_values(batch.sources, self.index.sources_of, seqs[near], first_seq)
        exact = text_similarity(document_texts, self.hasher, batch.sources[rows[near]], earlier)
        known = np.flatnonzero(~np.isnan(exact))
        settled, jaccard = near[known], exact[known]
        # The sizes are exact, so the exact Jaccard gives the exact intersection (a whole number).
        shared = np.rint(estimated_intersection(jaccard, a[settled], b[settled]))
        row_share[settled] = shared / a[settled]
        other_share[settled] = shared / b[settled]
        similarity[settled] = jaccard
        return int(settled.size), int(near.size - settled.size)

    def _containments(
        self,
        batch: SignedBatch,
        rows: IntArray,
        seqs: npt.NDArray[np.int64],
        jaccard: FloatArray,
        sizes: npt.NDArray[np.uint32],
        other_sizes: npt.NDArray[np.uint32],
        first_seq: int,
    ) -> tuple[FloatArray, FloatArray, FloatArray]:
        """``(c(row in other), c(other in row), Jaccard)`` of pairs: estimated, or counted where they may pass."""
        a, b = sizes.astype(np.float64), other_sizes.astype(np.float64)
        if batch.shingles is None:
            shared = estimated_intersection(jaccard, a, b)
            return shared / a, shared / b, jaccard
        lowest = implied_jaccard(self.parameters.threshold, np.minimum(a, b), np.maximum(a, b))
        margin = _EXACT_MARGIN_ERRORS * np.sqrt((1.0 - lowest**2) / self.sketch_bits)
        plausible = np.flatnonzero(jaccard >= lowest - margin)
        left = batch.shingles.take(rows[plausible])
        right = earlier_shingle_sets(batch.shingles, self.index, seqs[plausible], first_seq)
        counted = shared_counts(left, right).astype(np.float64)
        left_sizes, right_sizes = left.lengths.astype(np.float64), right.lengths.astype(np.float64)
        row_share, other_share, exact = np.zeros(rows.size), np.zeros(rows.size), np.zeros(rows.size)
        row_share[plausible] = counted / left_sizes
        other_share[plausible] = counted / right_sizes
        exact[plausible] = counted / (left_sizes + right_sizes - counted)
        return row_share, other_share, exact


def containment_verdicts(
    verdicts: list[Verdict], batch: IndexedBatch, found: BestContainments, stored: StoredDocuments, first_seq: int
) -> None:
    """Replace the verdicts of rows with a containment match by ``contained`` or ``contains`` verdicts."""
    rows = np.flatnonzero(found.seqs >= 0)
    match_ids, sources = matches_of(batch, found.seqs[rows], stored, first_seq)
    for row, match, source, contained, value, similarity in zip(
        rows.tolist(),
        match_ids,
        optional_sources(sources),
        found.contained[rows].tolist(),
        found.values[rows].tolist(),
        found.similarity[rows].tolist(),
        strict=True,
    ):
        kind: VerdictKind = "contained" if contained else "contains"
        verdicts[row] = Verdict(batch.ids[row], kind, match, round(similarity, 4), source, None, round(value, 4))
