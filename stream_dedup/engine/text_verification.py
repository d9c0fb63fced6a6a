"""Settling the pairs the sketch cannot judge, near the threshold, with the documents' own texts.

The stored one-bit sketch (``sketch_bits`` bits) estimates a pair's Jaccard
similarity ``J`` with a standard error of ``sqrt((1 - J**2) / sketch_bits)``,
0.019 at ``J = 0.8`` for 1,024 bits: on streams dense near the threshold that
noise alone costs a few points of F1 (docs/benchmarks.md), and a sketch
sharp enough to avoid it would not fit the memory budget. But a pair is
uncertain only while its estimate lies within a few standard errors of the
threshold; further out the estimate's verdict is the exact one but for a
chance under 1e-4 (:data:`AMBIGUITY_ERRORS`). So the default verification
asks the caller for the two texts of just those pairs and judges them by
their exact Jaccard, the same shingle sets exact verification keeps in
memory, here rebuilt from text. The caller keeps or fetches texts by the
records' sources: the offline command spools them to disk
(:mod:`stream_dedup.text.spool`), the Kafka stage fetches input records
again by coordinates. A text it cannot give (a library caller's documents
without sources, a record deleted by retention) leaves that pair to the
estimate, as before.
"""

import functools
import math
from typing import Protocol

import numpy as np
import numpy.typing as npt

from stream_dedup.lsh.generation import NO_SOURCE
from stream_dedup.sketch.minhash import MinHasher
from stream_dedup.text.shingle_sets import ShingleSets, jaccard_of_pairs

#: Standard errors either side of the threshold within which a pair's texts are asked for.
AMBIGUITY_ERRORS = 4.0
#: Standard errors past the ambiguous band beyond which a row's match needs no texts for its other pairs.
CLEAR_ERRORS = 6.0
#: The chance of a near-copy below the threshold hiding in the sketch that :func:`hiding_pairs` accepts.
_HIDING_CHANCE = 1e-9


class DocumentTexts(Protocol):
    """Normalised texts of documents, by the source pointers the index keeps."""

    def texts_of(self, sources: npt.NDArray[np.uint64]) -> list[str | None]:
        """The texts of ``sources`` (distinct), in order; ``None`` for one it cannot give."""


def _standard_error(jaccard: float, sketch_bits: int) -> float:
    """The one-bit sketch's standard error of a Jaccard estimate at ``jaccard`` (module docstring)."""
    return math.sqrt((1.0 - jaccard * jaccard) / sketch_bits)


def ambiguous_pairs(estimates: npt.NDArray[np.float64], threshold: float, sketch_bits: int) -> npt.NDArray[np.intp]:
    """Positions of the estimates that lie within :data:`AMBIGUITY_ERRORS` standard errors of ``threshold``."""
    error = _standard_error(threshold, sketch_bits)
    return np.flatnonzero(np.abs(estimates - threshold) <= AMBIGUITY_ERRORS * error)


def hiding_pairs(
    estimates: npt.NDArray[np.float64],
    filled_bins: npt.NDArray[np.uint16],
    threshold: float,
    sketch_bits: int,
) -> npt.NDArray[np.intp]:
    """Positions of the pairs estimated at or above the threshold while the query's sketch fills few bins.

    ``filled_bins``: the pairs' queries' (``SignedBatch.filled_bins``). A
    shingle one document of a pair lacks is invisible when it lands in a bin
    a shared shingle fills and loses there: a chance of about ``n / (2K)``
    for ``n`` filled of ``K`` bins. A near-copy below the threshold differs
    by at least ``(1 - t) n`` shingles; when all hide, the sketches are
    identical and the estimate says 1, far outside the ambiguous band
    (measured: a 7-character text and the same with a letter added, Jaccard
    0.75, came out identical about once in 300). When only one hides, the
    estimate still rises by about ``1 / n``, past the ambiguous band for a
    few shingles (measured: two 12-character texts of 8 shingles at Jaccard
    0.78, estimated 0.88; of pairs of 5 to 20 shingles within 0.15 below the
    threshold, about 1 in 2,000 was estimated above the band). Under
    :func:`hiding_bound` filled bins (where even a whole near-copy hides with
    a chance above 1e-9) every pair the estimate passes is therefore settled
    by its texts like an ambiguous one; an exact copy then comes out 1 as
    before. Longer documents keep the estimate: one hidden shingle moves it
    by under ``1 / bound``, within the band's reach.
    """
    bound = hiding_bound(threshold, sketch_bits)
    return np.flatnonzero((estimates >= threshold) & (filled_bins < bound))


@functools.cache
def hiding_bound(threshold: float, sketch_bits: int) -> int:
    """Filled bins from which a near-copy below ``threshold`` hides in the sketch with a chance under 1e-9."""
    filled = 1
    while filled < sketch_bits:
        hidden = min(filled / (2 * sketch_bits), 0.5)  # a bin a shared shingle fills, and a loss there
        if hidden ** math.ceil((1.0 - threshold) * filled) < _HIDING_CHANCE:
            return filled
        filled += 1
    return sketch_bits


def clearly_matched(
    estimates: npt.NDArray[np.float64], rows: npt.NDArray[np.intp], n: int, threshold: float, sketch_bits: int
) -> npt.NDArray[np.bool_]:
    """``(n,)``: rows with a pair whose estimate no pair asking for texts can beat (reposts, exact copies).

    An ambiguous pair's estimate lies within :data:`AMBIGUITY_ERRORS`
    standard errors of the threshold. A pair estimated :data:`CLEAR_ERRORS`
    more beyond it is the row's better match unless an ambiguous pair's
    exact Jaccard lies that many above its estimate (a chance under 1e-9),
    so the row's ambiguous pairs need no texts. So wide a margin, because
    an index split over shards cannot do the same: the shard holding the
    ambiguous pair does not see the clear one and settles it, and the
    verdicts must stay those of one index. On a stream of one template's
    reposts that is most of the texts asked for.
    """
    error = _standard_error(threshold, sketch_bits)
    clear = np.zeros(n, dtype=bool)
    clear[rows[estimates > threshold + (AMBIGUITY_ERRORS + CLEAR_ERRORS) * error]] = True
    return clear


def text_similarity(
    texts: DocumentTexts, hasher: MinHasher, left: npt.NDArray[np.uint64], right: npt.NDArray[np.uint64]
) -> npt.NDArray[np.float64]:
    """Exact Jaccard of the documents at sources ``left[i]`` and ``right[i]``; NaN where a text is missing.

    Each distinct source is asked for and shingled once, however many pairs it is in.
    """
    similarity = np.full(left.size, np.nan)
    sources, positions = np.unique(np.concatenate((left, right)), return_inverse=True)
    known = sources != NO_SOURCE
    found = texts.texts_of(sources[known]) if known.any() else []
    text_of = np.full(sources.size, -1, dtype=np.intp)
    present = [i for i, text in enumerate(found) if text]
    present_texts = [text for text in found if text]
    text_of[np.flatnonzero(known)[present]] = np.arange(len(present))
    left_text, right_text = text_of[positions[: left.size]], text_of[positions[left.size :]]
    settled = np.flatnonzero((left_text >= 0) & (right_text >= 0))
    if settled.size:
        sets = ShingleSets.of_texts(present_texts, hasher.shingling, hasher.seed)
        similarity[settled] = jaccard_of_pairs(sets, left_text[settled], right_text[settled])
    return similarity
