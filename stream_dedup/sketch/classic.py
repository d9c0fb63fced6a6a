"""The seeds' classic MinHash: ``num_perm`` universal hash functions.

Permutation ``i`` maps a shingle hash ``x`` (its high 32 bits) to
``(a_i * x + b_i) mod p`` with ``p = 2**61 - 1`` and ``a_i, b_i`` uniform
below ``p``, and the signature keeps the minimum over the document's
shingles. The product is reduced exactly with Mersenne arithmetic rather than
left to overflow 64 bits, so this is the textbook 2-universal family. (Small
``a`` would be cheaper but is wrong: ``a*x + b`` then wraps ``p`` only a few
times, every permutation is nearly monotonic in ``x`` and the estimates are
biased upwards.) It costs ``num_perm`` passes per shingle and is kept as the
reference that the faster one-permutation scheme is measured against.
"""

import numpy as np

from stream_dedup.text.hashing import U64, Uint64Array, splitmix64
from stream_dedup.text.shingles import ShingleChunk

MERSENNE_PRIME_61 = U64((1 << 61) - 1)

#: Shingles per vectorised block: bounds the ``(num_perm, block)`` temporary.
_BLOCK_SHINGLES = 1 << 13


_LOW_32 = U64(0xFFFF_FFFF)
_LOW_29 = U64((1 << 29) - 1)


def classic_parameters(num_perm: int, seed: int) -> tuple[Uint64Array, Uint64Array]:
    """Slopes ``a`` (non-zero) and intercepts ``b`` of the hash family, each below ``p``."""
    words = splitmix64(seed, 2 * num_perm) % MERSENNE_PRIME_61
    slopes = np.maximum(words[:num_perm], U64(1))
    intercepts = words[num_perm:]
    return slopes, intercepts


def _mod_p(values: Uint64Array) -> Uint64Array:
    """Reduce values below ``2**64`` modulo ``p = 2**61 - 1`` (``2**61`` is 1 mod ``p``)."""
    values = (values & MERSENNE_PRIME_61) + (values >> U64(61))
    return np.where(values >= MERSENNE_PRIME_61, values - MERSENNE_PRIME_61, values)


def _permute(slopes: Uint64Array, intercepts: Uint64Array, shingles: Uint64Array) -> Uint64Array:
    """``(a * x + b) mod p`` for every slope (rows) and shingle ``x < 2**32`` (columns).

    ``a = hi * 2**29 + lo`` keeps each partial product below 2**64, and a
    value ``t < 2**61`` times ``2**29`` is ``(t mod 2**32) * 2**29 + t // 2**32``
    modulo ``p``.
    """
    high = _mod_p((slopes >> U64(29))[:, None] * shingles[None, :])
    shifted = ((high & _LOW_32) << U64(29)) + (high >> U64(32))
    shifted += (slopes & _LOW_29)[:, None] * shingles[None, :]
    shifted += intercepts[:, None]
    return _mod_p(_mod_p(shifted))


def classic_sketch(chunk: ShingleChunk, slopes: Uint64Array, intercepts: Uint64Array) -> Uint64Array:
    """Minimum of every permutation over each document's shingles: ``(n, num_perm)``."""
    rows = chunk.hashes.shape[0]
    valid = np.arange(chunk.hashes.shape[1]) < chunk.counts[:, None]
    shingles = chunk.hashes[valid] >> U64(32)
    starts = np.concatenate(([0], np.cumsum(chunk.counts)[:-1]))
    sketch = np.empty((rows, slopes.size), dtype=U64)
    # Whole documents per block, so reduceat's segments never straddle a block.
    row = 0
    while row < rows:
        end = row + 1
        while end < rows and starts[end] + chunk.counts[end] - starts[row] <= _BLOCK_SHINGLES:
            end += 1
        block = shingles[starts[row] : starts[end - 1] + chunk.counts[end - 1]]
        permuted = _permute(slopes, intercepts, block)
        sketch[row:end] = np.minimum.reduceat(permuted, starts[row:end] - starts[row], axis=1).T
        row = end
    return sketch
