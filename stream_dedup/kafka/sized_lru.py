"""A least-recently-used map bounded by the bytes its entries take, for records and texts read again.

Both caches of input records read again (:mod:`stream_dedup.kafka.record_lookup`
and :mod:`stream_dedup.kafka.record_texts`) keep what they were given until a
byte budget is spent, then let go of what was asked for least recently: a
match is often matched again, and an old one seldom.
"""

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SizedLru(Generic[K, V]):
    """Values by key, the least recently used dropped once their sizes sum past ``budget`` bytes.

    ``size_of`` says what one entry takes. The entry put last is always kept,
    whatever its size: a cache that cannot hold the record just fetched would
    fetch it again at once.
    """

    def __init__(self, budget: int, size_of: Callable[[V], int]) -> None:
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._size_of = size_of
        self._budget = budget
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        """The value of ``key``, now the most recently used; ``None`` if not held."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def peek(self, key: K) -> V | None:
        """The value of ``key``, its use unchanged; ``None`` if not held."""
        return self._entries.get(key)

    def put(self, key: K, value: V) -> list[tuple[K, V]]:
        """Hold ``value`` under ``key`` (a key held already keeps its value); the entries dropped to make room."""
        if key in self._entries:
            return []
        self._entries[key] = value
        self.bytes += self._size_of(value)
        dropped = []
        while self.bytes > self._budget and len(self._entries) > 1:
            oldest = self._entries.popitem(last=False)
            self.bytes -= self._size_of(oldest[1])
            dropped.append(oldest)
        return dropped
