"""A generation: the documents indexed during one stretch of the stream.

The index is a list of generations, oldest first; only the newest takes new
documents. Retention evicts whole generations, so forgetting old documents
costs nothing per document and never touches the open-addressing tables
(which cannot delete cheaply). A generation stores, per document, its 8-bit
compact signature and its id (bytes in one arena plus end offsets), and its
band tables (and, for exact verification, its distinct shingles); its
documents are numbered ``0..count-1`` locally and ``base_seq + local`` globally.
"""

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stream_dedup.lsh.arena import Arena
from stream_dedup.lsh.band_keys import band_keys
from stream_dedup.lsh.band_table import BandTables
from stream_dedup.lsh.params import BandParameters
from stream_dedup.text.hashing import Uint64Array
from stream_dedup.text.shingle_sets import ShingleSets


@dataclass(frozen=True)
class IndexedBatch:
    """What the index keeps of a batch of documents, row by row.

    Attributes:
        ids: document ids.
        signatures: compact signatures ``(n, num_perm)`` uint8.
        keys: band keys ``(n, bands)`` uint64.
        event_times: event time of each document, seconds.
        shingles: distinct shingle sets, only when verification is exact.
    """

    ids: list[str]
    signatures: npt.NDArray[np.uint8]
    keys: Uint64Array
    event_times: npt.NDArray[np.float64]
    shingles: ShingleSets | None = None


class Generation:
    """Compact signatures, ids and band tables of a run of consecutive documents."""

    def __init__(
        self,
        num_perm: int,
        banding: BandParameters,
        base_seq: int,
        keep_shingles: bool = False,
        capacity: int | None = None,
    ) -> None:
        """``capacity``, when known (retention sets it), sizes the storage up front so it never grows."""
        self.banding = banding
        self.base_seq = base_seq
        self.signatures = Arena((num_perm,), np.uint8, capacity or 0)
        self.id_bytes = Arena((), np.uint8)
        self.id_ends = Arena((), np.uint64, capacity or 0)
        self.tables = BandTables.for_documents(banding.bands, capacity) if capacity else BandTables(banding.bands)
        self.shingles = ShingleArena() if keep_shingles else None
        self.first_event_time = float("inf")
        self.last_event_time = float("-inf")

    def __len__(self) -> int:
        return len(self.signatures)

    @property
    def nbytes(self) -> int:
        shingles = self.shingles.nbytes if self.shingles is not None else 0
        return self.signatures.nbytes + self.id_bytes.nbytes + self.id_ends.nbytes + self.tables.nbytes + shingles

    def add(self, batch: IndexedBatch, admit: npt.NDArray[np.bool_]) -> None:
        """Store documents and enter them in the bands where ``admit[row, band]`` is true."""
        first_local = len(self)
        self.signatures.extend(batch.signatures)
        encoded = [doc_id.encode("utf-8") for doc_id in batch.ids]
        self.id_bytes.extend(np.frombuffer(b"".join(encoded), dtype=np.uint8))
        _extend_ends(self.id_ends, np.cumsum([len(e) for e in encoded], dtype=np.uint64))
        if self.shingles is not None:
            if batch.shingles is None:
                raise ValueError("this index keeps shingle sets (exact verification): the batch must carry them")
            self.shingles.extend(batch.shingles)
        rows, bands = np.nonzero(admit)
        self.tables.insert(bands, batch.keys[rows, bands], rows + first_local, self.keys_of)
        if batch.event_times.size:
            self.first_event_time = min(self.first_event_time, float(batch.event_times.min()))
            self.last_event_time = max(self.last_event_time, float(batch.event_times.max()))

    def keys_of(self) -> Uint64Array:
        """Band keys of every stored document, recomputed from the compact signatures."""
        return band_keys(self.signatures.values, self.banding)

    def ids_of(self, local: npt.NDArray[np.intp]) -> list[str]:
        """Ids of stored documents by local number, in the order asked."""
        ends = self.id_ends.values
        stops = ends[local].tolist()
        starts = np.where(local > 0, ends[local - 1], 0).tolist()
        data = memoryview(self.id_bytes.values.data)
        return [str(data[a:b], "utf-8") for a, b in zip(starts, stops, strict=True)]


class ShingleArena:
    """The shingle sets of a generation's documents, in document order."""

    def __init__(self) -> None:
        self.values = Arena((), np.uint32)
        self.ends = Arena((), np.int64)

    @property
    def nbytes(self) -> int:
        return self.values.nbytes + self.ends.nbytes

    def extend(self, sets: ShingleSets) -> None:
        self.values.extend(sets.values)
        _extend_ends(self.ends, sets.ends)

    def sets(self) -> ShingleSets:
        return ShingleSets(self.values.values, self.ends.values)


def _extend_ends(arena: Arena, ends: np.ndarray) -> None:
    """Append cumulative end offsets that start from zero, continuing the arena's last end."""
    previous = arena.values[-1] if len(arena) else 0
    arena.extend(ends + previous)
