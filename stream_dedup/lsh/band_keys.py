"""Index keys: one 32-bit key per (document, band), and one for the document's whole content.

**Band keys** hash the full 32-bit MinHash values of a band's
``rows_per_band`` slots, so two documents share a band key exactly when they
agree on every slot of it (probability ``J**r``) or, otherwise, by a 2**-31
accident. They are computed when a document is signed and never from the
stored sketch: a key made of a few bits per slot would collide by chance far
more often (and for short documents, whose slots repeat one value, all at
once).

**The content key** hashes the document's whole one-bit sketch. Exact copies
(after normalisation) have equal sketches and so equal content keys, which
makes an exact copy of any still-indexed document findable whatever the
bands' hot-bucket caps did (see ``lsh.index``).

Keys are odd, so their low 16 bits (the tables' fingerprint) are never 0,
the tables' mark of a free slot.
"""

import numpy as np
import numpy.typing as npt

from stream_dedup.lsh.params import BandParameters
from stream_dedup.text.hashing import POLY_MULTIPLIER, U64, Uint64Array, fmix64, splitmix64

#: Seed of the per-band key salt: part of the index format, never change it.
_BAND_SALT_SEED = 0xBA4D_5EED
#: Salt of the content key, which the tables keep as one more band.
_CONTENT_SALT_SEED = 0xC0_47E47

KeyArray = npt.NDArray[np.uint32]


def index_keys(
    band_signatures: npt.NDArray[np.uint32], sketches: npt.NDArray[np.uint8], banding: BandParameters
) -> KeyArray:
    """Keys of every row: ``(n, bands + 1)`` uint32, the bands' then the content key."""
    keys = np.empty((band_signatures.shape[0], banding.bands + 1), dtype=np.uint32)
    keys[:, :-1] = band_keys(band_signatures, banding)
    keys[:, -1] = content_keys(sketches)
    return keys


def band_keys(band_signatures: npt.NDArray[np.uint32], banding: BandParameters) -> KeyArray:
    """Keys of every band of every row of ``band_signatures`` ``(n, >= bands * rows_per_band)``."""
    rows, width = banding.bands, banding.rows_per_band
    slots = band_signatures[:, : rows * width].reshape(band_signatures.shape[0], rows, width)
    keys = np.zeros((band_signatures.shape[0], rows), dtype=U64)
    for column in range(width):
        keys *= U64(POLY_MULTIPLIER)
        keys += slots[:, :, column]
    keys ^= splitmix64(_BAND_SALT_SEED, rows)[None, :]
    return _odd_32_bits(fmix64(keys))


def content_keys(sketches: npt.NDArray[np.uint8]) -> KeyArray:
    """One key per row of packed sketches ``(n, bytes)``, ``bytes`` a multiple of 8."""
    words = np.ascontiguousarray(sketches).view("<u8").astype(U64)
    keys = np.full(words.shape[0], splitmix64(_CONTENT_SALT_SEED, 1)[0], dtype=U64)
    for column in range(words.shape[1]):
        keys *= U64(POLY_MULTIPLIER)
        keys += fmix64(words[:, column].copy())
    return _odd_32_bits(fmix64(keys))


def content_slots(keys: KeyArray, slots: int) -> npt.NDArray[np.intp]:
    """Each row's slot of ``slots``: the high half of its content key (the keys' last column) mod ``slots``.

    The high half is what the index stores of every key, so a stored
    document's slot is known without its key; exact copies share a slot.
    """
    return ((keys[:, -1] >> np.uint32(16)) % np.uint32(slots)).astype(np.intp)


def stored_slots(highs: npt.NDArray[np.uint16], slots: int) -> npt.NDArray[np.uint32]:
    """The slots of stored documents from the high halves of their content keys (see :func:`content_slots`).

    Taken modulo a 32-bit ``slots``: the highs are 16 bits, and numpy refuses
    the largest setting, 65,536 slots, as a 16-bit operand (``OverflowError``
    in every probe, so every batch of a stage so configured failed).
    """
    return highs % np.uint32(slots)


def _odd_32_bits(mixed: Uint64Array) -> KeyArray:
    return ((mixed >> U64(32)) | U64(1)).astype(np.uint32)
