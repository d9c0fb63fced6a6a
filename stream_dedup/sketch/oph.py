"""One-permutation hashing (OPH) with densification by shared random offsets.

Classic MinHash hashes every shingle ``num_perm`` times. OPH (Li, Owen and
Zhang, 2012) hashes it once: the 64-bit hash range is cut into ``num_perm``
equal bins, and each bin keeps the smallest hash that falls into it. Each bin
is then a MinHash of the shingles that land there, and two documents agree on
a bin with probability equal to their Jaccard similarity, for a cost of one
pass over the shingles (each goes to its bin) instead of ``num_perm``.

A bin no shingle landed in is empty, and is filled with the value of the
first non-empty bin along a probe sequence that depends only on the bin
number and the seed (Shrivastava and Li's densification; Shrivastava, ICML
2017, makes the sequences random for MinHash's variance). Two documents then
borrow consistently: they agree on a filled bin exactly when the first bin of
its sequence that is non-empty in either document holds a shingle both
share, which happens with probability ``J``, so the estimate stays unbiased.

Here bin ``i`` probes ``i + offsets[0]``, ``i + offsets[1]``, ... (mod the
number of bins), where ``offsets`` is one random permutation of ``1 ..
num_bins - 1`` shared by all bins. Two bins never probe the same bin on the
same attempt, which keeps their fills as independent as random sequences do
(measured: the one-bit estimate's error is slightly *lower* than with a
random permutation per bin), and the fill has three exact, cheap forms:

* a whole-row pass per attempt (shift the non-empty mask by the attempt's
  offset), for the first attempts of rows with many non-empty bins;
* walking the few bins still empty after those passes, one attempt a round;
* for rows with few non-empty bins (short documents in a wide sketch, where
  walking would take about ``num_bins`` attempts per bin): the non-empty bin
  of lowest rank, the rank of bin ``j`` for bin ``i`` being the attempt on
  which ``i`` probes it, ``inverse[(j - i) mod num_bins]``, read from a
  table with one contiguous row per bin ``j``.

Densification happens only when a signature is finalised: until then
sketches merge by element-wise minimum.
"""

import functools
from typing import Any

import numpy as np
import numpy.typing as npt

from stream_dedup.text.hashing import MAX_U64, U64, Uint64Array, fmix64, splitmix64
from stream_dedup.text.shingles import ShingleChunk, grid_run_end

#: Marks a bin (or a classic MinHash slot) that has seen no shingle yet.
EMPTY = MAX_U64

#: Attempts made as whole-row passes before walking the bins still empty one by one.
_ROW_PASSES = 6
#: Rows with fewer than num_bins / this non-empty bins take the lowest-rank fill (measured crossover).
_SPARSE_FRACTION = 4
#: Ranks held at once by the lowest-rank fill (rows x non-empty bins x num_bins; 8 MiB of int16).
_RANK_CELLS = 1 << 22

IntArray = npt.NDArray[np.intp]
#: Flat positions in a sketch array: 32-bit where they fit (see ``densify``), else ``intp``.
PositionArray = npt.NDArray[np.signedinteger[Any]]
#: The attempt on which each bin finds its source (below num_bins <= 4,096).
AttemptArray = npt.NDArray[np.int16]


def oph_sketch(chunk: ShingleChunk, num_bins: int) -> Uint64Array:
    """Per-bin minimum shingle hash of every document of ``chunk``: ``(n, num_bins)``.

    Bins are ranges of the hash's high 32 bits (``bin = hi * num_bins >> 32``).
    Every cell of the chunk's grid goes to its bin by one unbuffered
    ``np.minimum.at``, about eight times cheaper than sorting each row. The
    padding after a row's shingles is ``MAX_U64``, which is ``EMPTY`` and so
    changes no minimum: the grid needs no mask.
    """
    rows = chunk.hashes.shape[0]
    cells = _bin_of(chunk.hashes, num_bins)
    cells += np.arange(0, rows * num_bins, num_bins, dtype=U64)[:, None]
    sketch = np.full(rows * num_bins, EMPTY, dtype=U64)
    np.minimum.at(sketch, cells.view(np.intp).reshape(-1), chunk.hashes.reshape(-1))
    return sketch.reshape(rows, num_bins)


def densify(sketch: Uint64Array, seed: int) -> Uint64Array:
    """Return a copy of ``sketch`` with every empty bin filled from its first non-empty probe.

    Every row must have at least one non-empty bin (every document has at
    least one shingle). Rows with fewer than ``num_bins / 4`` non-empty bins
    take the lowest-rank fill, the others row passes then walking; all give
    the same result: for each empty bin, the attempt on which it finds its
    source, from which one gather fills the empty bins.
    """
    empty = sketch == EMPTY
    if not empty.any():
        return sketch.copy()
    rows, num_bins = sketch.shape
    offsets, _ = probe_offsets(num_bins, seed)
    attempts = np.zeros((rows, num_bins), dtype=np.int16)
    full_bins = num_bins - np.count_nonzero(empty, axis=1)
    sparse = full_bins < num_bins // _SPARSE_FRACTION
    if sparse.any():
        _attempts_by_rank(attempts, empty, np.flatnonzero(sparse), rank_table(num_bins, seed))
    _attempts_by_probing(attempts, empty, np.flatnonzero(~sparse), offsets)
    # Only the empty bins move: bin i of a row takes bin (i + offsets[attempt]) mod num_bins. Their flat
    # positions are in 32 bits where they fit: the arithmetic on them is most of the cost (a third of it in 32).
    position: type[np.signedinteger[Any]] = np.int32 if sketch.size <= np.iinfo(np.int32).max else np.intp
    at = np.flatnonzero(empty).astype(position)
    column = _column_of(at, num_bins)
    source = offsets.astype(position)[attempts.reshape(-1)[at]]
    source += column
    np.subtract(source, num_bins, out=source, where=source >= num_bins)  # past the row's end: from its start
    source += at - column
    filled = sketch.copy()
    cells = filled.reshape(-1)
    cells[at] = cells[source]  # every source is a non-empty bin: none is one of the bins filled here
    return filled


