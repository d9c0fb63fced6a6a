"""What every detector does, whatever its method: take a batch in stream order, return one verdict per document.

The methods (:class:`~stream_dedup.engine.detector.Detector` for MinHash and
the combined filter, :class:`~stream_dedup.engine.simhash_detector.SimHashDetector`)
differ in how they sign documents and find matches; the callers (the offline
command, the Kafka stage, snapshots) see only this interface. Semantics are
those of a one-at-a-time loop: document ``i`` of the stream is compared with
every earlier indexed document (earlier batches *and* earlier rows of its own
batch) and is then indexed itself, duplicates included, so verdicts never
depend on batch boundaries.
"""

import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.pairs import earlier_values
from stream_dedup.engine.text_verification import DocumentTexts
from stream_dedup.engine.verdict import Verdict
from stream_dedup.lsh.generation import NO_SOURCE, IndexedBatch, SignedBatch


@dataclass
class DetectorStats:
    """Running counters, for summaries and metrics."""

    documents: int = 0
    duplicates: int = 0
    candidates: int = 0
    verified: int = 0
    contained: int = 0
    contains: int = 0
    #: Pairs the containment search verified (each once, both ways), beside the Jaccard ``candidates``.
    containment_candidates: int = 0
    #: Pairs too near the threshold for the sketch, judged by their texts' exact Jaccard.
    settled_by_text: int = 0
    #: Pairs as near, left to the estimate because a text could not be had.
    unsettled: int = 0

    def pair_counts(self) -> tuple[int, int, int, int]:
        """(candidates, verified, settled_by_text, unsettled): a batch reports the change of these over it."""
        return self.candidates, self.verified, self.settled_by_text, self.unsettled


class StoredDocuments(Protocol):
    """What every index tells about itself, and about its documents by sequence number."""

    def __len__(self) -> int: ...

    @property
    def nbytes(self) -> int: ...

    @property
    def evicted_documents(self) -> int: ...

    @property
    def first_seq(self) -> int: ...

    @property
    def hot_bucket_skips(self) -> int: ...

    def ids_of(self, seqs: npt.NDArray[np.int64]) -> list[str]: ...

    def sources_of(self, seqs: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]: ...

    def make_way(self, event_times: npt.NDArray[np.float64]) -> None:
        """Before a batch is probed: forget what its first record is too late to match (``GenerationList.make_way``)."""
        ...


@dataclass(frozen=True)
class BestMatches:
    """Each row's best earlier match: ``seq`` (-1 for none), its similarity and, if known, Hamming distance."""

    seqs: npt.NDArray[np.int64]
    similarity: npt.NDArray[np.float64]
    distances: npt.NDArray[np.int64] | None = None


