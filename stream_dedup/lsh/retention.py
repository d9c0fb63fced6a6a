"""Retention: how an index remembers a stretch of the stream and forgets the rest.

An index is a list of generations, oldest first; only the newest takes new
documents, numbered ``base_seq + local`` globally. :class:`Retention` seals
the newest generation when it holds a quarter of ``max_documents`` or spans
a quarter of ``max_age_seconds``, and evicts whole oldest generations, so
forgetting costs nothing per document and never touches a table. It acts
after each batch, and by age before each batch too, at its first record's
time: a batch after a quiet spell meets none of what the spell outlived.
:class:`GenerationList` holds that policy for indexes of any kind of table
(the banded index and the Hamming index).

Event times come from producers, and some are wrong. Retention by age is
kept safe from them (:meth:`GenerationList.stream_times`,
:func:`time_span`): a record stamped far in the past does not make its
generation span a quarter of ``max_age_seconds`` (each would be sealed
after one batch, and generations pile up), and one stamped far ahead of
the records batched with it does not age the whole index at once, nor stay
young itself until the real time catches up with it (eviction would stop
behind it).
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from stream_dedup.bounds import check_number, check_whole_number
from stream_dedup.lsh.arena import ID_BYTES_PER_GENERATION

#: Generations retention keeps: eviction frees about 1/this of the index at once.
GENERATIONS_PER_RETENTION = 4
#: Most documents retention by count may keep: a generation's documents are numbered in 32 bits, and the
#: history topics' ``retention.bytes`` derived from it (``worker.topics``) stays within Kafka's 64-bit long.
MAX_DOCUMENTS = 10_000_000_000
#: Longest retention by age, ten years: the history topics' ``retention.ms`` is derived from it.
MAX_AGE_SECONDS = 10 * 365 * 24 * 3600


@dataclass(frozen=True)
class Retention:
    """How much of the stream the index remembers.

    Attributes:
        max_documents: keep at least the newest this many documents, and at
            most a quarter more (eviction drops a whole generation). ``None``:
            no limit by count.
        max_age_seconds: forget a generation once all its documents are older
            (by event time) than this, measured from the newest event time
            seen, or from the first record of the batch about to be judged
            if later (:meth:`GenerationList.make_way`). ``None``: no limit by age.
    """

    max_documents: int | None = None
    max_age_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.max_documents is not None:
            check_whole_number(
                "max_documents",
                self.max_documents,
                1,
                MAX_DOCUMENTS,
                "a generation holds a quarter of them, numbered in 32 bits; unset: no limit by count",
            )
        if self.max_age_seconds is not None:
            why = "ten years; unset: no limit by age"
            check_number("max_age_seconds", self.max_age_seconds, 1, MAX_AGE_SECONDS, why)

    @property
    def generation_seconds(self) -> float | None:
        """Event time a generation spans before it is sealed (a quarter of ``max_age_seconds``); ``None``: no limit.

        It is also the most event time a caller should judge in one batch: a
        batch's rows are judged against each other whatever their times, so
        a batch spanning more would match documents further apart than
        ``max_age_seconds``, and its generation would outlive them by as much.
        """
        max_age = self.max_age_seconds
        return None if max_age is None else max_age / GENERATIONS_PER_RETENTION

    @property
    def generation_documents(self) -> int | None:
        """Documents a generation holds under retention by count (it is then sealed); ``None``: no limit by count.

        It is also the most documents a caller should judge in one batch: a
        batch's rows are judged against each other and its generation takes
        it whole, so a larger batch would keep (and match) documents further
        back than a quarter past ``max_documents``.
        """
        limit = self.max_documents
        return None if limit is None else -(-limit // GENERATIONS_PER_RETENTION)


IntArray = npt.NDArray[np.intp]


class Generation(Protocol):
    """What retention needs of a generation."""

    base_seq: int
    first_event_time: float
    last_event_time: float

    def __len__(self) -> int: ...

    @property
    def ids_full(self) -> bool:
        """Whether its ids passed :data:`~stream_dedup.lsh.arena.ID_BYTES_PER_GENERATION` (it must be sealed)."""
        ...


G = TypeVar("G", bound=Generation)


class GenerationList(Generic[G]):
    """Generations oldest first, opened and evicted by a :class:`~stream_dedup.lsh.Retention`."""

    def __init__(self, retention: Retention, open_generation: Callable[[int, int | None], G]) -> None:
        """``open_generation(base_seq, capacity)`` makes an empty generation (capacity in documents, if known)."""
        self.retention = retention
        self._open = open_generation
        self.items: list[G] = [open_generation(0, self.capacity)]
        self.evicted_documents = 0
        self.newest_event_time = float("-inf")

    def __len__(self) -> int:
        return sum(len(g) for g in self.items)

    @property
    def newest(self) -> G:
        return self.items[-1]

    @property
    def next_seq(self) -> int:
        """Sequence number the next inserted document gets."""
        return self.newest.base_seq + len(self.newest)

    @property
    def first_seq(self) -> int:
        """Sequence number of the oldest document held (:attr:`next_seq` if none): retention forgot the rest."""
        return self.items[0].base_seq

    @property
    def capacity(self) -> int | None:
        """Documents per generation under retention by count (a generation is then sealed)."""
        return self.retention.generation_documents

    def stream_times(self, times: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """A batch's event times as retention counts them; moves :attr:`newest_event_time` on.

        No time counts as later than a quarter of ``max_age_seconds`` (one
        generation's span) past the batch's median (its lower middle time) or
        the newest event time before it, whichever is later. A record stamped a
        year ahead among records of today then ages the index by a quarter of
        ``max_age_seconds``, not a year, and its generation is evicted in turn,
        while a stream that moves on, even by days between two quiet batches,
        moves the clock with it. (A record alone in its batch is its own
        median: the Kafka stage bounds each record's time by the clock of the
        machine that reads it, :meth:`~stream_dedup.worker.signing.SignedRecords.split`.)
        """
        counted = self._counted(times)
        if counted.size:
            self.newest_event_time = max(self.newest_event_time, float(counted.max()))
        return counted

    def _counted(self, times: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """A batch's event times as retention counts them (:meth:`stream_times`), changing nothing."""
        span = self.retention.generation_seconds
        if span is None or times.size == 0:
            return times
        middle = (times.size - 1) // 2
        median = float(np.partition(times, middle)[middle])
        return np.minimum(times, max(self.newest_event_time, median) + span)

    def make_way(self, times: npt.NDArray[np.float64]) -> G | None:
        """Before a batch of ``times`` is judged: seal and evict as its first record's time requires.

        Retention otherwise acts after a batch, measured by the times before
        it: the first batch after a quiet spell would be judged against
        everything from before the spell, and join (and keep alive) the
        generation open since. The batch's first record (its time as
        :meth:`stream_times` counts it) is the clock the stage cuts batches
        by; a generation it would stretch past a quarter of
        ``max_age_seconds`` is sealed, and generations older than
        ``max_age_seconds`` by it are evicted. Only the batch's contents
        decide, so a replay and every shard (each sees every batch) do the
        same. Returns the generation sealed, if any; :meth:`stream_times`
        and :meth:`apply_retention` then take the batch as before.
        """
        span = self.retention.generation_seconds
        if span is None or times.size == 0:
            return None
        first = float(self._counted(times)[0])
        sealed = self.seal() if first - self.newest.first_event_time > span else None
        self._evict(max(self.newest_event_time, first))
        return sealed

    def apply_retention(self) -> G | None:
        """Seal the newest generation if it is full (documents or id bytes) or spans enough time, then evict.

        Returns the generation sealed, if any.
        """
        newest = self.newest
        span = self.retention.generation_seconds
        full = (self.capacity is not None and len(newest) >= self.capacity) or newest.ids_full
        aged = span is not None and newest.last_event_time - newest.first_event_time >= span
        sealed = self.seal() if full or aged else None
        self._evict(self.newest_event_time)
        return sealed

    def _evict(self, clock: float) -> None:
        """Evict oldest generations while over ``max_documents`` or older than ``max_age_seconds`` by ``clock``."""
        limit = self.retention.max_documents
        max_age = self.retention.max_age_seconds
        while len(self.items) > 1:
            oldest = self.items[0]
            too_many = limit is not None and len(self) - len(oldest) >= limit
            too_old = max_age is not None and oldest.last_event_time < clock - max_age
            if not (too_many or too_old):
                break
            self.evict_oldest()

    def seal(self) -> G:
        """Open a new newest generation; return the one it replaces."""
        sealed = self.newest
        self.items.append(self._open(self.next_seq, self.capacity))
        return sealed

    def evict_oldest(self) -> None:
        """Forget the oldest generation (there must be another)."""
        self.evicted_documents += len(self.items[0])
        del self.items[0]

    def locate(self, seqs: npt.NDArray[np.int64]) -> list[tuple[G, IntArray, IntArray]]:
        """Split sequence numbers by generation: ``(generation, positions in seqs, local numbers)``."""
        parts = []
        for generation in self.items:
            inside = np.flatnonzero((seqs >= generation.base_seq) & (seqs < generation.base_seq + len(generation)))
            if inside.size:
                parts.append((generation, inside, (seqs[inside] - generation.base_seq).astype(np.intp)))
        return parts

    def gather(
        self,
        seqs: npt.NDArray[np.int64],
        column: Callable[[G], np.ndarray],
        row_shape: tuple[int, ...] = (),
        dtype: npt.DTypeLike = np.uint64,
    ) -> np.ndarray:
        """Rows of a per-document array of the generations (``column(generation)``), by sequence number."""
        out = np.empty((seqs.size, *row_shape), dtype=dtype)
        for generation, positions, local in self.locate(seqs):
            out[positions] = column(generation)[local]
        return out


class Stretch:
    """A generation measured but not stored: its documents, id bytes and event times.

    A shard stores only the documents it owns, yet must open, seal and evict
    its generations at the very batches one index of the whole stream would
    (``engine.sharding``). It keeps a :class:`GenerationList` of stretches fed
    with every batch of the stream, lets that list decide, and does the same.
    """

    def __init__(self, base_seq: int, capacity: int | None = None) -> None:
        """``capacity`` is not needed: nothing is stored."""
        self.base_seq = base_seq
        self.documents = 0
        self.id_bytes = 0
        self.first_event_time = float("inf")
        self.last_event_time = float("-inf")

    def __len__(self) -> int:
        return self.documents

    @property
    def ids_full(self) -> bool:
        return self.id_bytes >= ID_BYTES_PER_GENERATION

    def add(self, ids: list[str], times: npt.NDArray[np.float64]) -> None:
        """Measure a batch as :meth:`lsh.generation.Generation.add` would store it (times as retention counts them)."""
        self.documents += len(ids)
        self.id_bytes += sum(len(doc_id.encode("utf-8")) for doc_id in ids)
        self.first_event_time, self.last_event_time = time_span(self.first_event_time, self.last_event_time, times)


def time_span(first: float, last: float, times: npt.NDArray[np.float64]) -> tuple[float, float]:
    """A generation's event-time span ``(first, last)`` once it takes a batch of ``times`` (``inf, -inf``: empty).

    ``first`` is the newest time of the generation's first batch, not its
    oldest: a record stamped an hour late must not make a generation span a
    quarter of ``max_age_seconds`` by itself, and have it sealed after one batch.
    """
    if times.size == 0:
        return first, last
    newest = float(times.max())
    return (newest if first == float("inf") else first), max(last, newest)
