"""The banded index's hash tables: one bucketised open-addressing multimap per band.

Memory is the design constraint, so a table is two numpy arrays per band and
no Python object per entry: ``docs`` (uint32, the document's local number
plus one; 0 marks a free slot) and ``fingerprints`` (the low 16 bits of the
32-bit key), both shaped ``(bands, buckets, 8)``. A key's home bucket holds 8 slots
(one cache line of ``docs``): a lookup reads the whole bucket at once and
reports every document whose fingerprint matches, and moves on to the next
bucket only if this one is full, which at the 75% maximum load is rare. So a
lookup is about one vectorised round, where plain linear probing at that
load walks ~8 slots. A rare false fingerprint match is only an extra
candidate, which verification rejects. Tables grow by half, so a band costs
8 to 12 bytes per document.

Keys are not stored whole here: growing asks the owner for the high 16 bits
of its documents' keys, which with the fingerprints in the table make the
keys again. (A key's home bucket depends on all 32 bits.)
"""

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from stream_dedup.text.hashing import U64

BUCKET_SLOTS = 8
_MAX_LOAD = 0.75
_GROWTH = 1.5
#: Initial size: 16,384 documents per band (~100 KB a band) before the first growth.
_MIN_BUCKETS = 2048

IntArray = npt.NDArray[np.intp]
KeyArray = npt.NDArray[np.uint32]
#: Returns the ``(documents, bands)`` high 16 bits of the keys of every stored document.
KeyHighsOf = Callable[[], npt.NDArray[np.uint16]]


class BandTables:
    """One multimap per band from band key to local document numbers."""

    def __init__(self, bands: int, buckets: int = _MIN_BUCKETS) -> None:
        self.docs = np.zeros((bands, buckets, BUCKET_SLOTS), dtype=np.uint32)
        # Keys are odd, so fingerprints are never 0 and 0 marks a free slot. Slots fill left to
        # right and are never freed: a bucket is full when its last slot is used.
        self.fingerprints = np.zeros((bands, buckets, BUCKET_SLOTS), dtype=np.uint16)
        self.entries = np.zeros(bands, dtype=np.int64)

    @classmethod
    def for_documents(cls, bands: int, documents: int) -> "BandTables":
        """Tables sized to hold ``documents`` entries per band without growing."""
        return cls(bands, max(_MIN_BUCKETS, int(documents / _MAX_LOAD) // BUCKET_SLOTS + 1))

    @property
    def buckets(self) -> int:
        return int(self.docs.shape[1])

    @property
    def nbytes(self) -> int:
        return int(self.docs.nbytes + self.fingerprints.nbytes + self.entries.nbytes)

    def lookup(self, bands: IntArray, keys: KeyArray) -> tuple[IntArray, IntArray]:
        """Find stored documents under each query ``(bands[i], keys[i])``.

        Returns ``(query, doc)``: parallel arrays, one element per match, of
        the query's position and the matching local document number.
        """
        buckets = self.buckets
        docs = self.docs.reshape(-1, BUCKET_SLOTS)
        fingerprints = self.fingerprints.reshape(-1, BUCKET_SLOTS)
        bucket = _home_bucket(keys, buckets)
        fingerprint = _fingerprint(keys)
        pending = np.arange(keys.size)
        found_query: list[IntArray] = [np.empty(0, np.intp)]
        found_doc: list[IntArray] = [np.empty(0, np.intp)]
        while pending.size:
            cell = bands[pending] * buckets + bucket[pending]
            # One read of the bucket's 8 fingerprints; documents only where they match.
            stored = fingerprints[cell]
            query, slot = np.nonzero(stored == fingerprint[pending, None])
            found_query.append(pending[query])
            found_doc.append(docs[cell[query], slot].astype(np.intp) - 1)
            # Only a full bucket can have overflowed into the next one.
            pending = pending[stored[:, -1] != 0]
            bucket[pending] = (bucket[pending] + 1) % buckets
        return np.concatenate(found_query), np.concatenate(found_doc)

    def insert(self, bands: IntArray, keys: KeyArray, docs: IntArray, key_highs_of: KeyHighsOf) -> None:
        """Add entries ``(bands[i], keys[i]) -> docs[i]``, growing first if needed."""
        per_band = np.bincount(bands, minlength=self.entries.size)
        largest = int((self.entries + per_band).max())
        capacity = self.buckets * BUCKET_SLOTS
        if largest > _MAX_LOAD * capacity:
            needed = max(largest / _MAX_LOAD, capacity * _GROWTH)
            self._grow(int(needed) // BUCKET_SLOTS + 1, key_highs_of)
        self._place(bands, keys, docs)
        self.entries += per_band

    def _grow(self, buckets: int, key_highs_of: KeyHighsOf) -> None:
        """Rehash every stored entry into tables of ``buckets`` buckets per band."""
        bands, at, slot = np.nonzero(self.fingerprints)
        docs = self.docs[bands, at, slot].astype(np.intp) - 1
        keys = (key_highs_of()[docs, bands].astype(np.uint32) << np.uint32(16)) | self.fingerprints[bands, at, slot]
        shape = (self.docs.shape[0], buckets, BUCKET_SLOTS)
        self.docs = np.zeros(shape, dtype=np.uint32)
        self.fingerprints = np.zeros(shape, dtype=np.uint16)
        self._place(bands, keys, docs, rehash=True)

    def _place(self, bands: IntArray, keys: KeyArray, docs: IntArray, rehash: bool = False) -> None:
        """Insert many entries at once.

        Each round, the entries aimed at one bucket take its free slots;
        those that find none move on to the next bucket. The order of
        documents inside a bucket does not matter: a lookup reports all.

        ``rehash=True`` says the table is empty and the entries come in the
        order of a smaller table's buckets: their new buckets are then nearly
        sorted already (home buckets are monotonic in the key), which a
        stable sort exploits, and no bucket needs reading in the first round.
        """
        buckets = self.buckets
        flat_docs = self.docs.reshape(-1)
        flat_fingerprints = self.fingerprints.reshape(-1)
        fingerprint_rows = self.fingerprints.reshape(-1, BUCKET_SLOTS)
        bucket = _home_bucket(keys, buckets)
        fingerprint = _fingerprint(keys)
        pending = np.arange(keys.size)
        empty = rehash
        while pending.size:
            cell = bands[pending] * buckets + bucket[pending]
            order = np.argsort(cell, kind="stable" if rehash else None)
            pending, cell = pending[order], cell[order]
            positions = np.arange(cell.size)
            new_cell = np.ones(cell.size, dtype=bool)
            new_cell[1:] = cell[1:] != cell[:-1]
            used = 0 if empty else np.count_nonzero(fingerprint_rows[cell], axis=1)
            empty = False
            slot = used + positions - np.maximum.accumulate(np.where(new_cell, positions, 0))
            fits = slot < BUCKET_SLOTS
            target = cell[fits] * BUCKET_SLOTS + slot[fits]
            flat_docs[target] = docs[pending[fits]] + 1
            flat_fingerprints[target] = fingerprint[pending[fits]]
            pending = pending[~fits]
            bucket[pending] = (bucket[pending] + 1) % buckets


def _home_bucket(keys: KeyArray, buckets: int) -> IntArray:
    """Bucket in ``[0, buckets)`` from the 32-bit key (Lemire's fast range)."""
    return ((keys.astype(U64) * U64(buckets)) >> U64(32)).astype(np.intp)


def _fingerprint(keys: KeyArray) -> npt.NDArray[np.uint16]:
    """Low 16 bits of the key, never 0 for the odd keys of ``lsh.band_keys``."""
    return keys.astype(np.uint16)
