"""The banded LSH index: probe for candidates, then insert, over generations.

Every document is compared with every earlier indexed document. The index
answers two questions for a batch of band keys: which stored documents share
a band with each row (:meth:`BandIndex.lookup`), and which earlier rows of the
same batch do (:func:`pairs_within_batch`); the engine verifies both and then
inserts the batch.

**Hot buckets.** A band key shared by very many documents (boilerplate, a
template, a thousand exact copies) would make every probe walk all of them.
At most ``max_bucket_size`` documents are entered under one key of one band
per generation; later ones are not entered in that band. Such skips are
counted in :attr:`BandIndex.hot_bucket_skips`. A skipped document stays in
its other bands, where its near-copies still find it. But a document whose
every band key is already full (a template's thousandth variant, each of
its keys shared by ``max_bucket_size`` earlier variants) is entered in no
band, and a later near-copy of it that is not an exact copy cannot find it:
the earliest documents under those keys are found instead, and they need
not be near-copies of it. That is the price of probes that stay bounded
however common a band value is; ``docs/how-it-works.md`` says how to see
and avoid it. With ``slots`` > 1
the cap is counted per slot (``band_keys.content_slots``, a hash of the
document's content): each slot admits ``ceil(max_bucket_size / slots)``
documents per key, so that an index split by slot over shards counts every
cap exactly as the whole index would (``engine.sharding``).

**Exact copies are always found.** Besides the bands, every generation keeps
one more table, under each document's content key (``lsh.band_keys``),
capped like the others. An exact copy probes it with the key of its
original: either the original was entered there, or, the cap being reached,
the earliest ``max_bucket_size`` documents of the original's generation under
that key were, and those are exact copies too. Either way the copy is found
at similarity 1, in the same generation as the original, so it stays
findable as long as the original is indexed.
"""

from dataclasses import dataclass
from typing import cast

import numpy as np
import numpy.typing as npt

from stream_dedup.errors import ConfigError
from stream_dedup.lsh.arena import Arena
from stream_dedup.lsh.band_keys import KeyArray, content_slots
from stream_dedup.lsh.band_table import IntArray
from stream_dedup.lsh.generation import Generation, IndexedBatch
from stream_dedup.lsh.params import BandParameters
from stream_dedup.lsh.retention import GenerationList, Retention
from stream_dedup.text.hashing import U64
from stream_dedup.text.shingle_sets import ShingleSets


@dataclass(frozen=True)
class Lookup:
    """Candidates of a batch from the stored documents.

    Attributes:
        rows: batch row of each candidate pair.
        seqs: global sequence number of the stored document of each pair.
        newest_counts: ``(n, bands + 1)`` documents found under each row's
            keys in the newest generation (what the hot-bucket cap counts).
        tables: the table (band, or ``bands`` for the content key) each pair was found in.
    """

    rows: IntArray
    seqs: npt.NDArray[np.int64]
    newest_counts: npt.NDArray[np.int64]
    tables: IntArray