class DuplicateDetector(ABC):
    """A streaming near-duplicate detector over an index of earlier documents."""

    config: DetectionConfig
    index: StoredDocuments
    stats: DetectorStats
    #: Candidates of each document of the latest batch (for a metric's histogram).
    last_batch_candidates: npt.NDArray[np.int64]

    def __len__(self) -> int:
        """Documents in the index."""
        return len(self.index)

    def memory_bytes(self) -> int:
        """Bytes held by the index's arrays."""
        return self.index.nbytes

    @property
    def evicted_documents(self) -> int:
        """Documents dropped by retention so far."""
        return self.index.evicted_documents

    @property
    def hot_bucket_skips(self) -> int:
        """Entries left out of the index's tables by its hot-bucket cap so far."""
        return self.index.hot_bucket_skips

    @abstractmethod
    def sign(self, texts: Sequence[str], normalized: bool = False) -> SignedBatch:
        """All the index needs of ``texts``: what :meth:`process_signed` takes and the changelog stores.

        Raises :class:`~stream_dedup.errors.InputError` if a text is empty after normalisation.
        """

    @abstractmethod
    def process_signed(self, batch: IndexedBatch, document_texts: DocumentTexts | None = None) -> list[Verdict]:
        """Verdicts for a batch of signed documents in stream order, then index them.

        ``document_texts`` gives documents' texts by source, for the pairs
        whose estimated Jaccard is too near the threshold to judge
        (:mod:`~stream_dedup.engine.text_verification`); the SimHash method,
        which judges fingerprints, takes none.
        """

    @abstractmethod
    def insert(self, batch: IndexedBatch, counts: npt.NDArray[np.int64]) -> None:
        """Index ``batch`` (sequence numbers ``index.next_seq`` onwards), with its probe's counts of each row.

        The counts (of documents under the row's keys, or of near
        fingerprints) are what the hot-bucket cap compares with its limit.
        """

    def _index_and_count(self, batch: IndexedBatch, best: BestMatches, counts: npt.NDArray[np.int64]) -> None:
        """The end of :meth:`process_signed`: insert the batch, count its documents and duplicates."""
        self.insert(batch, counts)
        self.stats.documents += len(batch.ids)
        self.stats.duplicates += int(np.count_nonzero(best.seqs >= 0))

    @abstractmethod
    def slots_of(self, batch: SignedBatch, slots: int) -> npt.NDArray[np.intp]:
        """Each row's slot of ``slots``, a hash of its content that exact copies share.

        The hot-bucket cap is counted per slot (``index_slots``), and a sharded
        index gives each shard whole slots (:mod:`~stream_dedup.engine.sharding`).
        """

    def process(
        self,
        ids: Sequence[str],
        texts: Sequence[str],
        event_times: npt.NDArray[np.float64] | Sequence[float] | None = None,
        normalized: bool = False,
        sources: npt.NDArray[np.uint64] | Sequence[int] | None = None,
        document_texts: DocumentTexts | None = None,
    ) -> list[Verdict]:
        """Verdicts for a batch of documents in stream order, then index them.

        ``event_times`` (seconds) drive age-based retention; they default to
        now. ``normalized=True`` says the texts already went through
        :func:`~stream_dedup.text.normalize` (callers that reject empty texts
        one by one normalise first and need not pay twice). ``sources`` are
        opaque 64-bit pointers to the documents' records (a line number, a
        packed Kafka partition and offset) that verdicts return for a match;
        they default to none; with ``document_texts``, they also find the
        texts of pairs too near the threshold for the sketch. Raises :class:`~stream_dedup.errors.InputError`
        (and changes nothing) if a text is empty after normalisation.
        """
        if not texts:
            return []
        times = np.full(len(ids), time.time()) if event_times is None else np.asarray(event_times, dtype=np.float64)
        if sources is None:
            pointers = np.full(len(ids), NO_SOURCE, dtype=np.uint64)
        else:
            pointers = np.asarray(sources, dtype=np.uint64)
        batch = IndexedBatch(list(ids), self.sign(texts, normalized), times, pointers)
        return self.process_signed(batch, document_texts)


def verdicts_of(batch: IndexedBatch, best: BestMatches, stored: StoredDocuments, first_seq: int) -> list[Verdict]:
    """One verdict per row of ``batch``; matches ``>= first_seq`` are earlier rows of the batch itself."""
    ids = batch.ids
    verdicts = [Verdict(doc_id, "unique") for doc_id in ids]
    rows = np.flatnonzero(best.seqs >= 0)
    match_ids, sources = matches_of(batch, best.seqs[rows], stored, first_seq)
    distances = best.distances[rows].tolist() if best.distances is not None else [None] * rows.size
    for row, match, score, source, distance in zip(
        rows.tolist(), match_ids, best.similarity[rows].tolist(), optional_sources(sources), distances, strict=True
    ):
        verdicts[row] = Verdict(ids[row], "duplicate", match, round(score, 4), source, distance)
    return verdicts


def matches_of(
    batch: IndexedBatch, seqs: npt.NDArray[np.int64], stored: StoredDocuments, first_seq: int
) -> tuple[list[str], npt.NDArray[np.uint64]]:
    """Ids and sources of matched documents, stored or earlier rows of ``batch``.

    The ids and sources of stored matches are fetched in one call each, so
    this must run before the batch's insert (retention may then evict them).
    """
    in_batch = seqs >= first_seq
    stored_ids = iter(stored.ids_of(seqs[~in_batch]))
    ids = [
        batch.ids[seq - first_seq] if batched else next(stored_ids)
        for seq, batched in zip(seqs.tolist(), in_batch.tolist(), strict=True)
    ]
    return ids, earlier_values(batch.sources, stored.sources_of, seqs, first_seq)


def optional_sources(sources: npt.NDArray[np.uint64]) -> list[int | None]:
    """``sources`` as a verdict gives them: ``None`` for ``NO_SOURCE``."""
    return [None if source == NO_SOURCE else source for source in sources.tolist()]
