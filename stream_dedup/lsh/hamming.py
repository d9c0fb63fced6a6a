"""The Hamming index: every stored 64-bit fingerprint within distance ``k`` of a query, exactly.

Manku, Jain and Das Sarma's permuted tables (layout in
:mod:`~stream_dedup.lsh.hamming_params`): each table files a fingerprint
under some of its bits, and pigeonhole guarantees that any fingerprint
within ``k`` of the query shares the query's key in at least one table.
Candidates from every table are checked on the full fingerprint (XOR and
popcount), so the answer is exact: every stored fingerprint within ``k``,
and nothing beyond. All of them: a fingerprint stored ``m`` times makes each
new copy report ``m`` matches, so callers that need only one (the earliest,
the nearest) pick it from :class:`NearMatches`.

Every document is compared with every earlier one. :meth:`HammingIndex.search_and_add`
searches the stored documents and the earlier rows of the same batch
(:func:`matches_within_batch`) before inserting the batch, so a verdict
never depends on where batch boundaries fall. The hot-cluster cap below
holds to that too: :meth:`HammingIndex.capped` applies it to a batch's rows
as if they were entered one by one, so an earlier row the cap keeps out of
the tables is no match for a later row of its batch, as it would be none for
a row of the next batch.

Storage, per document: the fingerprint (8 bytes) and its source (an opaque
8-byte pointer to its record, returned with a match) once, its id in a byte
arena (UTF-8 bytes plus an 8-byte end offset), and in each table its key and
uint32 local number (see :mod:`~stream_dedup.lsh.hamming_runs`): 24 bytes
for the 4 tables of ``k = 3``, so about 48 bytes plus the id's length.

**Hot clusters.** Exactness has a price where fingerprints crowd: a thousand
copies of one boilerplate page would make every new copy match all the
earlier ones, and the work per document grow without bound. With
``max_bucket_size`` set, :meth:`HammingIndex.search_and_add` keeps such a
document (its id, source and fingerprint) but does not enter it in the
tables when the newest generation already holds an exact copy of its
fingerprint (the copy answers every later query as well, and is earlier) or
at least ``max_bucket_size`` fingerprints within ``k`` of it. The skips are
counted in :attr:`HammingIndex.hot_bucket_skips`. Without it every document
is entered and the answers are exact. (Unlike the bands, which keep each
key's newest documents, this keeps a crowd's earliest: removing entries from
the sorted runs is not supported.)

With ``slots`` > 1 the cap is counted per slot (:func:`fingerprint_slots`,
a hash of the fingerprint): only near fingerprints of the document's own
slot count, against ``ceil(max_bucket_size / slots)``. An index split by
slot over shards then counts every cap exactly as one index does, each slot
living whole on one shard (:mod:`~stream_dedup.engine.sharding`).

Retention works as in :class:`~stream_dedup.lsh.BandIndex`: documents live in
generations, the newest takes inserts, and whole generations are evicted by
count or age (:class:`~stream_dedup.lsh.Retention`).

:meth:`HammingIndex.export` gives plain arrays and JSON-able metadata (for
snapshots); the tables are not exported but rebuilt by :meth:`HammingIndex.restore`:
they are a function of the fingerprints, so a snapshot cannot hold tables
that disagree with its fingerprints, and is about half the size.
"""

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from stream_dedup.errors import ConfigError, CorruptSnapshotError, IncompatibleSnapshotError
from stream_dedup.lsh.arena import Arena, IdArena, ids_fit
from stream_dedup.lsh.generation import NO_SOURCE
from stream_dedup.lsh.hamming_params import HammingLayout, KeyArray
from stream_dedup.lsh.hamming_runs import IntArray, RunStack, SortedRun
from stream_dedup.lsh.retention import GenerationList, Retention, time_span
from stream_dedup.sketch.simhash import hamming_distance
from stream_dedup.text.hashing import Uint64Array, fmix64

#: Names the export format; :meth:`HammingIndex.restore` refuses any other.
EXPORT_FORMAT = "stream-dedup/hamming-index/2"


@dataclass(frozen=True)
class NearMatches:
    """Pairs (batch row, earlier document) within the index's distance, sorted by row then sequence number.

    Attributes:
        rows: batch row of each pair.
        seqs: global sequence number of the earlier document of each pair.
        distances: Hamming distance of the pair's fingerprints (uint8).
    """

    rows: IntArray
    seqs: npt.NDArray[np.int64]
    distances: npt.NDArray[np.uint8]

    def __len__(self) -> int:
        return int(self.rows.size)


