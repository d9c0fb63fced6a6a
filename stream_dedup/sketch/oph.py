"""One-permutation hashing (OPH) with optimal densification.

Classic MinHash hashes every shingle ``num_perm`` times. OPH (Li, Owen and
Zhang, 2012) hashes it once: the 64-bit hash range is cut into ``num_perm``
equal bins, and each bin keeps the smallest hash that falls into it. Each bin
is then a MinHash of the shingles that land there, and two documents agree on
a bin with probability equal to their Jaccard similarity, for a cost of one
sort per document instead of ``num_perm`` passes.

A bin no shingle landed in is empty. Optimal densification (Shrivastava,
ICML 2017) fills it with the value of the first non-empty bin along a
pseudo-random probe sequence that depends only on the bin number and the
seed, so that two documents borrow consistently and the estimate keeps
MinHash's variance. Here each bin's probe sequence is a random permutation
of all bins, so "the first non-empty bin along bin i's sequence" is also
"the non-empty bin of lowest rank in bin i's permutation", and the fill has
two exact implementations: walking the sequence, cheap when most bins are
full (a few steps), and taking the lowest rank among the non-empty bins,
cheap when few are (a short document in a wide sketch, where walking would
take about ``num_bins`` steps per empty bin). Each row takes the cheaper.
Densification happens only when a signature is finalised: until then
sketches merge by element-wise minimum.
"""

import functools
import math

import numpy as np
import numpy.typing as npt

from stream_dedup.text.hashing import MAX_U64, U64, Uint64Array, fmix64, splitmix64
from stream_dedup.text.shingles import ShingleChunk

#: Marks a bin (or a classic MinHash slot) that has seen no shingle yet.
EMPTY = MAX_U64

#: Most probe-sequence attempts tried per vectorised round of densification
#: (rounds start with 2 and double: the first attempts usually succeed).
_PROBE_BLOCK = 32
#: Rows per round of the lowest-rank fill, which holds (empty bins x non-empty bins) ranks.
_RANK_ROWS = 256

IntArray = npt.NDArray[np.intp]


def oph_sketch(chunk: ShingleChunk, num_bins: int) -> Uint64Array:
    """Per-bin minimum shingle hash of every document of ``chunk``: ``(n, num_bins)``.

    Bins are ranges of the hash's high 32 bits (``bin = hi * num_bins >> 32``),
    which is monotonic in the hash, so after sorting a row the first entry of
    each bin is that bin's minimum.
    """
    hashes = np.sort(chunk.hashes, axis=1)
    bins = _bin_of(hashes, num_bins)
    first = np.empty(hashes.shape, dtype=bool)
    first[:, 0] = True
    np.not_equal(bins[:, 1:], bins[:, :-1], out=first[:, 1:])
    first &= np.arange(hashes.shape[1]) < chunk.counts[:, None]
    rows, cols = np.nonzero(first)
    sketch = np.full((hashes.shape[0], num_bins), EMPTY, dtype=U64)
    sketch[rows, bins[rows, cols].astype(np.intp)] = hashes[rows, cols]
    return sketch


def densify(sketch: Uint64Array, seed: int) -> Uint64Array:
    """Return a copy of ``sketch`` with every empty bin filled by optimal densification.

    Every row must have at least one non-empty bin (every document has at
    least one shingle). Rows with fewer than ``sqrt(num_bins)`` non-empty
    bins take the lowest-rank fill, the others walk their probe sequences;
    both give the same result.
    """
    empty = sketch == EMPTY
    filled = sketch.copy()
    if not empty.any():
        return filled
    num_bins = sketch.shape[1]
    full_bins = num_bins - np.count_nonzero(empty, axis=1)
    sparse = full_bins < math.isqrt(num_bins)
    _fill_by_rank(filled, empty, np.flatnonzero(sparse), seed)
    _fill_by_walking(filled, empty, np.flatnonzero(~sparse), seed)
    return filled