def _attempts_by_probing(
    attempts: AttemptArray, empty: npt.NDArray[np.bool_], rows: IntArray, offsets: IntArray
) -> None:
    """Attempts of the empty bins of ``rows``: ``_ROW_PASSES`` whole-row passes, then one bin at a time."""
    if rows.size == 0:
        return
    num_bins = empty.shape[1]
    every_row = rows.size == empty.shape[0]
    source = empty if every_row else empty[rows]
    pending = source.copy()
    passes = np.zeros(pending.shape, dtype=np.uint8)  # bytes, so that counting adds without a cast
    attempt = 0
    while attempt < min(_ROW_PASSES, num_bins - 1) and pending.any():
        # Still pending: the bin this attempt probes, i + offset (mod num_bins), is empty too.
        offset = int(offsets[attempt])
        pending[:, : num_bins - offset] &= source[:, offset:]
        pending[:, num_bins - offset :] &= source[:, :offset]
        passes += pending.view(np.uint8)  # a bin found on attempt a was still pending after a passes
        attempt += 1
    counted = attempts if every_row else np.empty(pending.shape, dtype=attempts.dtype)
    counted[...] = passes
    # A 2-D np.nonzero costs ten times a flat one.
    at_row, at_bin = np.divmod(np.flatnonzero(pending), num_bins)
    while at_row.size:
        hit = ~source[at_row, (at_bin + offsets[attempt]) % num_bins]
        counted[at_row[hit], at_bin[hit]] = attempt
        at_row, at_bin = at_row[~hit], at_bin[~hit]
        attempt += 1
    if not every_row:
        attempts[rows] = counted


def _attempts_by_rank(
    attempts: AttemptArray, empty: npt.NDArray[np.bool_], rows: IntArray, ranks: AttemptArray
) -> None:
    """Attempts of the bins of ``rows``: the lowest rank among their non-empty bins.

    ``ranks`` is :func:`rank_table`: one contiguous row per non-empty bin, so a
    document with ``m`` non-empty bins costs ``m`` row reads and a minimum.
    Rows are taken in order of ``m`` and padded to a common width by
    repeating their first non-empty bin, which changes no minimum.
    """
    if rows.size == 0:
        return
    full = ~empty[rows]
    counts = np.count_nonzero(full, axis=1)
    order = np.argsort(counts, kind="stable")
    # Flat positions: a 2-D np.nonzero costs ten times a flat one.
    row_of, column = np.divmod(np.flatnonzero(full[order]), full.shape[1])
    sorted_counts = counts[order]
    starts = np.cumsum(sorted_counts) - sorted_counts
    width = int(sorted_counts[-1])
    candidates = np.repeat(column[starts][:, None], width, axis=1)
    candidates.reshape(-1)[row_of * width + np.arange(row_of.size) - starts[row_of]] = column
    # Rows are in order of width, so the widest of a round is the last it takes.
    cells = sorted_counts * ranks.shape[1]
    start = 0
    while start < rows.size:
        stop = grid_run_end(cells, start, _RANK_CELLS)
        widest = int(sorted_counts[stop - 1])
        attempts[rows[order[start:stop]]] = ranks[candidates[start:stop, :widest]].min(axis=1)
        start = stop


@functools.cache
def probe_offsets(num_bins: int, seed: int) -> tuple[IntArray, IntArray]:
    """The offsets every bin probes in turn (a random permutation of ``1 .. num_bins - 1``), and their ranks.

    ``inverse[d]`` is the attempt on which a bin probes the bin ``d`` after
    it (``inverse[0]`` is 0: a bin never probes itself, and only empty bins
    probe). Derived from ``seed`` alone.
    """
    key = splitmix64(seed ^ 0x5EED_DE45, 1)[0]
    offsets = 1 + np.argsort(fmix64(np.arange(1, num_bins, dtype=U64) ^ key))
    inverse = np.zeros(num_bins, dtype=np.intp)
    inverse[offsets] = np.arange(num_bins - 1)
    offsets.flags.writeable = False
    inverse.flags.writeable = False
    return offsets, inverse


@functools.cache
def rank_table(num_bins: int, seed: int) -> AttemptArray:
    """``ranks[j, i]``: the attempt on which bin ``i`` probes bin ``j`` (2 MiB at 1,024 bins)."""
    _, inverse = probe_offsets(num_bins, seed)
    bins = np.arange(num_bins)
    ranks: AttemptArray = inverse[(bins[:, None] - bins[None, :]) % num_bins].astype(np.int16)
    ranks.flags.writeable = False
    return ranks


def _column_of(flat: PositionArray, num_bins: int) -> PositionArray:
    """Column of each flat position of a ``(rows, num_bins)`` array: a mask for a power of two, else a modulo."""
    if num_bins & (num_bins - 1) == 0:
        return flat & (num_bins - 1)
    return flat % num_bins


def _bin_of(hashes: Uint64Array, num_bins: int) -> Uint64Array:
    """Map hashes to ``[0, num_bins)`` by their high 32 bits (Lemire's fast range).

    For a power of two ``2**m`` that is exactly the top ``m`` bits, one shift.
    """
    if num_bins & (num_bins - 1) == 0:
        return hashes >> U64(64 - num_bins.bit_length() + 1)
    return ((hashes >> U64(32)) * U64(num_bins)) >> U64(32)