class HammingIndex:
    """Exact Hamming-distance search over generations of 64-bit fingerprints."""

    def __init__(
        self,
        layout: HammingLayout,
        retention: Retention | None = None,
        max_bucket_size: int | None = None,
        slots: int = 1,
    ) -> None:
        """``retention`` defaults to remembering every document; ``max_bucket_size`` and ``slots``: see "Hot
        clusters" above."""
        self.layout = layout
        self.history = GenerationList(retention or Retention(), self._open_generation)
        self.max_bucket_size = max_bucket_size
        self.slots = slots
        self.hot_bucket_skips = 0

    @property
    def generations(self) -> list["_Generation"]:
        """Oldest first; the last takes inserts."""
        return self.history.items

    def __len__(self) -> int:
        return len(self.history)

    @property
    def max_distance(self) -> int:
        return self.layout.max_distance

    @property
    def retention(self) -> Retention:
        return self.history.retention

    @property
    def next_seq(self) -> int:
        """Sequence number the next inserted document gets."""
        return self.history.next_seq

    @property
    def evicted_documents(self) -> int:
        return self.history.evicted_documents

    @property
    def first_seq(self) -> int:
        """Sequence number of the oldest document held."""
        return self.history.first_seq

    @property
    def nbytes(self) -> int:
        """Bytes held by the index's arrays, allocated whether used or not."""
        return sum(g.nbytes for g in self.generations)

    def search(self, fingerprints: Uint64Array) -> NearMatches:
        """Stored documents within ``max_distance`` of each of ``fingerprints`` ``(n,)`` uint64."""
        keys = self.layout.keys(fingerprints)
        parts = [g.search(keys, fingerprints, self.max_distance) for g in self.generations]
        return _sorted_matches(
            np.concatenate([rows for rows, _, _ in parts]),
            np.concatenate([seqs for _, seqs, _ in parts]),
            np.concatenate([distances for _, _, distances in parts]),
        )

    def search_batch(self, fingerprints: Uint64Array, earlier: npt.NDArray[np.bool_] | None = None) -> NearMatches:
        """Every earlier document within ``max_distance`` of each row, without inserting anything.

        Earlier documents are the stored ones and the earlier rows of this
        batch (which get sequence numbers ``next_seq + row`` when :meth:`add`
        inserts the batch next); ``earlier``, a mask over the batch's rows,
        keeps only the earlier rows it marks (a shard's own).
        """
        keys = self.layout.keys(fingerprints)
        rows = np.arange(fingerprints.size) if earlier is None else np.flatnonzero(earlier)
        run = SortedRun.build([k[rows] for k in keys], rows.astype(np.uint32))
        stored = [g.search(keys, fingerprints, self.max_distance) for g in self.generations]
        rows, earlier_rows, distances = _within_batch(run, keys, fingerprints, self.max_distance)
        return _sorted_matches(
            np.concatenate([rows, *[r for r, _, _ in stored]]),
            np.concatenate([earlier_rows.astype(np.int64) + self.next_seq, *[s for _, s, _ in stored]]),
            np.concatenate([distances, *[d for _, _, d in stored]]),
        )

    def search_and_add(
        self,
        fingerprints: Uint64Array,
        ids: list[str],
        event_times: npt.NDArray[np.float64] | None = None,
        sources: Uint64Array | None = None,
    ) -> NearMatches:
        """:meth:`make_way` for the batch, :meth:`search_batch` under the cap (:meth:`capped`), then :meth:`add` it."""
        self.make_way(np.zeros(fingerprints.size) if event_times is None else event_times)
        matches, crowding = self.capped(self.search_batch(fingerprints), fingerprints)
        self.add(fingerprints, ids, event_times, sources, crowding)
        return matches

    def add(
        self,
        fingerprints: Uint64Array,
        ids: list[str],
        event_times: npt.NDArray[np.float64] | None = None,
        sources: Uint64Array | None = None,
        crowding: npt.NDArray[np.int64] | None = None,
    ) -> None:
        """Insert a batch (sequence numbers ``next_seq`` onwards), then apply retention.

        ``crowding``, the batch's as :meth:`capped` returns it, lets the hot-cluster cap
        keep crowded fingerprints out of the tables; without it every row is entered.
        """
        keys = self.layout.keys(fingerprints)
        entered = np.arange(fingerprints.size, dtype=np.uint32)
        if crowding is not None and self.max_bucket_size is not None:
            near, copies = crowding[:, 0], crowding[:, 1]
            entered = np.flatnonzero((near < self.slot_cap) & (copies == 0)).astype(np.uint32)
            self.hot_bucket_skips += fingerprints.size - entered.size
        run = SortedRun.build([k[entered] for k in keys], entered)
        if len(ids) != fingerprints.size:
            raise ValueError(f"{fingerprints.size} fingerprints but {len(ids)} ids")
        times = np.zeros(fingerprints.size) if event_times is None else event_times
        pointers = np.full(fingerprints.size, NO_SOURCE) if sources is None else sources
        self.history.newest.add(fingerprints, ids, self.history.stream_times(times), pointers, run)
        sealed = self.history.apply_retention()
        if sealed is not None:
            # A sealed generation takes no more inserts: one run makes its searches cheapest.
            sealed.runs.compact()

    def seal(self) -> None:
        """Open a new newest generation, as retention does (a shard follows the whole stream's retention)."""
        self.history.seal().runs.compact()

    def make_way(self, event_times: npt.NDArray[np.float64]) -> None:
        """Before a batch is searched: seal and evict as its first record's time requires (``history.make_way``)."""
        sealed = self.history.make_way(event_times)
        if sealed is not None:
            sealed.runs.compact()

    @property
    def slot_cap(self) -> int:
        """Near fingerprints of its slot in the newest generation past which a document is not entered."""
        return -(-(self.max_bucket_size or 0) // self.slots)

    def capped(self, matches: NearMatches, fingerprints: Uint64Array) -> tuple[NearMatches, npt.NDArray[np.int64]]:
        """``matches`` (the batch's :meth:`search_batch`) as the hot-cluster cap leaves them, and the crowding.

        The crowding, ``(n, 2)``: each row's near fingerprints and exact copies
        in the newest generation, of its slot; what :meth:`add` applies the cap
        to (see "Hot clusters" above). Only the newest generation counts (the
        batch joins it), as a copy of an older document must stay findable once
        that one is evicted.

        The batch's rows count as if entered one by one: an earlier row counts
        only if the cap let it in, and a row it kept out is no match for the
        later rows. So verdicts do not depend on where batches are cut.
        """
        in_batch = matches.seqs >= self.next_seq
        counted = matches.seqs >= self.history.newest.base_seq
        if self.slots > 1:
            others = np.empty(matches.seqs.size, dtype=np.uint64)
            others[in_batch] = fingerprints[matches.seqs[in_batch] - self.next_seq]
            stored = counted & ~in_batch
            others[stored] = self.fingerprints_of(matches.seqs[stored])
            slots = fingerprint_slots(fingerprints[matches.rows], self.slots)
            counted &= slots == fingerprint_slots(others, self.slots)
        exact = matches.distances == 0
        if self.max_bucket_size is None:
            return matches, _crowding(fingerprints.size, matches.rows, counted, exact)
        stored_counted = counted & ~in_batch
        crowding = _crowding(fingerprints.size, matches.rows, stored_counted, exact)
        pairs = np.flatnonzero(counted & in_batch)
        entered = _entered_one_by_one(
            crowding, matches.rows[pairs], matches.seqs[pairs] - self.next_seq, exact[pairs], self.slot_cap
        )
        found = ~in_batch
        found[in_batch] = entered[matches.seqs[in_batch] - self.next_seq]
        kept = NearMatches(matches.rows[found], matches.seqs[found], matches.distances[found])
        return kept, _crowding(fingerprints.size, kept.rows, counted[found], exact[found])

    def fingerprints_of(self, seqs: npt.NDArray[np.int64]) -> Uint64Array:
        """Fingerprints of stored documents by sequence number."""
        return self.history.gather(seqs, lambda g: g.fingerprints.values)

    def sources_of(self, seqs: npt.NDArray[np.int64]) -> Uint64Array:
        """Sources (as given to :meth:`add`; ``NO_SOURCE`` if none) of stored documents by sequence number."""
        return self.history.gather(seqs, lambda g: g.sources.values)

    def ids_of(self, seqs: npt.NDArray[np.int64]) -> list[str]:
        """Ids of stored documents by sequence number, in the order asked."""
        ids: list[str] = [""] * seqs.size
        for generation, positions, local in self.history.locate(seqs):
            for position, doc_id in zip(positions.tolist(), generation.ids.ids_of(local), strict=True):
                ids[position] = doc_id
        return ids

    def export(self) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
        """``(metadata, arrays)``: JSON-able metadata and named plain arrays that :meth:`restore` takes back."""
        arrays: dict[str, np.ndarray] = {}
        generations = []
        for number, g in enumerate(self.history.items):
            arrays[f"generation{number}.fingerprints"] = g.fingerprints.values.copy()
            arrays[f"generation{number}.sources"] = g.sources.values.copy()
            arrays[f"generation{number}.skipped"] = g.skipped()
            arrays[f"generation{number}.id_bytes"] = g.ids.bytes.values.copy()
            arrays[f"generation{number}.id_ends"] = g.ids.ends.values.copy()
            generations.append(
                {
                    "base_seq": g.base_seq,
                    "documents": len(g),
                    "first_event_time": _finite_or_none(g.first_event_time),
                    "last_event_time": _finite_or_none(g.last_event_time),
                }
            )
        metadata = {
            "format": EXPORT_FORMAT,
            "max_distance": self.max_distance,
            "levels": list(self.layout.levels),
            "max_bucket_size": self.max_bucket_size,
            "hot_bucket_skips": self.hot_bucket_skips,
            "retention": {
                "max_documents": self.retention.max_documents,
                "max_age_seconds": self.retention.max_age_seconds,
            },
            "evicted_documents": self.evicted_documents,
            "newest_event_time": _finite_or_none(self.history.newest_event_time),
            "generations": generations,
        }
        return metadata, arrays

    @classmethod
    def restore(
        cls, metadata: dict[str, Any], arrays: dict[str, np.ndarray], into: "HammingIndex | None" = None
    ) -> "HammingIndex":
        """The documents :meth:`export` described, in ``into``, its tables rebuilt.

        ``into`` is an empty index of the running settings, whose layout
        (its distance too), retention, cap and slots apply from now on (a
        restart may change them): the tables are rebuilt from the
        fingerprints for its layout, as a replay of the documents under it
        would build them, while the documents the cap kept out of the tables
        stay out. By default, one of the exported settings. Raises
        :class:`~stream_dedup.errors.IncompatibleSnapshotError` for another
        format, :class:`~stream_dedup.errors.CorruptSnapshotError` for missing
        or inconsistent arrays.
        """
        if metadata.get("format") != EXPORT_FORMAT:
            raise IncompatibleSnapshotError(
                f"Hamming index export has format {metadata.get('format')!r}, this version reads {EXPORT_FORMAT!r}"
            )
        index = into if into is not None else cls._of_exported_settings(metadata)
        layout = index.layout
        index.hot_bucket_skips = int(metadata["hot_bucket_skips"])
        capacity = index.history.capacity
        index.history.items = [
            _Generation.restore(layout, capacity, meta, arrays, number)
            for number, meta in enumerate(metadata["generations"])
        ]
        if not index.history.items:
            raise CorruptSnapshotError("Hamming index export lists no generation")
        index.history.evicted_documents = int(metadata["evicted_documents"])
        index.history.newest_event_time = _float_or(metadata["newest_event_time"], float("-inf"))
        return index

    @classmethod
    def _of_exported_settings(cls, metadata: dict[str, Any]) -> "HammingIndex":
        """An empty index of the layout, retention and cap :meth:`export` wrote (CorruptSnapshotError if invalid)."""
        try:
            layout = HammingLayout(int(metadata["max_distance"]), tuple(metadata["levels"]))
            return cls(layout, Retention(**metadata["retention"]), metadata["max_bucket_size"])
        except ConfigError as error:  # not the running settings': the export's, which were valid when written
            raise CorruptSnapshotError(f"Hamming index export of settings no index has: {error}") from error

    def _open_generation(self, base_seq: int, capacity: int | None) -> "_Generation":
        return _Generation(self.layout, base_seq, capacity)


def fingerprint_slots(fingerprints: Uint64Array, slots: int) -> npt.NDArray[np.intp]:
    """Each fingerprint's slot of ``slots``: the fingerprint hashed (``fmix64``), mod ``slots``.

    Hashed, because the fingerprints of one site's pages share most of their
    bits: slots read from raw bits would be as uneven as the corpus, and the
    shards with them. Exact copies share a slot; with ``shards`` dividing
    ``slots``, a fingerprint's slot mod ``shards`` is its slot among ``shards``.
    """
    return (fmix64(fingerprints.copy()) % np.uint64(slots)).astype(np.intp)


def matches_within_batch(fingerprints: Uint64Array, layout: HammingLayout) -> NearMatches:
    """Pairs of rows of one batch within ``layout.max_distance``, each row with its earlier rows.

    ``seqs`` holds the earlier row's position in the batch.
    """
    keys = layout.keys(fingerprints)
    run = SortedRun.build(keys, np.arange(fingerprints.size, dtype=np.uint32))
    rows, earlier, distances = _within_batch(run, keys, fingerprints, layout.max_distance)
    return _sorted_matches(rows, earlier.astype(np.int64), distances)


class _Generation:
    """Fingerprints, ids and sorted runs of a stretch of consecutive documents, numbered locally from 0."""

    def __init__(self, layout: HammingLayout, base_seq: int, capacity: int | None) -> None:
        self.layout = layout
        self.base_seq = base_seq
        self.fingerprints = Arena((), np.uint64, capacity or 0)
        self.sources = Arena((), np.uint64, capacity or 0)
        self.ids = IdArena(capacity or 0)
        self.runs = RunStack()
        self.first_event_time = float("inf")
        self.last_event_time = float("-inf")

    def __len__(self) -> int:
        return len(self.fingerprints)

    @property
    def ids_full(self) -> bool:
        return self.ids.full

    @property
    def nbytes(self) -> int:
        return self.fingerprints.nbytes + self.sources.nbytes + self.ids.nbytes + self.runs.nbytes

    def add(
        self,
        fingerprints: Uint64Array,
        ids: list[str],
        times: npt.NDArray[np.float64],
        sources: Uint64Array,
        run: SortedRun,
    ) -> None:
        """Store a batch whose run numbers its rows from 0 (it may leave rows out of the tables)."""
        if len(run):
            self.runs.push(run.shifted(len(self)))
        self.fingerprints.extend(fingerprints)
        self.sources.extend(sources)
        self.ids.extend(ids)
        self.first_event_time, self.last_event_time = time_span(self.first_event_time, self.last_event_time, times)

    def skipped(self) -> npt.NDArray[np.uint32]:
        """Local numbers of the documents kept out of the tables (hot clusters), ascending."""
        entered = [run.docs[0] for run in self.runs.runs]
        return np.setdiff1d(np.arange(len(self), dtype=np.uint32), np.concatenate([np.empty(0, np.uint32), *entered]))

    def search(
        self, keys: list[KeyArray], fingerprints: Uint64Array, max_distance: int
    ) -> tuple[IntArray, npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
        """``(rows, seqs, distances)`` of stored documents within ``max_distance``; pairs may repeat."""
        query, local = self.runs.search(keys)
        distances = hamming_distance(fingerprints[query], self.fingerprints.values[local])
        near = distances <= max_distance
        return query[near], local[near].astype(np.int64) + self.base_seq, distances[near]

    @classmethod
    def restore(
        cls,
        layout: HammingLayout,
        capacity: int | None,
        meta: dict[str, Any],
        arrays: dict[str, np.ndarray],
        number: int,
    ) -> "_Generation":
        fingerprints = _exported(arrays, f"generation{number}.fingerprints", np.uint64)
        id_bytes = _exported(arrays, f"generation{number}.id_bytes", np.uint8)
        # uint64 before ids were sealed at 2 GiB.
        id_ends = _exported(arrays, f"generation{number}.id_ends", np.uint32, np.uint64).astype(np.uint64)
        sources = _exported(arrays, f"generation{number}.sources", np.uint64)
        skipped = _exported(arrays, f"generation{number}.skipped", np.uint32)
        documents = int(meta["documents"])
        consistent = (
            fingerprints.shape == (documents,)
            and sources.shape == (documents,)
            and bool((skipped < documents).all())
            and ids_fit(id_ends, id_bytes, documents)
        )
        if not consistent:
            raise CorruptSnapshotError(
                f"Hamming index export: arrays of generation {number} do not hold {documents} documents"
            )
        generation = cls(layout, int(meta["base_seq"]), max(capacity or 0, documents))
        generation.fingerprints.extend(fingerprints)
        generation.ids.bytes.extend(id_bytes)
        generation.ids.ends.extend(id_ends)
        generation.sources.extend(sources)
        entered = np.setdiff1d(np.arange(documents, dtype=np.uint32), skipped)
        if entered.size:
            generation.runs.push(SortedRun.build([k[entered] for k in layout.keys(fingerprints)], entered))
        generation.first_event_time = _float_or(meta["first_event_time"], float("inf"))
        generation.last_event_time = _float_or(meta["last_event_time"], float("-inf"))
        return generation


def _exported(arrays: dict[str, np.ndarray], name: str, *dtypes: npt.DTypeLike) -> np.ndarray:
    """The exported array ``name``, which must be of one of ``dtypes``: cast, another's values would be wrong."""
    try:
        found = arrays[name]
    except KeyError:
        raise CorruptSnapshotError(f"Hamming index export lacks array {name!r}") from None
    if not any(found.dtype == dtype for dtype in dtypes):
        raise CorruptSnapshotError(
            f"Hamming index export: array {name} is {found.dtype.str}, not {np.dtype(dtypes[0]).str}"
        )
    return found


def _crowding(
    rows: int, pair_rows: IntArray, counted: npt.NDArray[np.bool_], exact: npt.NDArray[np.bool_]
) -> npt.NDArray[np.int64]:
    """``(rows, 2)``: per row, its ``counted`` pairs, and those of them that are ``exact`` copies."""
    crowding = np.zeros((rows, 2), dtype=np.int64)
    crowding[:, 0] = np.bincount(pair_rows[counted], minlength=rows)
    crowding[:, 1] = np.bincount(pair_rows[counted & exact], minlength=rows)
    return crowding


def _entered_one_by_one(
    stored: npt.NDArray[np.int64], rows: IntArray, earlier: IntArray, exact: npt.NDArray[np.bool_], cap: int
) -> npt.NDArray[np.bool_]:
    """Which rows of a batch the cap enters, the rows entered one by one, in order.

    ``stored`` is each row's crowding by the stored documents (near, exact);
    ``rows``, ``earlier``, ``exact``: the counted pairs of rows within the batch,
    sorted by row. A row is entered while its near fingerprints (stored, and
    earlier rows entered) stay under ``cap`` and none is an exact copy.
    """
    entered: npt.NDArray[np.bool_] = (stored[:, 0] < cap) & (stored[:, 1] == 0)
    # Only a row whose batch pairs could bind decides in order; the others are entered or not already.
    within = np.bincount(rows, minlength=entered.size)
    copied = np.bincount(rows[exact], minlength=entered.size)
    undecided = np.flatnonzero(entered & ((stored[:, 0] + within >= cap) | (copied > 0)))
    starts = np.searchsorted(rows, undecided)
    for row, start, end in zip(undecided.tolist(), starts.tolist(), (starts + within[undecided]).tolist(), strict=True):
        counted = entered[earlier[start:end]]
        entered[row] = stored[row, 0] + np.count_nonzero(counted) < cap and not (counted & exact[start:end]).any()
    return entered


def _within_batch(
    run: SortedRun, keys: list[KeyArray], fingerprints: Uint64Array, max_distance: int
) -> tuple[IntArray, IntArray, npt.NDArray[np.uint8]]:
    """``(rows, earlier rows, distances)`` of the batch against its own run, earlier rows only; pairs may repeat."""
    query, other = run.search(keys)
    earlier = other < query
    query, other = query[earlier], other[earlier]
    distances = hamming_distance(fingerprints[query], fingerprints[other])
    near = distances <= max_distance
    return query[near], other[near], distances[near]


def _sorted_matches(rows: IntArray, seqs: npt.NDArray[np.int64], distances: npt.NDArray[np.uint8]) -> NearMatches:
    """Pairs sorted by (row, seq), each once: a pair found through several tables is one match."""
    order = np.lexsort((seqs, rows))
    rows, seqs, distances = rows[order], seqs[order], distances[order]
    first = np.ones(rows.size, dtype=bool)
    first[1:] = (rows[1:] != rows[:-1]) | (seqs[1:] != seqs[:-1])
    return NearMatches(rows[first], seqs[first], distances[first])


def _finite_or_none(value: float) -> float | None:
    # JSON has no infinities: an empty generation's event-time range is exported as null.
    return value if np.isfinite(value) else None


def _float_or(value: float | None, default: float) -> float:
    return default if value is None else float(value)