def _fill_by_walking(filled: Uint64Array, empty: npt.NDArray[np.bool_], rows: IntArray, seed: int) -> None:
    """Fill the empty bins of ``rows`` from the first non-empty bin of each one's probe sequence.

    All rows are processed together; each round tries the next attempts (2,
    then 4, ... up to ``_PROBE_BLOCK``) of every still-empty bin.
    """
    row_of, bins = np.nonzero(empty[rows])
    row_of = rows[row_of]
    orders, _ = probe_orders(filled.shape[1], seed)
    pending = np.arange(row_of.size)
    attempt, block = 0, 2  # most empty bins borrow on the first try or two
    while pending.size:
        probes = orders[bins[pending], attempt : attempt + block].astype(np.intp)
        usable = ~empty[row_of[pending][:, None], probes]
        found = usable.any(axis=1)
        choice = usable.argmax(axis=1)
        done = pending[found]
        filled[row_of[done], bins[done]] = filled[row_of[done], probes[found, choice[found]]]
        pending = pending[~found]
        attempt += block
        block = min(2 * block, _PROBE_BLOCK)


def _fill_by_rank(filled: Uint64Array, empty: npt.NDArray[np.bool_], rows: IntArray, seed: int) -> None:
    """Fill the empty bins of ``rows`` from their non-empty bin of lowest rank in each one's probe order.

    A row's non-empty bins are padded to a common width with a sentinel bin
    whose rank is above every real one.
    """
    if rows.size == 0:
        return
    num_bins = filled.shape[1]
    _, ranks = probe_orders(num_bins, seed)
    full = ~empty[rows]
    width = int(full.sum(axis=1).max())
    candidates = np.full((rows.size, width), num_bins, dtype=np.intp)  # the sentinel column
    row_of, column = np.nonzero(full)
    slot = np.arange(row_of.size) - np.searchsorted(row_of, row_of)
    candidates[row_of, slot] = column
    for start in range(0, rows.size, _RANK_ROWS):
        part = slice(start, start + _RANK_ROWS)
        local, bins = np.nonzero(~full[part])
        options = candidates[part][local]  # (empty bins, width)
        best = options[np.arange(local.size), ranks[bins[:, None], options].argmin(axis=1)]
        target = rows[part][local]
        filled[target, bins] = filled[target, best]


@functools.cache
def probe_orders(num_bins: int, seed: int) -> tuple[npt.NDArray[np.int16], npt.NDArray[np.int16]]:
    """Every bin's probe sequence (a random permutation of all bins) and its inverse, the ranks.

    ``orders[i, a]`` is the bin bin ``i`` looks at on attempt ``a``;
    ``ranks[i, j]`` is the attempt on which bin ``i`` looks at bin ``j``, with
    one extra column ``ranks[i, num_bins]`` above all (a padding sentinel).
    Derived from ``seed`` alone; built once per process (4 MiB at 1,024 bins).
    """
    bin_key = splitmix64(seed ^ 0x5EED_DE45, 1)[0]
    pairs = (np.arange(num_bins, dtype=U64)[:, None] << U64(32)) | np.arange(num_bins, dtype=U64)[None, :]
    orders = np.argsort(fmix64(pairs ^ bin_key), axis=1).astype(np.int16)
    ranks = np.full((num_bins, num_bins + 1), num_bins, dtype=np.int16)
    np.put_along_axis(ranks, orders.astype(np.intp), np.arange(num_bins, dtype=np.int16)[None, :], axis=1)
    orders.flags.writeable = False
    ranks.flags.writeable = False
    return orders, ranks


def _bin_of(hashes: Uint64Array, num_bins: int) -> npt.NDArray[np.uint64]:
    """Map hashes to ``[0, num_bins)`` by their high 32 bits (Lemire's fast range)."""
    return ((hashes >> U64(32)) * U64(num_bins)) >> U64(32)
