"""The earlier document of each candidate pair, from the batch or from the index.

A batch is judged before it is stored, and each of its documents is compared
with every earlier one: a pair's earlier document is either stored
(sequence number below the batch's ``first_seq``) or an earlier row of the
batch itself (``first_seq`` onwards). Every per-document value of the
earlier side of a pair (sketch, source, fingerprint, set size, shingle set)
is gathered from one or the other, in the order of the pairs.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stream_dedup.lsh.index import BandIndex
from stream_dedup.text.shingle_sets import ShingleSets

#: Candidate pairs verified per round (their sketches, or shingle sets, are gathered at once).
PAIRS_PER_ROUND = 1 << 14


@dataclass(frozen=True)
class MeasuredPairs:
    """A batch's candidate pairs, each once, measured once for every search that judges them.

    Attributes:
        rows: the batch row of each pair, in order.
        seqs: the earlier document of each pair.
        estimates: the Jaccard estimate of the one-bit sketches.
        similarity: what the near-duplicate search judges: the estimate, or
            with exact verification the exact Jaccard where the estimate
            allows the threshold (-1 elsewhere).
    """

    rows: npt.NDArray[np.intp]
    seqs: npt.NDArray[np.int64]
    estimates: npt.NDArray[np.float64]
    similarity: npt.NDArray[np.float64]

    def take(self, positions: npt.NDArray[np.intp]) -> "MeasuredPairs":
        """The pairs at ``positions``, in that order."""
        return MeasuredPairs(
            self.rows[positions], self.seqs[positions], self.estimates[positions], self.similarity[positions]
        )

    @staticmethod
    def concat(parts: "list[MeasuredPairs]") -> "MeasuredPairs":
        """The pairs of ``parts`` (of distinct rows), in order of row and earlier document as measured ones come."""
        rows = np.concatenate([part.rows for part in parts])
        seqs = np.concatenate([part.seqs for part in parts])
        order = np.lexsort((seqs, rows))
        return MeasuredPairs(
            rows[order],
            seqs[order],
            np.concatenate([part.estimates for part in parts])[order],
            np.concatenate([part.similarity for part in parts])[order],
        )


def earlier_values(
    batch_values: np.ndarray,
    stored_values: Callable[[npt.NDArray[np.int64]], np.ndarray],
    seqs: npt.NDArray[np.int64],
    first_seq: int,
) -> np.ndarray:
    """Rows of ``batch_values`` for the pairs' in-batch documents, of ``stored_values(seqs)`` for the stored ones."""
    in_batch = seqs >= first_seq
    values = np.empty((seqs.size, *batch_values.shape[1:]), dtype=batch_values.dtype)
    values[in_batch] = batch_values[seqs[in_batch] - first_seq]
    values[~in_batch] = stored_values(seqs[~in_batch])
    return values


def earlier_shingle_sets(
    batch_sets: ShingleSets, index: BandIndex, seqs: npt.NDArray[np.int64], first_seq: int
) -> ShingleSets:
    """The shingle sets of the pairs' earlier documents, in the order of ``seqs`` (exact verification)."""
    in_batch = seqs >= first_seq
    earlier = ShingleSets.concat(
        [batch_sets.take((seqs[in_batch] - first_seq).astype(np.intp)), index.shingle_sets_of(seqs[~in_batch])]
    )
    pair_order = np.concatenate((np.flatnonzero(in_batch), np.flatnonzero(~in_batch)))
    return earlier.take(np.argsort(pair_order))


def best_of_each_row(
    rows: npt.NDArray[np.intp], seqs: npt.NDArray[np.int64], scores: npt.NDArray[np.float64]
) -> npt.NDArray[np.intp]:
    """Position of each row's best pair: highest score, then the earliest document; one per row present."""
    order = np.lexsort((seqs, -scores, rows))
    firsts: npt.NDArray[np.intp] = order[np.unique(rows[order], return_index=True)[1]]
    return firsts
