"""Pairs of rows of one batch that share a key, with the table they share it in.

The banded index finds a batch's candidates among the stored documents
(``BandIndex.lookup``, which says in which table each was found) and among
the batch's own earlier rows. :func:`~stream_dedup.lsh.index.pairs_within_batch`
gives the latter for the Jaccard search; the containment search also needs
the table of each pair, because whether a match counts depends on the band
it was found through (``lsh.ensemble_params``), and only for some rows.
"""

import numpy as np
import numpy.typing as npt

from stream_dedup.lsh.band_table import IntArray, KeyArray

#: Bits of the row in a packed (band, key, row) entry: batches hold fewer than 2**24 documents.
_ROW_BITS = 24
_ROW_MASK = np.uint64((1 << _ROW_BITS) - 1)


def earlier_rows_sharing_keys(
    keys: KeyArray, stored: npt.NDArray[np.bool_], queries: IntArray
) -> tuple[IntArray, IntArray, IntArray]:
    """Pairs of a batch's rows that share a key, the later one a query, the earlier one entered under it.

    ``stored[row, table]`` says whether the row is entered in that table (the
    hot-bucket cap may keep it out). Returns ``(rows, earlier_rows, tables)``:
    query ``rows[i]`` shares table ``tables[i]``'s key with the earlier row
    ``earlier_rows[i]``.
    """
    n, width = keys.shape
    if n >= 1 << _ROW_BITS:
        raise ValueError(f"a batch of {n} documents is too large for the containment search (at most 2**24 - 1)")
    rows = np.repeat(np.arange(n), width)
    cells = np.sort(_packed(keys, rows, np.tile(np.arange(width), n)) | rows.astype(np.uint64))
    # Only (band, key) groups of two rows or more can pair: usually a small part of the batch.
    group = cells >> np.uint64(_ROW_BITS)
    repeated = np.zeros(cells.size, dtype=bool)
    repeated[1:] = group[1:] == group[:-1]
    repeated[:-1] |= repeated[1:]
    cells = cells[repeated]
    cell_rows = (cells & _ROW_MASK).astype(np.intp)
    cell_bands = (cells >> np.uint64(_ROW_BITS + 32)).astype(np.intp)
    entries = cells[stored[cell_rows, cell_bands]]
    asking = np.zeros(n, dtype=bool)
    asking[queries] = True
    probes = cells[asking[cell_rows]]
    # Entries of one (band, key) are in row order: those below the query's own row are its earlier ones.
    starts = np.searchsorted(entries, probes & ~_ROW_MASK)
    counts = np.searchsorted(entries, probes) - starts
    owner = np.repeat(np.arange(probes.size), counts)
    at = np.arange(owner.size) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(starts, counts)
    probe_rows = (probes & _ROW_MASK).astype(np.intp)
    probe_bands = (probes >> np.uint64(_ROW_BITS + 32)).astype(np.intp)
    return probe_rows[owner], (entries[at] & _ROW_MASK).astype(np.intp), probe_bands[owner]


def _packed(keys: KeyArray, rows: IntArray, bands: IntArray) -> npt.NDArray[np.uint64]:
    """``(band, key)`` of each entry in the high bits, room for the row in the low ``_ROW_BITS``."""
    band_key = (bands.astype(np.uint64) << np.uint64(32)) | keys[rows, bands].astype(np.uint64)
    return band_key << np.uint64(_ROW_BITS)
