"""Exact copies: a row's earliest copy bounds which of its candidates can still be its best match.

A document copied thousands of times (a page crawled again and again, an ad
reposted) fills its band keys' hot buckets with its own copies, so every new
copy has hundreds of candidates, all copies, each measured and some settled
by text, to end on the one the content key found at once. But the best
match is the highest similarity, then the earliest, and no similarity
exceeds 1: once a candidate ``c`` has similarity 1, no candidate after ``c``
can beat it. So a row whose earliest content-key candidate has its very
sketch (an exact copy, or a near-copy the sketch cannot tell apart) is
measured against its candidates up to that one only (:func:`stored_copy_bounds`,
:func:`batch_copy_bounds`).

That is exact only if the candidate does verify at 1, which the sketch alone
does not prove: a near-copy of a few shingles can hide in an equal sketch
(``text_verification.hiding_pairs``), exact verification counts shingles,
the combined method asks SimHash too. So the caller checks each bounded
row's best match: similarity 1 (:func:`proven`), or the row is measured
again against all its candidates. Measuring fewer pairs changes one other
thing: which rows count as clearly matched, whose ambiguous pairs read no
texts (``text_verification.clearly_matched``). A row clear among all its
pairs but not among the bounded ones has its ambiguous pairs settled by
text; those lie within 4 standard errors of a threshold that 10 of them
keep below 1, so their estimates are below 1, their sketches differ, their
texts too: under 1 either way, they cannot beat the match at 1.
"""

import numpy as np
import numpy.typing as npt

from stream_dedup.engine.detection import BestMatches
from stream_dedup.lsh.generation import SignedBatch
from stream_dedup.lsh.index import BandIndex, BatchPairs

#: A row's bound when no exact copy bounds its candidates.
NO_BOUND = np.iinfo(np.int64).max


def stored_copy_bounds(index: BandIndex, batch: SignedBatch) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
    """Per row, its earliest stored content-key candidate if that one's sketch is the row's, else :data:`NO_BOUND`;
    and which rows that leaves unbounded.

    A row bounded here wants none of its batch's earlier rows: they all come
    after. A row whose content key finds only another sketch (content keys
    are 32-bit: an index of ten million documents holds about one in 400
    rows' keys by chance) is unbounded, and wants them all.
    """
    earliest = index.earliest_content_matches(batch.keys)
    found = np.flatnonzero(earliest >= 0)
    same = found[(index.sketches_of(earliest[found]) == batch.sketches[found]).all(axis=1)]
    bounds = np.full(len(batch), NO_BOUND, dtype=np.int64)
    bounds[same] = earliest[same]
    return bounds, bounds == NO_BOUND


def batch_copy_bounds(
    bounds: npt.NDArray[np.int64],
    unbounded: npt.NDArray[np.bool_],
    batch: SignedBatch,
    within: BatchPairs,
    first_seq: int,
) -> npt.NDArray[np.int64]:
    """``bounds``, and for the ``unbounded`` rows (no stored copy bounds them) their earliest earlier row of
    the batch paired under the content key (``within``: the batch's pairs, as the caller keeps them) if its
    sketch is the row's."""
    content = np.flatnonzero(within.tables == batch.keys.shape[1] - 1)
    earliest = np.full(len(batch), NO_BOUND, dtype=np.int64)
    np.minimum.at(earliest, within.rows[content], within.earlier_rows[content].astype(np.int64))
    found = np.flatnonzero(unbounded & (earliest != NO_BOUND))
    same = found[(batch.sketches[earliest[found]] == batch.sketches[found]).all(axis=1)]
    bounds = bounds.copy()
    bounds[same] = earliest[same] + first_seq
    return bounds


def bounded_pairs(within: BatchPairs, bounds: npt.NDArray[np.int64], first_seq: int) -> BatchPairs:
    """The pairs of ``within`` whose earlier row is numbered at most its row's bound."""
    kept = within.earlier_rows.astype(np.int64) + first_seq <= bounds[within.rows]
    return within._replace(rows=within.rows[kept], earlier_rows=within.earlier_rows[kept], tables=within.tables[kept])


def proven(best: BestMatches, bounds: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Rows whose bound is proven: none, or a best match at similarity 1, which no later candidate can beat."""
    settled: npt.NDArray[np.bool_] = (bounds == NO_BOUND) | ((best.seqs >= 0) & (best.similarity >= 1.0))
    return settled
