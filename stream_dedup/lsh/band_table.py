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

An entry removed (the hot-bucket cap keeps only a key's newest documents,
``lsh.index``) keeps its slot, its fingerprint replaced by
:data:`REMOVED`: even, so no key's fingerprint matches it, and not 0, so
the bucket still counts as full and the entries that overflowed past it are
still found. The next entry placed in that bucket takes the slot; growing
drops such slots. ``entries`` counts the slots in use, removed ones too.
"""

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from stream_dedup.text.hashing import U64

BUCKET_SLOTS = 8
#: The fingerprint of a removed entry's slot (fingerprints of keys are odd).
REMOVED = np.uint16(2)
#: A bucket's eight one-byte flags as one word, the first slot in the lowest byte on any machine.
_LITTLE_ENDIAN_WORD = np.dtype("<u8")
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
    def slots_per_band(self) -> int:
        return self.buckets * BUCKET_SLOTS

    @property
    def nbytes(self) -> int:
        return int(self.docs.nbytes + self.fingerprints.nbytes + self.entries.nbytes)

    def lookup(self, bands: IntArray, keys: KeyArray) -> tuple[IntArray, IntArray]:
        """Find stored documents under each query ``(bands[i], keys[i])``.

        Returns ``(query, doc)``: parallel arrays, one element per match, of
        the query's position and the matching local document number.
        """
        flat_docs = self.docs.reshape(-1)
        fingerprint_rows = self.fingerprints.reshape(-1, BUCKET_SLOTS)
        cell = self._home_cells(bands, keys)
        fingerprint = _fingerprint(keys)
        pending = np.arange(keys.size)
        found_query: list[IntArray] = [np.empty(0, np.intp)]
        found_doc: list[IntArray] = [np.empty(0, np.intp)]
        while pending.size:
            # One read of the bucket's 8 fingerprints (np.take: a fifth of the cost of
            # indexing rows); documents only where they match.
            stored = np.take(fingerprint_rows, cell, axis=0)
            match = np.flatnonzero(stored == fingerprint[:, None])
            if match.size:  # past the home buckets, seldom
                query = match // BUCKET_SLOTS
                found_query.append(pending[query])
                slots = cell[query] * BUCKET_SLOTS + match % BUCKET_SLOTS
                found_doc.append(np.take(flat_docs, slots).astype(np.intp) - 1)
            # Only a full bucket can have overflowed into the next one. (Index arrays, not masks:
            # taking a fifth of the entries three times, np.take is three times faster.)
            going_on = np.flatnonzero(stored[:, -1])
            pending, fingerprint = np.take(pending, going_on), np.take(fingerprint, going_on)
            cell = self._next_cells(np.take(cell, going_on))
        return np.concatenate(found_query), np.concatenate(found_doc)

    def insert(self, bands: IntArray, keys: KeyArray, docs: IntArray, key_highs_of: KeyHighsOf) -> None:
        """Add entries ``(bands[i], keys[i]) -> docs[i]``, growing first if needed.

        A band holds a document at most once: the pairs ``(bands[i], docs[i])`` are distinct.
        """
        per_band = np.bincount(bands, minlength=self.entries.size)
        largest = int((self.entries + per_band).max())
        capacity = self.buckets * BUCKET_SLOTS
        if largest > _MAX_LOAD * capacity:
            needed = max(largest / _MAX_LOAD, capacity * _GROWTH)
            self._grow(int(needed) // BUCKET_SLOTS + 1, key_highs_of)
        reused = self._place(bands, keys, docs)
        self.entries += per_band - reused

    def remove(self, bands: IntArray, keys: KeyArray, docs: IntArray) -> None:
        """Remove the entries ``(bands[i], keys[i]) -> docs[i]`` (each stored once); their slots stay used."""
        flat_docs = self.docs.reshape(-1)
        flat_fingerprints = self.fingerprints.reshape(-1)
        cell = self._home_cells(bands, keys)
        fingerprint = _fingerprint(keys)
        stored_docs = docs.astype(np.uint32) + np.uint32(1)
        while cell.size:
            slots = cell[:, None] * BUCKET_SLOTS + np.arange(BUCKET_SLOTS)
            found = (flat_fingerprints[slots] == fingerprint[:, None]) & (flat_docs[slots] == stored_docs[:, None])
            hit = found.any(axis=1)
            flat_fingerprints[slots[hit, np.argmax(found[hit], axis=1)]] = REMOVED
            # An entry is past its home bucket only if that bucket was full.
            going_on = np.flatnonzero(~hit & (flat_fingerprints[slots[:, -1]] != 0))
            cell = self._next_cells(cell[going_on])
            fingerprint, stored_docs = fingerprint[going_on], stored_docs[going_on]

    def _grow(self, buckets: int, key_highs_of: KeyHighsOf) -> None:
        """Rehash every stored entry into tables of ``buckets`` buckets per band (removed ones are dropped).

        A band at a time: its arrays (a million entries at most a few MB)
        then stay in cache, where the whole tables at once would not.
        """
        old_docs, old_fingerprints = self.docs, self.fingerprints
        shape = (old_docs.shape[0], buckets, BUCKET_SLOTS)
        self.docs = np.zeros(shape, dtype=np.uint32)
        self.fingerprints = np.zeros(shape, dtype=np.uint16)
        highs = key_highs_of()
        for band in range(shape[0]):
            fingerprints = old_fingerprints[band].reshape(-1)
            at = np.flatnonzero(fingerprints & np.uint16(1))  # stored entries: not free, not removed
            self.entries[band] = at.size
            stored_docs = np.take(old_docs[band].reshape(-1), at)
            keys = np.take(highs[:, band], stored_docs - 1).astype(np.uint32) << np.uint32(16)
            keys |= np.take(fingerprints, at)
            _place_rehashed(self.docs[band], self.fingerprints[band], keys, stored_docs)

    def _place(self, bands: IntArray, keys: KeyArray, docs: IntArray) -> npt.NDArray[np.int64]:
        """Insert a batch of entries, each in the first bucket of its probe sequence with a free slot.

        A batch's entries seldom share a bucket, so rather than sorting them
        to find those that do, each round every entry writes its document
        into the first free slot of its bucket and reads it back: of entries
        that aimed at one slot, the one whose write stayed owns it, and the
        others try again. Entries whose bucket is full move to the next one.
        A removed entry's slot is free again (so a key whose oldest entries
        make room for new ones keeps its few buckets); returns how many such
        slots each band took.
        """
        flat_docs = self.docs.reshape(-1)
        flat_fingerprints = self.fingerprints.reshape(-1)
        fingerprint_rows = self.fingerprints.reshape(-1, BUCKET_SLOTS)
        cell = self._home_cells(bands, keys)
        fingerprint = _fingerprint(keys)
        stored_docs = docs.astype(np.uint32) + np.uint32(1)
        reused = np.zeros(self.entries.size, dtype=np.int64)
        while cell.size:
            first = _first_open_slots(np.take(fingerprint_rows, cell, axis=0))
            full = first == BUCKET_SLOTS
            free, blocked = np.flatnonzero(~full), np.flatnonzero(full)
            target = np.take(cell, free) * BUCKET_SLOTS + np.take(first, free)
            writing = np.take(stored_docs, free)
            flat_docs[target] = writing
            owned = np.take(flat_docs, target) == writing
            won = target[owned]
            was_removed = flat_fingerprints[won] == REMOVED
            if was_removed.any():
                reused += np.bincount(won[was_removed] // self.slots_per_band, minlength=reused.size)
            flat_fingerprints[won] = np.take(fingerprint, free[owned])
            # Entries that lost their slot try again in its bucket; those whose bucket was full, in the next.
            lost = free[~owned]
            cell = np.concatenate((np.take(cell, lost), self._next_cells(np.take(cell, blocked))))
            left = np.concatenate((lost, blocked))
            fingerprint, stored_docs = np.take(fingerprint, left), np.take(stored_docs, left)
        return reused

    def _home_cells(self, bands: IntArray, keys: KeyArray) -> IntArray:
        """Row of each entry's home bucket in the tables seen as one ``(bands * buckets, 8)`` array."""
        cell = _home_bucket(keys, self.buckets)
        cell += bands * self.buckets
        return cell

    def _next_cells(self, cells: IntArray) -> IntArray:
        """The bucket after each of ``cells`` in its band, the last wrapping to the band's first."""
        following = cells + 1
        following -= self.buckets * (following % self.buckets == 0)
        return following


