"""Retention: how an index remembers a stretch of the stream and forgets the rest.

An index is a list of generations, oldest first; only the newest takes new
documents, numbered ``base_seq + local`` globally. :class:`Retention` seals
the newest generation when it holds a quarter of ``max_documents`` or spans
a quarter of ``max_age_seconds``, and evicts whole oldest generations, so
forgetting costs nothing per document and never touches a table.
:class:`GenerationList` holds that policy for indexes of any kind of table
(the banded index and the Hamming index).
"""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from stream_dedup.errors import ConfigError
from stream_dedup.lsh.arena import IdArena

#: Generations retention keeps: eviction frees about 1/this of the index at once.
GENERATIONS_PER_RETENTION = 4


@dataclass(frozen=True)
class Retention:
    """How much of the stream the index remembers.

    Attributes:
        max_documents: keep at least the newest this many documents, and at
            most a quarter more (eviction drops a whole generation). ``None``:
            no limit by count.
        max_age_seconds: forget a generation once all its documents are older
            (by event time) than this, measured from the newest event time
            seen. ``None``: no limit by age.
    """

    max_documents: int | None = None
    max_age_seconds: float | None = None

    def __post_init__(self) -> None:
        if self.max_documents is not None and self.max_documents < 1:
            raise ConfigError("max_documents", f"must be at least 1, got {self.max_documents}")
        if self.max_age_seconds is not None and not self.max_age_seconds > 0:
            raise ConfigError("max_age_seconds", f"must be positive, got {self.max_age_seconds}")


IntArray = npt.NDArray[np.intp]


class Generation(Protocol):
    """What retention needs of a generation."""

    base_seq: int
    first_event_time: float
    last_event_time: float
    ids: IdArena

    def __len__(self) -> int: ...


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
    def capacity(self) -> int | None:
        """Documents per generation under retention by count (a generation is then sealed)."""
        limit = self.retention.max_documents
        return None if limit is None else -(-limit // GENERATIONS_PER_RETENTION)

    def note_event_times(self, times: npt.NDArray[np.float64]) -> None:
        if times.size:
            self.newest_event_time = max(self.newest_event_time, float(times.max()))

    def apply_retention(self) -> G | None:
        """Seal the newest generation if it is full (documents or id bytes) or spans enough time, then evict.

        Returns the generation sealed, if any.
        """
        newest = self.newest
        limit = self.retention.max_documents
        max_age = self.retention.max_age_seconds
        full = (self.capacity is not None and len(newest) >= self.capacity) or newest.ids.full
        aged = (
            max_age is not None
            and newest.last_event_time - newest.first_event_time >= max_age / GENERATIONS_PER_RETENTION
        )
        sealed = None
        if full or aged:
            sealed = newest
            self.items.append(self._open(self.next_seq, self.capacity))
        while len(self.items) > 1:
            oldest = self.items[0]
            too_many = limit is not None and len(self) - len(oldest) >= limit
            too_old = max_age is not None and oldest.last_event_time < self.newest_event_time - max_age
            if not (too_many or too_old):
                break
            self.evicted_documents += len(oldest)
            del self.items[0]
        return sealed

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
