"""A generation: the documents indexed during one stretch of the stream.

The index is a list of generations, oldest first; only the newest takes new
documents. Retention evicts whole generations, so forgetting old documents
costs nothing per document and never touches the open-addressing tables
(which cannot delete cheaply). A generation stores, per document, its one-bit
sketch, the high halves of its index keys (for growing the tables), its
source and its id (bytes in one arena plus end offsets), and its band tables
(and, for exact verification, its distinct shingles; for the combined
method, its SimHash fingerprint; with containment on, its set size); its
documents are
numbered ``0..count-1`` locally and ``base_seq + local`` globally.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stream_dedup.lsh.arena import Arena, IdArena
from stream_dedup.lsh.band_keys import KeyArray
from stream_dedup.lsh.band_table import BandTables
from stream_dedup.lsh.retention import time_span
from stream_dedup.text.shingle_sets import ShingleSets

#: ``sources`` value of a document whose record cannot be pointed at.
NO_SOURCE = np.uint64(0xFFFF_FFFF_FFFF_FFFF)


@dataclass(frozen=True)
class SignedBatch:
    """What signing a batch of documents yields: all the index needs of their content.

    Each part is present only when the method uses it; a SimHash-only
    batch has sketches and keys of width 0.

    Attributes:
        sketches: packed one-bit sketches ``(n, sketch_bits / 8)`` uint8.
        keys: index keys ``(n, bands + 1)`` uint32 (bands, then content).
        shingles: distinct shingle sets, only when verification is exact.
        fingerprints: 64-bit SimHash fingerprints ``(n,)``, only for the
            ``simhash`` and ``combined`` methods.
        set_sizes: distinct shingles of each document ``(n,)`` uint32, only
            with containment on.
        filled_bins: bins of each document's sketch that a shingle filled,
            ``(n,)`` uint16 (its distinct shingles while they are few beside
            the bins): which sketches can hide a near-copy (``text_verification``).
            Not indexed; None in records of releases before it.
    """

    sketches: npt.NDArray[np.uint8]
    keys: KeyArray
    shingles: ShingleSets | None = None
    fingerprints: npt.NDArray[np.uint64] | None = None
    set_sizes: npt.NDArray[np.uint32] | None = None
    filled_bins: npt.NDArray[np.uint16] | None = None

    def __len__(self) -> int:
        return int(self.sketches.shape[0])

    def rows(self, start: int, stop: int) -> "SignedBatch":
        """Rows ``start:stop`` of every part."""
        return self.take(np.arange(start, stop))

    def take(self, rows: npt.NDArray[np.intp]) -> "SignedBatch":
        """The given rows of every part, in the order given."""
        return SignedBatch(
            self.sketches[rows],
            self.keys[rows],
            self.shingles.take(rows) if self.shingles is not None else None,
            self.fingerprints[rows] if self.fingerprints is not None else None,
            self.set_sizes[rows] if self.set_sizes is not None else None,
            self.filled_bins[rows] if self.filled_bins is not None else None,
        )

    @classmethod
    def concat(cls, parts: Sequence["SignedBatch"]) -> "SignedBatch":
        """The batches one after the other (all signed under the same settings)."""
        shingles = [p.shingles for p in parts if p.shingles is not None]
        fingerprints = [p.fingerprints for p in parts if p.fingerprints is not None]
        set_sizes = [p.set_sizes for p in parts if p.set_sizes is not None]
        # Every part or none: rows of parts without them (records of older releases) would be misplaced.
        filled = [p.filled_bins for p in parts if p.filled_bins is not None]
        return cls(
            np.concatenate([p.sketches for p in parts]),
            np.concatenate([p.keys for p in parts]),
            ShingleSets.concat(shingles) if shingles else None,
            np.concatenate(fingerprints) if fingerprints else None,
            np.concatenate(set_sizes) if set_sizes else None,
            np.concatenate(filled) if len(filled) == len(parts) else None,
        )


@dataclass(frozen=True)
class IndexedBatch:
    """What the index keeps of a batch of documents, row by row.

    Attributes:
        ids: document ids.
        signed: sketches, keys and shingle sets.
        event_times: event time of each document, seconds.
        sources: an opaque 64-bit pointer to each document's record, chosen by
            the caller (the Kafka stage packs partition and offset, the
            offline command the line number) and returned with a match, so
            that a match can be fetched even when ids repeat; ``NO_SOURCE``
            for none.
    """

    ids: list[str]
    signed: SignedBatch
    event_times: npt.NDArray[np.float64]
    sources: npt.NDArray[np.uint64]

    def take(self, rows: npt.NDArray[np.intp]) -> "IndexedBatch":
        """The given rows, in the order given (a shard's own documents of a batch)."""
        return IndexedBatch(
            [self.ids[row] for row in rows.tolist()], self.signed.take(rows), self.event_times[rows], self.sources[rows]
        )


class Generation:
    """Sketches, keys, sources, ids and band tables of a run of consecutive documents."""

    def __init__(
        self,
        sketch_bytes: int,
        tables: int,
        base_seq: int,
        keep_shingles: bool = False,
        capacity: int | None = None,
        keep_fingerprints: bool = False,
        keep_set_sizes: bool = False,
    ) -> None:
        """A generation of ``tables`` band tables (bands and the content key).

        ``capacity``, when known (retention sets it), sizes the storage up front so it never grows.
        """
        self.base_seq = base_seq
        self.sketches = Arena((sketch_bytes,), np.uint8, capacity or 0)
        self.key_highs = Arena((tables,), np.uint16, capacity or 0)
        self.sources = Arena((), np.uint64, capacity or 0)
        self.ids = IdArena(capacity or 0)
        self.tables = BandTables.for_documents(tables, capacity) if capacity else BandTables(tables)
        self.shingles = ShingleArena() if keep_shingles else None
        self.fingerprints = Arena((), np.uint64, capacity or 0) if keep_fingerprints else None
        self.set_sizes = Arena((), np.uint32, capacity or 0) if keep_set_sizes else None
        self.first_event_time = float("inf")
        self.last_event_time = float("-inf")

    def __len__(self) -> int:
        return len(self.sketches)

    @property
    def ids_full(self) -> bool:
        return self.ids.full

    @property
    def nbytes(self) -> int:
        arenas = (self.sketches, self.key_highs, self.sources, self.ids)
        shingles = self.shingles.nbytes if self.shingles is not None else 0
        fingerprints = self.fingerprints.nbytes if self.fingerprints is not None else 0
        set_sizes = self.set_sizes.nbytes if self.set_sizes is not None else 0
        return sum(a.nbytes for a in arenas) + self.tables.nbytes + shingles + fingerprints + set_sizes

    def add(self, batch: IndexedBatch, admit: npt.NDArray[np.bool_], times: npt.NDArray[np.float64]) -> None:
        """Store documents and enter them in the tables where ``admit[row, table]`` is true.

        ``times`` are the batch's event times as retention counts them (``GenerationList.stream_times``).
        """
        first_local = len(self)
        signed = batch.signed
        self.sketches.extend(signed.sketches)
        self.key_highs.extend((signed.keys >> np.uint32(16)).astype(np.uint16))
        self.sources.extend(batch.sources)
        self.ids.extend(batch.ids)
        if self.shingles is not None:
            if signed.shingles is None:
                raise ValueError("this index keeps shingle sets (exact verification): the batch must carry them")
            self.shingles.extend(signed.shingles)
        if self.fingerprints is not None:
            if signed.fingerprints is None:
                raise ValueError("this index keeps SimHash fingerprints (method combined): the batch must carry them")
            self.fingerprints.extend(signed.fingerprints)
        if self.set_sizes is not None:
            if signed.set_sizes is None:
                raise ValueError("this index keeps set sizes (containment on): the batch must carry them")
            self.set_sizes.extend(signed.set_sizes)
        entries = np.flatnonzero(admit)  # a 2-D np.nonzero costs ten times a flat one
        rows, tables = np.divmod(entries, admit.shape[1])
        self.tables.insert(tables, signed.keys.reshape(-1)[entries], rows + first_local, lambda: self.key_highs.values)
        self.first_event_time, self.last_event_time = time_span(self.first_event_time, self.last_event_time, times)

    def ids_of(self, local: npt.NDArray[np.intp]) -> list[str]:
        """Ids of stored documents by local number, in the order asked."""
        return self.ids.ids_of(local)


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
        self.ends.extend_ends(sets.ends)

    def sets(self) -> ShingleSets:
        return ShingleSets(self.values.values, self.ends.values)
