"""Sorted runs: the Hamming index's tables over a stretch of documents.

A run covers some documents of a generation. For each table of the layout it
holds two arrays: the documents' keys, sorted, and their local document
numbers (uint32) in the same order, 6 or 8 bytes per document and table,
nothing per bucket. A query key is found by binary search
(``np.searchsorted`` over a whole batch of queries at once), which yields
exactly the documents whose key matches: no bucket to scan past.

Sorted arrays cannot take inserts cheaply, so a generation keeps several
runs, newest last, and merges them like a binary counter (see
:meth:`RunStack.push`): each run is at least twice as large as the next newer
one, so a generation of ``N`` documents has at most ``log2(N / batch) + 1``
runs and each document is re-sorted about that many times over its life.
Merging is a concatenation and a stable sort: radix sort for 16-bit keys,
and for 32-bit keys Timsort, which merges the two already sorted halves in
one pass.
"""

import numpy as np
import numpy.typing as npt

from stream_dedup.lsh.hamming_params import KeyArray

DocArray = npt.NDArray[np.uint32]
IntArray = npt.NDArray[np.intp]


class SortedRun:
    """Per table, the sorted keys of some documents and their local numbers."""

    def __init__(self, keys: list[KeyArray], docs: list[DocArray]) -> None:
        self.keys = keys
        self.docs = docs

    @classmethod
    def build(cls, keys: list[KeyArray], docs: DocArray) -> "SortedRun":
        """A run of documents ``docs`` whose keys per table are ``keys`` (unsorted, parallel to ``docs``)."""
        orders = [np.argsort(table_keys, kind="stable") for table_keys in keys]
        return cls([k[o] for k, o in zip(keys, orders, strict=True)], [docs[o] for o in orders])

    @classmethod
    def merge(cls, runs: list["SortedRun"]) -> "SortedRun":
        """One run holding the documents of all ``runs``."""
        merged_keys, merged_docs = [], []
        for table in range(len(runs[0].keys)):
            keys = np.concatenate([run.keys[table] for run in runs])
            order = np.argsort(keys, kind="stable")
            merged_keys.append(keys[order])
            merged_docs.append(np.concatenate([run.docs[table] for run in runs])[order])
        return cls(merged_keys, merged_docs)

    def __len__(self) -> int:
        return int(self.docs[0].size)

    @property
    def nbytes(self) -> int:
        return sum(int(k.nbytes + d.nbytes) for k, d in zip(self.keys, self.docs, strict=True))

    def shifted(self, offset: int) -> "SortedRun":
        """The same run with every document number increased by ``offset``."""
        return SortedRun(self.keys, [docs + np.uint32(offset) for docs in self.docs])

    def search(self, keys: list[KeyArray]) -> tuple[IntArray, IntArray]:
        """Documents filed under each query's key in any table.

        Returns ``(query, doc)``: parallel arrays, one element per (table,
        match), of the query's position in ``keys`` and the local document
        number. A document matching in several tables appears several times.
        """
        found_query: list[IntArray] = [np.empty(0, np.intp)]
        found_doc: list[IntArray] = [np.empty(0, np.intp)]
        for stored, docs, query_keys in zip(self.keys, self.docs, keys, strict=True):
            low = np.searchsorted(stored, query_keys, side="left")
            high = np.searchsorted(stored, query_keys, side="right")
            counts = high - low
            total = int(counts.sum())
            if not total:
                continue
            # Expand each query's range [low, high) into positions, without a loop per query.
            query = np.repeat(np.arange(query_keys.size), counts)
            starts = np.cumsum(counts) - counts
            positions = np.arange(total) - np.repeat(starts - low, counts)
            found_query.append(query)
            found_doc.append(docs[positions].astype(np.intp))
        return np.concatenate(found_query), np.concatenate(found_doc)


class RunStack:
    """The runs of one generation, oldest (largest) first."""

    def __init__(self) -> None:
        self.runs: list[SortedRun] = []

    def __len__(self) -> int:
        return sum(len(run) for run in self.runs)

    @property
    def nbytes(self) -> int:
        return sum(run.nbytes for run in self.runs)

    def push(self, run: SortedRun) -> None:
        """Add the newest run, then merge while the one before is less than twice its size.

        The invariant (each run at least twice the next) bounds the number of
        runs a query searches to the logarithm of the generation's size.
        """
        self.runs.append(run)
        while len(self.runs) >= 2 and len(self.runs[-2]) < 2 * len(self.runs[-1]):
            newest = self.runs.pop()
            self.runs[-1] = SortedRun.merge([self.runs[-1], newest])

    def compact(self) -> None:
        """Merge every run into one (when the generation takes no more documents)."""
        if len(self.runs) > 1:
            self.runs = [SortedRun.merge(self.runs)]

    def search(self, keys: list[KeyArray]) -> tuple[IntArray, IntArray]:
        """:meth:`SortedRun.search` over every run."""
        parts = [run.search(keys) for run in self.runs]
        if not parts:
            return np.empty(0, np.intp), np.empty(0, np.intp)
        return np.concatenate([q for q, _ in parts]), np.concatenate([d for _, d in parts])
