"""Band keys: one 64-bit key per (document, band) from the compact signature.

Keys are computed from the stored 8-bit compact signature (see
``stream_dedup.engine.compact``), not from the full 32-bit one, so that the
index can recompute any stored document's keys from what it keeps (to grow
its tables) without storing the keys themselves. Two unrelated documents
share a band with probability about ``256**-r``, negligible for the
``r >= 3`` that thresholds of 0.5 and above choose.
"""

import numpy as np
import numpy.typing as npt

from stream_dedup.lsh.params import BandParameters
from stream_dedup.text.hashing import POLY_MULTIPLIER, U64, Uint64Array, fmix64, splitmix64

#: Seed of the per-band key salt: part of the index format, never change it.
_BAND_SALT_SEED = 0xBA4D_5EED


def band_keys(compact: npt.NDArray[np.uint8], banding: BandParameters) -> Uint64Array:
    """Keys of every band of every row of ``compact`` ``(n, num_perm)``: ``(n, bands)`` uint64."""
    rows, width = banding.bands, banding.rows_per_band
    slots = compact[:, : rows * width].reshape(compact.shape[0], rows, width)
    keys = np.zeros((compact.shape[0], rows), dtype=U64)
    for column in range(width):
        keys *= U64(POLY_MULTIPLIER)
        keys += slots[:, :, column]
    keys ^= splitmix64(_BAND_SALT_SEED, rows)[None, :]
    return fmix64(keys)
