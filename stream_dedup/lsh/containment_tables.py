"""What the containment search keeps per document: its set size, and its entries under the containment bands.

A generation with containment on holds, beside its Jaccard bands, one more
set of band tables (:class:`ContainmentTables`), under the keys of the
containment banding, and each document's set size, from which its size
partition follows (``lsh.ensemble_params``). Per document that is 4 bytes of
set size, 2 bytes of key half per band (for growing the tables, as in
``lsh.band_table``), and about 8 to 12 bytes of table per band.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stream_dedup.lsh.arena import Arena
from stream_dedup.lsh.band_table import BandTables, KeyArray


@dataclass(frozen=True)
class ContainmentSignature:
    """What signing gives the containment search, row by row.

    Attributes:
        sizes: distinct shingles of each document ``(n,)`` uint32.
        keys: keys of the containment banding's bands ``(n, bands)`` uint32
            (``lsh.band_keys.band_keys``).
    """

    sizes: npt.NDArray[np.uint32]
    keys: KeyArray

    def __len__(self) -> int:
        return int(self.sizes.size)

    def rows(self, start: int, stop: int) -> "ContainmentSignature":
        return ContainmentSignature(self.sizes[start:stop], self.keys[start:stop])

    @classmethod
    def concat(cls, parts: Sequence["ContainmentSignature"]) -> "ContainmentSignature":
        return cls(np.concatenate([p.sizes for p in parts]), np.concatenate([p.keys for p in parts]))


@dataclass(frozen=True)
class ContainmentEntries:
    """A batch's entries for the containment tables: its sizes, keys, and which to enter.

    ``admit[row, band]`` is false where the hot-bucket cap keeps the row out
    of that band's table (it is stored all the same, and found by its other bands).
    """

    sizes: npt.NDArray[np.uint32]
    keys: KeyArray
    admit: npt.NDArray[np.bool_]


class ContainmentTables:
    """Set sizes and containment band tables of one generation's documents (same local numbers)."""

    def __init__(self, bands: int, capacity: int | None = None) -> None:
        self.sizes = Arena((), np.uint32, capacity or 0)
        self.key_highs = Arena((bands,), np.uint16, capacity or 0)
        self.tables = BandTables.for_documents(bands, capacity) if capacity else BandTables(bands)

    def __len__(self) -> int:
        return len(self.sizes)

    @property
    def nbytes(self) -> int:
        return self.sizes.nbytes + self.key_highs.nbytes + self.tables.nbytes

    def add(self, entries: ContainmentEntries) -> None:
        """Store a batch's sizes and enter its keys where admitted (documents numbered on from ``len(self)``)."""
        first_local = len(self)
        self.sizes.extend(entries.sizes)
        self.key_highs.extend((entries.keys >> np.uint32(16)).astype(np.uint16))
        rows, bands = np.nonzero(entries.admit)
        self.tables.insert(bands, entries.keys[rows, bands], rows + first_local, lambda: self.key_highs.values)
