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
MinHash's variance. Densification happens only when a signature is finalised:
until then sketches merge by element-wise minimum.
"""

import numpy as np
import numpy.typing as npt

from stream_dedup.text.hashing import MAX_U64, U64, Uint64Array, fmix64, splitmix64
from stream_dedup.text.shingles import ShingleChunk

#: Marks a bin (or a classic MinHash slot) that has seen no shingle yet.
EMPTY = MAX_U64

#: Most probe-sequence attempts tried per vectorised round of densification
#: (rounds start with 2 and double: the first attempts usually succeed).
_PROBE_BLOCK = 32


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
    least one shingle). Rows are processed together; each round tries the next
    attempts (2, then 4, ... up to ``_PROBE_BLOCK``) of every still-empty bin.
    """
    empty = sketch == EMPTY
    filled = sketch.copy()
    rows, bins = np.nonzero(empty)
    if rows.size == 0:
        return filled
    num_bins = sketch.shape[1]
    bin_key = splitmix64(seed ^ 0x5EED_DE45, 1)[0]
    pending = np.arange(rows.size)
    attempt, block = 0, 2  # most empty bins borrow on the first try or two
    while pending.size:
        attempts = np.arange(attempt, attempt + block, dtype=U64)
        mixed = (bins[pending].astype(U64)[:, None] << U64(32)) | attempts[None, :]
        mixed ^= bin_key
        probes = _bin_of(fmix64(mixed), num_bins).astype(np.intp)
        usable = ~empty[rows[pending][:, None], probes]
        found = usable.any(axis=1)
        choice = usable.argmax(axis=1)
        done = pending[found]
        filled[rows[done], bins[done]] = sketch[rows[done], probes[found, choice[found]]]
        pending = pending[~found]
        attempt += block
        block = min(2 * block, _PROBE_BLOCK)
    return filled


def _bin_of(hashes: Uint64Array, num_bins: int) -> npt.NDArray[np.uint64]:
    """Map hashes to ``[0, num_bins)`` by their high 32 bits (Lemire's fast range)."""
    return ((hashes >> U64(32)) * U64(num_bins)) >> U64(32)
