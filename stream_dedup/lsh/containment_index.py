"""Containment candidates: stored documents under a batch's band keys, and earlier rows of the batch.

Like the Jaccard bands (``lsh.index``), the containment tables answer two
questions for a batch: which stored documents sit under each of its keys
(:func:`lookup_keys`), and which earlier rows of the same batch share a band
key with a row (:func:`earlier_rows_sharing_keys`). The engine keeps, of
both, the pairs its probe plan allows (``lsh.ensemble_params``) and
verifies them.

The hot-bucket cap works as for the Jaccard bands, per key and generation:
the lookup counts the documents already under each of a row's keys in the
newest generation, and a row is entered under a key only below
``max_bucket_size``.
"""

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stream_dedup.lsh.band_table import IntArray, KeyArray
from stream_dedup.lsh.containment_tables import ContainmentTables
from stream_dedup.lsh.generation import Generation
from stream_dedup.lsh.index import BandIndex

#: Bits of the row in a packed (band, key, row) entry: batches hold fewer than 2**24 documents.
_ROW_BITS = 24
_ROW_MASK = np.uint64((1 << _ROW_BITS) - 1)


@dataclass(frozen=True)
class KeyLookup:
    """Stored documents found by a list of probes.

    Attributes:
        probes: the probe each match answers.
        seqs: global sequence number of each match.
        newest_counts: documents under each probe in the newest generation.
    """

    probes: IntArray
    seqs: npt.NDArray[np.int64]
    newest_counts: npt.NDArray[np.int64]


def lookup_keys(index: BandIndex, bands: IntArray, keys: KeyArray, everywhere: npt.NDArray[np.bool_]) -> KeyLookup:
    """Stored documents under each probe ``(bands[i], keys[i])`` of the containment tables.

    Every probe looks in the newest generation (where the hot-bucket cap
    counts); only those marked ``everywhere`` look in the older ones too.
    """
    newest = index.generations[-1]
    older = np.flatnonzero(everywhere)
    probes: list[IntArray] = [np.empty(0, np.intp)]
    seqs: list[npt.NDArray[np.int64]] = [np.empty(0, np.int64)]
    newest_counts = np.zeros(bands.size, dtype=np.int64)
    for generation in index.generations:
        asked = np.arange(bands.size) if generation is newest else older
        if asked.size == 0:
            continue
        query, local = _tables_of(generation).tables.lookup(bands[asked], keys[asked])
        probes.append(asked[query])
        seqs.append(local.astype(np.int64) + generation.base_seq)
        if generation is newest:
            newest_counts = np.bincount(asked[query], minlength=bands.size).astype(np.int64)
    return KeyLookup(np.concatenate(probes), np.concatenate(seqs), newest_counts)


def set_sizes_of(index: BandIndex, seqs: npt.NDArray[np.int64]) -> npt.NDArray[np.uint32]:
    """Set sizes of stored documents by sequence number."""
    return index.history.gather(seqs, lambda g: _tables_of(g).sizes.values, (), np.uint32)


def earlier_rows_sharing_keys(
    keys: KeyArray, stored: npt.NDArray[np.bool_], queries: IntArray
) -> tuple[IntArray, IntArray, IntArray]:
    """Pairs of a batch's rows that share a band key, the later one a query, the earlier one stored there.

    ``stored[row, band]`` says whether the row is entered in that band.
    Returns ``(rows, earlier_rows, bands)``: query ``rows[i]`` shares band
    ``bands[i]``'s key with the earlier row ``earlier_rows[i]``.
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


def _tables_of(generation: Generation) -> ContainmentTables:
    if generation.containment is None:
        raise ValueError("this index keeps no containment tables (containment is off)")
    return generation.containment
