"""The banded LSH index: probe for candidates, then insert, over generations.

Every document is compared with every earlier indexed document. The index
answers two questions for a batch of band keys: which stored documents share
a band with each row (:meth:`BandIndex.lookup`), and which earlier rows of the
same batch do (:func:`pairs_within_batch`); the engine verifies both and then
inserts the batch.

**Hot buckets.** A band key shared by very many documents (boilerplate, a
template, a thousand exact copies) would make every probe walk all of them.
So a band keeps at most ``max_bucket_size`` documents under one key per
generation: the newest. A document entered under a full key displaces the
oldest one there (its entry is removed, ``BandTables.remove``); that and
the rows of one batch past the cap are counted in
:attr:`BandIndex.hot_bucket_skips`. The newest, not the earliest, because a
template's variants fill its keys: had the earliest stayed, every variant
after them would be entered in no band, and its repost, the near-copy a
user cares about, could never find it. A displaced document stays in its
other bands and in the content key; a near-copy of it that comes after
``max_bucket_size`` newer documents took each of its band keys misses it.
With ``slots`` > 1
the cap is counted per slot (``band_keys.content_slots``, a hash of the
document's content): each slot keeps ``ceil(max_bucket_size / slots)``
documents per key, so that an index split by slot over shards counts every
cap exactly as the whole index would (``engine.sharding``).

**Exact copies are always found.** Besides the bands, every generation keeps
one more table, under each document's content key (``lsh.band_keys``),
capped too, but keeping a key's *earliest* documents (later ones are not
entered). An exact copy probes it with the key of its
original: either the original was entered there, or, the cap being reached,
the earliest ``max_bucket_size`` documents of the original's generation under
that key were, and those are exact copies too. Either way the copy is found
at similarity 1, in the same generation as the original, so it stays
findable as long as the original is indexed.
"""

from dataclasses import dataclass
from typing import NamedTuple, cast

import numpy as np
import numpy.typing as npt

from stream_dedup.errors import ConfigError
from stream_dedup.lsh.arena import Arena
from stream_dedup.lsh.band_keys import KeyArray, content_slots, stored_slots
from stream_dedup.lsh.band_table import IntArray
from stream_dedup.lsh.generation import Generation, IndexedBatch
from stream_dedup.lsh.params import BandParameters
from stream_dedup.lsh.retention import GenerationList, Retention
from stream_dedup.text.hashing import U64
from stream_dedup.text.shingle_sets import ShingleSets


class _Crowding(NamedTuple):
    """Per row and table of a batch: earlier rows sharing its key and slot, and how many rows share them."""

    ranks: npt.NDArray[np.int64]
    sizes: npt.NDArray[np.int64]


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