def _place_rehashed(
    docs: npt.NDArray[np.uint32],
    fingerprints: npt.NDArray[np.uint16],
    keys: KeyArray,
    stored_docs: npt.NDArray[np.uint32],
) -> None:
    """Insert every entry of one band of a smaller table into that band's empty ``(buckets, 8)`` arrays.

    Unlike a batch, the entries crowd each bucket, so they are sorted by
    bucket and each takes the next slot of its group. They come in the
    order of the smaller table's buckets, so their new buckets are nearly
    sorted already (home buckets are monotonic in the key), which a stable
    sort exploits, and no bucket needs reading in the first round.
    """
    buckets = docs.shape[0]
    flat_docs = docs.reshape(-1)
    flat_fingerprints = fingerprints.reshape(-1)
    bucket = _home_bucket(keys, buckets)
    fingerprint = _fingerprint(keys)
    pending = np.arange(keys.size)
    first_round = True
    while pending.size:
        order = np.argsort(bucket, kind="stable")
        pending, bucket = pending[order], bucket[order]
        positions = np.arange(bucket.size)
        new_bucket = np.ones(bucket.size, dtype=bool)
        new_bucket[1:] = bucket[1:] != bucket[:-1]
        used = 0 if first_round else _used_slots(np.take(fingerprints, bucket, axis=0))
        first_round = False
        slot = used + positions - np.maximum.accumulate(np.where(new_bucket, positions, 0))
        fits = slot < BUCKET_SLOTS
        target = bucket[fits] * BUCKET_SLOTS + slot[fits]
        flat_docs[target] = stored_docs[pending[fits]]
        flat_fingerprints[target] = fingerprint[pending[fits]]
        pending = pending[~fits]
        bucket = bucket[~fits] + 1
        bucket[bucket == buckets] = 0