class BandIndex:
    """Banded LSH index over generations of one-bit sketches."""

    def __init__(
        self,
        sketch_bits: int,
        banding: BandParameters,
        max_bucket_size: int = 64,
        retention: Retention | None = None,
        keep_shingles: bool = False,
        keep_fingerprints: bool = False,
        keep_set_sizes: bool = False,
        slots: int = 1,
    ) -> None:
        """``keep_shingles`` (exact verification), ``keep_fingerprints`` (the combined method) and
        ``keep_set_sizes`` (containment) store those too.

        ``slots``: how many slots the hot-bucket cap is counted in (see above).
        """
        if max_bucket_size < 1:
            raise ConfigError("max_bucket_size", f"must be at least 1, got {max_bucket_size}")
        self.sketch_bytes = sketch_bits // 8
        self.banding = banding
        self.max_bucket_size = max_bucket_size
        self.slots = slots
        #: Documents one slot admits under one key of one table per generation.
        self.slot_cap = -(-max_bucket_size // slots)
        self.keep_shingles = keep_shingles
        self.keep_fingerprints = keep_fingerprints
        self.keep_set_sizes = keep_set_sizes
        self.history = GenerationList(retention or Retention(), self._new_generation)
        self.hot_bucket_skips = 0

    def __len__(self) -> int:
        return len(self.history)

    @property
    def generations(self) -> list[Generation]:
        """The generations, oldest first."""
        return self.history.items

    @property
    def evicted_documents(self) -> int:
        return self.history.evicted_documents

    @property
    def next_seq(self) -> int:
        """Sequence number the next inserted document gets."""
        return self.history.next_seq

    @property
    def nbytes(self) -> int:
        """Bytes held by the index's arrays."""
        return sum(g.nbytes for g in self.generations)

    def lookup(self, keys: KeyArray) -> Lookup:
        """Stored documents sharing at least one key with each row of ``keys`` ``(n, bands + 1)``."""
        n, bands = keys.shape
        query_band = np.tile(np.arange(bands), n)
        flat_keys = keys.ravel()
        rows: list[IntArray] = []
        seqs: list[npt.NDArray[np.int64]] = []
        tables: list[IntArray] = []
        newest_counts = np.zeros(n * bands, dtype=np.int64)
        for generation in self.generations:
            query, local = generation.tables.lookup(query_band, flat_keys)
            rows.append(query // bands)
            seqs.append(local.astype(np.int64) + generation.base_seq)
            tables.append(query % bands)
            if generation is self.generations[-1]:
                if self.slots > 1:  # the cap counts only the documents of the row's own slot
                    stored_slots = generation.key_highs.values[local, -1] % self.slots
                    query = query[stored_slots == content_slots(keys, self.slots)[query // bands]]
                newest_counts = np.bincount(query, minlength=n * bands)
        return Lookup(
            np.concatenate(rows), np.concatenate(seqs), newest_counts.reshape(n, bands), np.concatenate(tables)
        )

    def sketches_of(self, seqs: npt.NDArray[np.int64]) -> npt.NDArray[np.uint8]:
        """One-bit sketches of stored documents by sequence number."""
        return self.history.gather(seqs, lambda g: g.sketches.values, (self.sketch_bytes,), np.uint8)

    def sources_of(self, seqs: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
        """Sources (as given to :meth:`add`) of stored documents by sequence number."""
        return self.history.gather(seqs, lambda g: g.sources.values)

    def fingerprints_of(self, seqs: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
        """SimHash fingerprints of stored documents by sequence number (method combined only)."""
        if not self.keep_fingerprints:
            raise ValueError("this index keeps no SimHash fingerprints (the method is not combined)")
        return self.history.gather(seqs, lambda g: cast(Arena, g.fingerprints).values)

    def set_sizes_of(self, seqs: npt.NDArray[np.int64]) -> npt.NDArray[np.uint32]:
        """Set sizes of stored documents by sequence number (containment only)."""
        if not self.keep_set_sizes:
            raise ValueError("this index keeps no set sizes (containment is off)")
        return self.history.gather(seqs, lambda g: cast(Arena, g.set_sizes).values, (), np.uint32)

    def shingle_sets_of(self, seqs: npt.NDArray[np.int64]) -> ShingleSets:
        """Shingle sets of stored documents by sequence number (exact verification only)."""
        parts, positions = [], []
        for generation, inside, local in self._locate(seqs):
            if generation.shingles is None:
                raise ValueError("this index keeps no shingle sets (verification is not exact)")
            parts.append(generation.shingles.sets().take(local))
            positions.append(inside)
        if not parts:
            return ShingleSets.empty()
        return ShingleSets.concat(parts).take(np.argsort(np.concatenate(positions)))

    def ids_of(self, seqs: npt.NDArray[np.int64]) -> list[str]:
        """Ids of stored documents by sequence number, in the order asked."""
        ids: list[str] = [""] * seqs.size
        for generation, positions, local in self._locate(seqs):
            for position, doc_id in zip(positions.tolist(), generation.ids_of(local), strict=True):
                ids[position] = doc_id
        return ids

    def add(self, batch: IndexedBatch, earlier_counts: npt.NDArray[np.int64]) -> None:
        """Insert a batch (sequence numbers ``next_seq`` onwards), then apply retention.

        ``earlier_counts[row, table]`` is how many documents (of the row's
        slot) already sit under that key in the newest generation plus how
        many earlier rows of the batch (of its slot) share it: a row is
        entered in a table only below the cap.
        """
        admit = earlier_counts < self.slot_cap
        self.hot_bucket_skips += int(admit.size - np.count_nonzero(admit))
        self.generations[-1].add(batch, admit)
        self.history.note_event_times(batch.event_times)
        self.history.apply_retention()

    def seal(self) -> None:
        """Open a new newest generation, as retention does (a shard follows the whole stream's retention)."""
        self.history.seal()

    def _new_generation(self, base_seq: int, capacity: int | None) -> Generation:
        return Generation(
            self.sketch_bytes,
            self.banding.bands + 1,
            base_seq,
            self.keep_shingles,
            capacity,
            self.keep_fingerprints,
            self.keep_set_sizes,
        )

    def _locate(self, seqs: npt.NDArray[np.int64]) -> list[tuple[Generation, IntArray, IntArray]]:
        """Split sequence numbers by generation: ``(generation, positions in seqs, local numbers)``."""
        return self.history.locate(seqs)


def pairs_within_batch(keys: KeyArray, max_bucket_size: int) -> tuple[IntArray, IntArray, npt.NDArray[np.int64]]:
    """Candidate pairs among the rows of one batch, and each row's rank under its keys.

    Returns ``(rows, earlier_rows, ranks)``: row ``rows[i]`` shares a band key
    with the earlier row ``earlier_rows[i]`` (each row is paired with at most
    the first ``max_bucket_size`` earlier rows under a key, as the index
    would hold no more), and ``ranks[row, band]`` is how many earlier rows of
    the batch share that row's key in that band.
    """
    groups = _key_groups(keys)
    partners = np.minimum(groups.sharing - groups.group_start, max_bucket_size)
    owner = np.repeat(groups.sharing, partners)
    offset = np.arange(owner.size) - np.repeat(np.cumsum(partners) - partners, partners)
    partner = np.repeat(groups.group_start, partners) + offset
    return groups.flat_order[owner], groups.flat_order[partner], groups.ranks


def ranks_within_batch(keys: KeyArray, slots: int) -> npt.NDArray[np.int64]:
    """``ranks[row, table]``: earlier rows of the batch sharing the row's key in that table *and its slot*."""
    slot = content_slots(keys, slots).astype(U64)
    # (key, slot) pairs numbered densely, so that with the row number they still fit 64 bits.
    _, group_ids = np.unique((keys.astype(U64) << U64(16)) | slot[:, None], return_inverse=True)
    return _key_groups(group_ids.reshape(keys.shape)).ranks


@dataclass(frozen=True)
class _KeyGroups:
    """Per table, the rows of a batch grouped by key, rows in order within each group.

    Positions are flat: ``table * n + position in the table's grouped order``.

    Attributes:
        flat_order: the row at each position.
        sharing: the positions of rows that are not the first under their key
            (few, in a stream: the rest is computed for those alone).
        group_start: where the group of each of ``sharing`` starts.
        ranks: ``(n, tables)``, how many earlier rows share each row's key.
    """

    flat_order: IntArray
    sharing: IntArray
    group_start: IntArray
    ranks: npt.NDArray[np.int64]


def _key_groups(keys: npt.NDArray[np.unsignedinteger] | npt.NDArray[np.intp]) -> _KeyGroups:
    n, bands = keys.shape
    # One plain sort of (key, row) pairs packed into one integer (a stable argsort of the keys is a slow merge sort).
    row_bits = U64(max(1, (n - 1).bit_length()))
    packed = keys.T.astype(U64, order="C") << row_bits
    packed |= np.arange(n, dtype=U64)
    packed.sort(axis=1)
    order = (packed & ((U64(1) << row_bits) - U64(1))).astype(np.intp)
    packed >>= row_bits
    new_key = np.ones((bands, n), dtype=bool)
    np.not_equal(packed[:, 1:], packed[:, :-1], out=new_key[:, 1:])
    flat_order = order.reshape(-1)
    sharing = np.flatnonzero(~new_key)
    group_starts = np.flatnonzero(new_key)
    group_start = group_starts[np.searchsorted(group_starts, sharing, side="right") - 1]
    ranks = np.zeros((bands, n), dtype=np.int64)
    ranks.reshape(-1)[sharing - sharing % n + flat_order[sharing]] = sharing - group_start
    return _KeyGroups(flat_order, sharing, group_start, ranks.T)