class _Found:
    """A generation's matches of distinct queries, sorted by query and document: each query's run of them."""

    def __init__(self, packed: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64]) -> None:
        self.packed = packed
        self.sizes = sizes
        self.starts = np.cumsum(sizes) - sizes

    @classmethod
    def of(cls, query: IntArray, local: IntArray, queries: int) -> "_Found":
        """From the tables' ``(query, local)`` matches of ``queries`` distinct queries."""
        packed = (query.astype(np.int64) << np.int64(32)) | local.astype(np.int64)
        packed.sort()
        return cls(packed, np.bincount(query, minlength=queries).astype(np.int64))

    @property
    def locals(self) -> npt.NDArray[np.int64]:
        return self.packed & np.int64(0xFFFF_FFFF)

    def up_to(self, asked: IntArray, limits: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """How many of the matches of each query ``asked[i]`` are numbered at most ``limits[i]``."""
        limits = np.clip(limits, -1, 0xFFFF_FFFF)
        ends = np.searchsorted(self.packed, (asked.astype(np.int64) << np.int64(32)) + limits, side="right")
        return ends - self.starts[asked]

    def runs(self, asked: IntArray, counts: npt.NDArray[np.int64]) -> tuple[IntArray, IntArray]:
        """``(query, local)``: the first ``counts[i]`` matches of each query ``asked[i]``, for every ``i``."""
        at = np.repeat(self.starts[asked], counts) + _positions_in_runs(counts)
        query: IntArray = np.repeat(np.arange(asked.size), counts)
        local: IntArray = self.locals[at].astype(np.intp)
        return query, local

    def in_slots(
        self, generation: Generation, asked: IntArray, slots_asked: IntArray, slots: int
    ) -> npt.NDArray[np.int64]:
        """How many of the matches of each query ``asked[i]`` are stored documents of slot ``slots_asked[i]``."""
        local = self.locals
        codes = (self.packed >> np.int64(32)) * slots + stored_slots(generation.key_highs.values[local, -1], slots)
        present, counts = np.unique(codes, return_counts=True)
        if present.size == 0:
            return np.zeros(asked.size, dtype=np.int64)
        wanted = asked.astype(np.int64) * slots + slots_asked
        at = np.minimum(np.searchsorted(present, wanted), present.size - 1)
        return np.where(present[at] == wanted, counts[at], 0).astype(np.int64)


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
        #: Documents one slot keeps under one key of one table per generation.
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
    def first_seq(self) -> int:
        """Sequence number of the oldest document held."""
        return self.history.first_seq

    @property
    def next_seq(self) -> int:
        """Sequence number the next inserted document gets."""
        return self.history.next_seq

    @property
    def nbytes(self) -> int:
        """Bytes held by the index's arrays."""
        return sum(g.nbytes for g in self.generations)

    def lookup(
        self,
        keys: KeyArray,
        batch_ranks: npt.NDArray[np.int64] | None = None,
        bounds: npt.NDArray[np.int64] | None = None,
    ) -> Lookup:
        """Stored documents sharing at least one key with each row of ``keys`` ``(n, bands + 1)``.

        ``batch_ranks[row, table]``, how many earlier rows of the batch share
        the row's key (:func:`pairs_within_batch`), makes a row see what it
        would had the batch come one row at a time: without the stored
        documents of the newest generation that those rows, entered first,
        would have displaced from a full band. Without it, every stored
        document is seen.

        ``bounds[row]`` leaves out the row's matches numbered above it (an
        exact copy's, ``engine.exact_copies``): the rest are those found
        without it, and ``newest_counts`` counts every match still.
        """
        n, bands = keys.shape
        # Each distinct (table, key) is looked up once: a hot key's copies ask the same thing thousands of times.
        distinct, asked = np.unique(
            (np.tile(np.arange(bands, dtype=U64), n) << U64(32)) | keys.ravel(), return_inverse=True
        )
        distinct_tables = (distinct >> U64(32)).astype(np.intp)
        distinct_keys = distinct.astype(np.uint32)
        query_rows = np.arange(n * bands) // bands
        rows: list[IntArray] = []
        seqs: list[npt.NDArray[np.int64]] = []
        tables: list[IntArray] = []
        newest_counts = np.zeros(n * bands, dtype=np.int64)
        for generation in self.generations:
            found = _Found.of(*generation.tables.lookup(distinct_tables, distinct_keys), distinct.size)
            every = found.sizes[asked]
            # A bound leaves out a query's matches numbered above it: the rest are a prefix of its run.
            limits = None if bounds is None else bounds[query_rows] - generation.base_seq
            wanted = every if limits is None else found.up_to(asked, limits)
            if generation is self.generations[-1]:
                newest_counts = every
                if self.slots > 1:  # the cap counts only the documents of the row's own slot
                    newest_counts = found.in_slots(
                        generation, asked, content_slots(keys, self.slots)[query_rows], self.slots
                    )
                if batch_ranks is not None and self._crowded(every.reshape(n, bands) + batch_ranks):
                    # Whether a row still sees a match depends on every match of its query: those are all taken.
                    query, local = found.runs(asked, np.where(wanted > 0, every, 0))
                    row, table = np.divmod(query, bands)
                    held = self._held(generation, keys, batch_ranks, query, table, local)
                    if limits is not None:
                        held &= local <= limits[query]
                    kept = np.flatnonzero(held)
                    rows.append(row[kept])
                    seqs.append(local[kept].astype(np.int64) + generation.base_seq)
                    tables.append(table[kept])
                    continue
            query, local = found.runs(asked, wanted)
            row, table = np.divmod(query, bands)
            rows.append(row)
            seqs.append(local.astype(np.int64) + generation.base_seq)
            tables.append(table)
        return Lookup(
            np.concatenate(rows), np.concatenate(seqs), newest_counts.reshape(n, bands), np.concatenate(tables)
        )

    def earliest_content_matches(self, keys: KeyArray) -> npt.NDArray[np.int64]:
        """Per row of ``keys``, the earliest stored document its content key finds (-1: none).

        It is one of the row's candidates in :meth:`lookup`, whatever the
        caps did: the content key's matches are all seen. Generations are
        read oldest first, and each only for the rows the older ones did not
        answer.
        """
        n, tables = keys.shape
        earliest = np.full(n, -1, dtype=np.int64)
        for generation in self.generations:
            pending = np.flatnonzero(earliest < 0)
            if pending.size == 0:
                break
            distinct, asked = np.unique(keys[pending, -1], return_inverse=True)
            query, local = generation.tables.lookup(np.full(distinct.size, tables - 1), distinct)
            first = np.full(distinct.size, np.iinfo(np.int64).max)
            np.minimum.at(first, query, local)
            first = first[asked]
            found = np.flatnonzero(first < np.iinfo(np.int64).max)
            earliest[pending[found]] = first[found] + generation.base_seq
        return earliest

    def _crowded(self, counts: npt.NDArray[np.int64]) -> bool:
        """Whether a band key holds, with the batch's earlier rows, more than the cap (``counts`` ``(n, tables)``).

        Usually none does: then no stored document is displaced.
        """
        return bool(counts[:, :-1].max(initial=0) > self.slot_cap)

    def _held(
        self,
        newest: Generation,
        keys: KeyArray,
        batch_ranks: npt.NDArray[np.int64],
        query: IntArray,
        table: IntArray,
        local: IntArray,
    ) -> npt.NDArray[np.bool_]:
        """Which of the newest generation's matches ``(query, local)`` a row still sees, rows entered one by one.

        Under a band key, of the stored documents of a slot, the row sees the
        newest ``slot_cap - c``, where ``c`` counts the batch's earlier rows of
        that key and slot: each of those, entered before the row, displaced
        the oldest. A match of another key (the tables compare 16 bits) and
        the content key's matches (it keeps its earliest) are all seen.

        The matches are millions in a crowded batch, their (row, table, slot)
        groups tens of thousands: one sort orders every match by group and
        document, the rest is done per group. A row sees the documents of a
        group newer than the group's threshold: the newest one it does not see.
        """
        tables = keys.shape[1]
        stored_highs = newest.key_highs.values
        # Flat gathers of 16-bit values: half the time of indexing the 2-d arrays and comparing as 32 bits.
        query_highs = (keys >> np.uint32(16)).astype(np.uint16).reshape(-1)
        candidate = np.take(stored_highs.reshape(-1), local * tables + table) == np.take(query_highs, query)
        candidate &= table < tables - 1
        picked = np.flatnonzero(candidate)
        picked_local = local[picked]
        # The group of a match: its query (row and table) and the stored document's slot.
        group = query[picked]
        if self.slots > 1:
            group = group * self.slots + stored_slots(stored_highs[picked_local, -1], self.slots)
        # Groups are numbered by that code, or densely when there are more codes than matches (many slots):
        # the numbers index the per-group arrays below.
        codes = None
        if keys.size * self.slots > picked.size:
            codes, group = np.unique(group, return_inverse=True)
        counts = np.bincount(group)
        numbers = np.flatnonzero(counts)
        sizes = counts[numbers]
        ends = np.cumsum(sizes)
        code = numbers if codes is None else codes[numbers]
        # One slot: a group is a row's key, and lookup was given each row's rank under it.
        earlier = batch_ranks.reshape(-1)[code] if self.slots == 1 else self._earlier_rows(keys, code)
        seen = np.maximum(self.slot_cap - earlier, 0)
        # Sorted by group and document, a group's newest ``seen`` end its run: the threshold comes just before.
        unseen = np.flatnonzero(seen < sizes)
        threshold = np.full(counts.size, -1, dtype=np.int64)
        threshold[numbers[unseen]] = _sorted_minors(group, picked_local, ends[unseen] - seen[unseen] - 1)
        held = np.ones(query.size, dtype=bool)
        held[picked] = picked_local > threshold[group]
        return held

    def _earlier_rows(self, keys: KeyArray, groups: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """For each group ``(row * tables + table) * slots + slot``: the batch's rows before ``row`` under the
        row's key of ``table`` whose slot is ``slot`` (which need not be the row's own)."""
        n, tables = keys.shape
        query, slot = np.divmod(groups, self.slots)
        row, table = np.divmod(query, tables)
        # (table, key, slot) of each batch row's bands, numbered densely, then (number, row) sorted.
        band_rows = np.repeat(np.arange(n), tables - 1)
        band_tables = np.tile(np.arange(tables - 1), n)
        row_slots = content_slots(keys, self.slots).astype(U64)
        buckets, numbers = np.unique(
            _bucket_codes(band_tables, keys[band_rows, band_tables], row_slots[band_rows]), return_inverse=True
        )
        row_bits = U64(max(1, n.bit_length()))
        batch = np.sort((numbers.astype(U64) << row_bits) | band_rows.astype(U64))
        # A group of a slot no batch row of that key has (another slot's stored document) has no earlier rows.
        codes = _bucket_codes(table, keys.reshape(-1)[query], slot.astype(U64))
        at = np.minimum(np.searchsorted(buckets, codes), buckets.size - 1)
        bucket = at.astype(U64) << row_bits
        earlier = np.searchsorted(batch, bucket | row.astype(U64)) - np.searchsorted(batch, bucket)
        return np.where(buckets[at] == codes, earlier, 0)

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
        many earlier rows of the batch (of its slot) share it. A band takes
        the batch's last ``slot_cap`` rows under a key, and under a key that
        would then hold more than ``slot_cap`` documents of a slot, the oldest
        are removed first (a band keeps a key's newest documents); the content
        key takes only rows below the cap (it keeps a key's earliest: an exact
        copy names the first).
        """
        keys = batch.signed.keys
        crowding = self._crowding(keys, earlier_counts)
        admit = self._admitted(earlier_counts, crowding)
        removed = self._make_room(keys, earlier_counts, crowding) if crowding is not None else 0
        self.hot_bucket_skips += int(admit.size - np.count_nonzero(admit)) + removed
        self.generations[-1].add(batch, admit, self.history.stream_times(batch.event_times))
        self.history.apply_retention()

    def _crowding(self, keys: KeyArray, earlier_counts: npt.NDArray[np.int64]) -> "_Crowding | None":
        """How the batch's rows group under each key and slot; ``None`` if no band key reaches the cap.

        ``None`` is the usual case, known from the counts alone: under every
        band key, what is stored plus the batch's rows stays within the cap.
        """
        if earlier_counts[:, :-1].max(initial=0) < self.slot_cap:
            return None
        return _Crowding(*_ranks_and_sizes(keys, self.slots))

    def _admitted(self, earlier_counts: npt.NDArray[np.int64], crowding: "_Crowding | None") -> npt.NDArray[np.bool_]:
        admit = earlier_counts < self.slot_cap
        if crowding is not None:
            admit[:, :-1] = (crowding.sizes - crowding.ranks <= self.slot_cap)[:, :-1]
        return admit

    def _make_room(self, keys: KeyArray, earlier_counts: npt.NDArray[np.int64], crowding: "_Crowding") -> int:
        """Remove from the newest generation's bands the oldest documents a batch's rows displace; how many.

        Under each band key (and slot), the stored documents and the rows the
        batch enters (its last ``slot_cap``) that exceed ``slot_cap``. Counts
        are exact: a stored document counts only if its whole key and slot
        are the row's (the tables match 16 bits of a key).
        """
        bands = keys.shape[1] - 1
        ranks, sizes = crowding
        entering = np.minimum(sizes, self.slot_cap)
        # The stored count of the tables' lookup, which may count a false match too, says where to look.
        last = (ranks == sizes - 1)[:, :bands]
        crowded = last & ((earlier_counts - ranks + entering)[:, :bands] > self.slot_cap)
        rows, tables = np.divmod(np.flatnonzero(crowded), bands)
        if rows.size == 0:
            return 0
        newest = self.generations[-1]
        query_keys = keys[rows, tables]
        query, local = newest.tables.lookup(tables, query_keys)
        stored_highs = newest.key_highs.values
        same = stored_highs[local, tables[query]] == (query_keys[query] >> np.uint32(16))
        if self.slots > 1:
            same &= stored_slots(stored_highs[local, -1], self.slots) == content_slots(keys, self.slots)[rows[query]]
        query, local = query[same], local[same]
        stored = np.bincount(query, minlength=rows.size)
        excess = stored + entering[rows, tables] - self.slot_cap
        order = np.lexsort((local, query))  # each key's documents, oldest first
        query, local = query[order], local[order]
        oldest = _positions_in_runs(stored) < excess[query]
        newest.tables.remove(tables[query[oldest]], query_keys[query[oldest]], local[oldest])
        return int(np.count_nonzero(oldest))

    def seal(self) -> None:
        """Open a new newest generation, as retention does (a shard follows the whole stream's retention)."""
        self.history.seal()

    def make_way(self, event_times: npt.NDArray[np.float64]) -> None:
        """Before a batch is probed: seal and evict as its first record's time requires (``history.make_way``)."""
        self.history.make_way(event_times)

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


class BatchPairs(NamedTuple):
    """Candidate pairs among the rows of one batch (see :func:`pairs_within_batch`).

    Attributes:
        rows: the later row of each pair.
        earlier_rows: the earlier row of each pair.
        tables: the table (band, or the content key last) whose key the pair shares; a pair sharing
            several keys comes once per table.
        ranks: ``(n, tables)``, how many earlier rows of the batch share each row's key in each table.
    """

    rows: IntArray
    earlier_rows: IntArray
    tables: IntArray
    ranks: npt.NDArray[np.int64]


def pairs_within_batch(
    keys: KeyArray, max_bucket_size: int, slots: int = 1, wanting: npt.NDArray[np.bool_] | None = None
) -> BatchPairs:
    """Candidate pairs among the rows of one batch, with the table of each, and each row's rank under its keys.

    As the index keeps them, a row is paired with at most
    ``max_bucket_size`` earlier rows under a key: the newest under a band
    key, the earliest under the content key (``keys``' last column); with
    ``slots``, each slot's share of the cap (see :attr:`BandIndex.slot_cap`):
    under a band key the newest earlier rows of each slot. Both searches,
    Jaccard and containment, take a batch's own pairs from here, so a row
    sees the earlier rows of its batch that a batch of one row would have
    seen: whatever the later rows of the batch displace. Only the rows
    ``wanting`` them (all, if ``None``) get pairs; every row counts in the ranks.
    """
    n, tables = keys.shape
    groups = _key_groups(keys)
    cap = -(-max_bucket_size // slots)
    partners = np.minimum(groups.sharing - groups.group_start, cap)
    if wanting is not None:
        partners[~wanting[groups.flat_order[groups.sharing]]] = 0
    table = groups.sharing // max(n, 1)
    content = table == tables - 1
    # Usually no band key holds more earlier rows than a slot's share: each row then pairs with them all.
    by_slot = slots > 1 and groups.ranks[:, :-1].max(initial=0) >= cap
    if by_slot:  # the band keys' pairs, slot by slot, below; all rows under a content key share its slot
        partners[~content] = 0
    first_partner = np.where(content, groups.group_start, groups.sharing - partners)
    owner = np.repeat(groups.sharing, partners)
    partner = np.repeat(first_partner, partners) + _positions_in_runs(partners)
    pairs = BatchPairs(groups.flat_order[owner], groups.flat_order[partner], np.repeat(table, partners), groups.ranks)
    if not by_slot:
        return pairs
    rows, earlier, band = _newest_of_each_slot(keys, slots, cap, wanting)
    return BatchPairs(
        np.concatenate((pairs.rows, rows)),
        np.concatenate((pairs.earlier_rows, earlier)),
        np.concatenate((pairs.tables, band)),
        groups.ranks,
    )


def _newest_of_each_slot(
    keys: KeyArray, slots: int, cap: int, wanting: npt.NDArray[np.bool_] | None
) -> tuple[IntArray, IntArray, IntArray]:
    """``(rows, earlier rows, bands)``: under each band key, each row (of those ``wanting``, if given) with the
    newest ``cap`` earlier rows of every slot, as a band entered row by row keeps them.

    The rows are grouped by (band, key, slot), in order within each group;
    the groups of one key are consecutive. For each row and each slot group
    of its key, the earlier rows are the group's rows before it: a binary
    search finds where they end, and the last ``cap`` of them are its pairs.
    """
    n, count = keys.shape[0], keys.shape[1] - 1
    if n == 0 or count == 0:
        empty = np.zeros(0, dtype=np.intp)
        return empty, empty, empty
    ids = _slot_key_ids(keys, slots)[:, :-1]  # numbered in order of (key, slot): a key's groups are consecutive
    row = _key_groups(ids).flat_order  # the row at each position band * n + i, by (band, key and slot, row)
    band_of = np.arange(count * n) // n
    group_of = ids[row, band_of]
    key_of = keys[row, band_of]
    new_group = np.ones(count * n, dtype=bool)
    new_group[1:] = (group_of[1:] != group_of[:-1]) | (band_of[1:] != band_of[:-1])
    new_key = np.ones(count * n, dtype=bool)
    new_key[1:] = (key_of[1:] != key_of[:-1]) | (band_of[1:] != band_of[:-1])
    group_index = np.cumsum(new_group) - 1
    group_starts = np.flatnonzero(new_group)
    key_index = np.cumsum(new_key) - 1
    key_starts = np.flatnonzero(new_key)
    key_sizes = np.diff(np.append(key_starts, count * n))
    first_group_of_key = group_index[key_starts]
    groups_of_key = np.diff(np.append(first_group_of_key, group_starts.size))
    # Every row under a key that others share, with every slot group of that key.
    shared = np.flatnonzero(key_sizes[key_index] > 1)
    if wanting is not None:
        shared = shared[wanting[row[shared]]]
    per_row = groups_of_key[key_index[shared]]
    at = np.repeat(shared, per_row)
    group = np.repeat(first_group_of_key[key_index[shared]], per_row) + _positions_in_runs(per_row)
    # Positions are sorted by (group, row): where the group's rows reach this row is one search.
    codes = group_index.astype(np.int64) * (n + 1) + row
    end = np.searchsorted(codes, group.astype(np.int64) * (n + 1) + row[at])
    start = np.maximum(group_starts[group], end - cap)
    taken = end - start
    owner = np.repeat(at, taken)
    partner = np.repeat(start, taken) + _positions_in_runs(taken)
    return row[owner], row[partner], band_of[owner]


def ranks_within_batch(keys: KeyArray, slots: int) -> npt.NDArray[np.int64]:
    """``ranks[row, table]``: earlier rows of the batch sharing the row's key in that table *and its slot*."""
    return _key_groups(_slot_key_ids(keys, slots)).ranks


def _ranks_and_sizes(keys: KeyArray, slots: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Per row and table: earlier rows of the batch sharing its key and slot, and how many rows share them."""
    ids = _slot_key_ids(keys, slots)
    tables = ids.shape[1]
    # One bincount over every table: each table's ids moved past the ones before.
    flat = ids + np.arange(tables) * (int(ids.max(initial=0)) + 1)
    sizes = np.bincount(flat.reshape(-1))[flat]
    return _key_groups(ids).ranks, sizes


def _positions_in_runs(lengths: npt.NDArray[np.int64] | IntArray) -> npt.NDArray[np.int64]:
    """``0, 1, ..`` within each of consecutive runs of ``lengths``: ``[2, 3]`` gives ``[0, 1, 0, 1, 2]``."""
    return np.arange(int(lengths.sum())) - np.repeat(np.cumsum(lengths) - lengths, lengths)


def _sorted_minors(major: IntArray, minor: IntArray, positions: IntArray) -> IntArray:
    """``minor`` at ``positions`` of the pairs ``(major, minor)`` (non-negative) sorted by major, then minor.

    When a pair fits one 63-bit integer, one plain sort of them packed (a
    SIMD sort, 40 times faster than a lexsort), in place, and only the
    positions asked for unpacked: a fresh array of millions costs as much as
    the sort in page faults.
    """
    minor_bits = int(minor.max(initial=0)).bit_length()
    if int(major.max(initial=0)).bit_length() + minor_bits > 63:
        return minor[np.lexsort((minor, major))[positions]]
    packed = major << minor_bits
    packed |= minor
    packed.sort()
    return packed[positions] & ((1 << minor_bits) - 1)


def _bucket_codes(tables: IntArray, keys: KeyArray, slots: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """One 64-bit code per (table, key, slot): the table in the top 16 bits, the key, the slot in the low 16."""
    return (tables.astype(U64) << U64(48)) | (keys.astype(U64) << U64(16)) | slots


def _slot_key_ids(keys: KeyArray, slots: int) -> IntArray:
    """``(n, tables)``: each row's (key, slot) in each table, numbered densely (so that with a row number
    they still fit 64 bits)."""
    slot = content_slots(keys, slots).astype(U64)
    _, group_ids = np.unique((keys.astype(U64) << U64(16)) | slot[:, None], return_inverse=True)
    ids: IntArray = group_ids.reshape(keys.shape).astype(np.intp)
    return ids


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