def _first_open_slots(stored: npt.NDArray[np.uint16]) -> npt.NDArray[np.uint8]:
    """First slot of buckets read as ``(n, 8)`` fingerprints that is free (0) or removed (:data:`REMOVED`),
    ``BUCKET_SLOTS`` if none: stored fingerprints are odd, those two even. A bucket's eight open-flags are
    one 64-bit word (a byte each, read little-endian: the first slot lowest), whose trailing zero bits,
    counted below its lowest set bit, are eight per slot before the first open one."""
    flags = ((stored & np.uint16(1)) == 0).view(_LITTLE_ENDIAN_WORD).reshape(-1).astype(np.uint64)
    lowest = flags & (~flags + np.uint64(1))
    first: npt.NDArray[np.uint8] = np.bitwise_count(lowest - np.uint64(1)) >> np.uint8(3)
    return first


def _used_slots(stored: npt.NDArray[np.uint16]) -> npt.NDArray[np.uint8]:
    """Used slots of buckets read as ``(n, 8)`` fingerprints: a bucket's eight used-flags are one
    64-bit word, whose set bits count them."""
    used: npt.NDArray[np.uint8] = np.bitwise_count((stored != 0).view(np.uint64)).reshape(-1)
    return used


def _home_bucket(keys: KeyArray, buckets: int) -> IntArray:
    """Bucket in ``[0, buckets)`` from the 32-bit key (Lemire's fast range)."""
    return ((keys.astype(U64) * U64(buckets)) >> U64(32)).astype(np.intp)


def _fingerprint(keys: KeyArray) -> npt.NDArray[np.uint16]:
    """Low 16 bits of the key, never 0 for the odd keys of ``lsh.band_keys``."""
    return keys.astype(np.uint16)
