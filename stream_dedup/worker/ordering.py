"""Event-time order across partitions: which fetched record is judged next.

Kafka orders records within a partition only. Which near-copy of a pair is
"the original" must not depend on how fetches from different partitions
happened to interleave (after a restart, one partition can be fetched far
ahead of the others), so records are judged in the order of the key

    (timestamp, partition, offset)

over the records at the head of each partition's buffer, as Kafka Streams
does (``PartitionGroup``, ``max.task.idle.ms``, KIP-353 and KIP-695):

- a partition with known lag (its end offset lies past its fetch position)
  and nothing buffered *starves* the merge: nothing is taken until it
  delivers, or until it has held records of other partitions back for
  ``max_idle_seconds``, after which the others go on without it. The idle
  time counts only while some record is buffered: while nothing is, a
  starving partition holds nobody back (after a restart or a broker's
  return every partition starves until the first fetch, which can take
  longer than the idle time, and the first partition to deliver must still
  wait for the others);
- a caught-up partition (nothing past its position) holds nobody back.

So a backlog (restart, failover, catch-up) is judged in the same order
whatever the timing of the fetches, provided each lagging partition delivers
within the idle time. Records arriving at the live edge are judged as they
arrive: a record produced later with an older timestamp is not waited for.

Each partition's buffer holds at most ``buffer_limit`` records, and records
of at most ``byte_limit`` bytes (keys and values) but for its first record,
which is always taken. Without a bound, a partition far ahead in event time
(a live partition beside one replaying a week of backlog) would be fetched
into memory without end while it waits for the older ones; a count alone
lets 2,000 records of 1 MB each take 2 GB a partition. A record that finds
its partition's buffer full is refused, with every later one of that partition: :meth:`EventTimeMerge.add`
says where each such partition must be fetched again from. The partition
then counts as fetched up to there only, and as lagging (the records refused
exist) until they come again. A full partition has records buffered, so it
never starves the merge: the bound cannot deadlock it, and the order taken is
the one an unbounded merge would take.

The merge is pure: the caller feeds it records, fetch positions and end
offsets, and the clock, and seeks the consumer back where records were
refused. Records taken are a prefix of the merged order; records still
buffered were never judged, and after a crash they are simply fetched again
from the committed offsets.

Example:
    >>> from types import SimpleNamespace as Record
    >>> merge = EventTimeMerge(max_idle_seconds=2.0, buffer_limit=1)
    >>> merge.assign({0: 0, 1: 0})
    >>> merge.note_ends({0: 2, 1: 1})
    >>> merge.add([Record(timestamp=5, partition=0, offset=0), Record(timestamp=6, partition=0, offset=1)])
    {0: 1}
    >>> merge.take(100, now=0.0)  # partition 1 lags with nothing buffered: wait
    []
    >>> merge.add([Record(timestamp=3, partition=1, offset=0)])
    {}
    >>> [(r.partition, r.offset) for r in merge.take(100, now=0.1)]
    [(1, 0), (0, 0)]
    >>> merge.add([Record(timestamp=6, partition=0, offset=1)])  # fetched again from offset 1
    {}
    >>> [(r.partition, r.offset) for r in merge.take(100, now=0.2)]
    [(0, 1)]
"""

import heapq
from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any


def order_key(record: Any) -> tuple[int, int, int]:
    """The merge order of a record: ``(timestamp, partition, offset)``."""
    return (record.timestamp, record.partition, record.offset)


def record_bytes(record: Any) -> int:
    """What a fetched record's key and value take, as a partition's byte limit counts them."""
    return len(record.key or b"") + len(record.value or b"")


class EventTimeMerge:
    """Per-partition buffers of fetched records, taken in event-time order.

    Args:
        max_idle_seconds: how long a lagging partition with nothing buffered
            may hold the others back (``max_partition_idle_ms``); 0 never waits.
        buffer_limit: records a partition may hold fetched and not yet taken
            (``max_partition_buffered_records``); at least 1.
        byte_limit: bytes of keys and values a partition may hold, past its
            first record (``max_partition_buffered_bytes``); ``None``: no limit.
    """

    def __init__(self, max_idle_seconds: float, buffer_limit: int, byte_limit: int | None = None) -> None:
        if max_idle_seconds < 0:
            raise ValueError(f"max_idle_seconds must not be negative, got {max_idle_seconds}")
        if buffer_limit < 1:
            raise ValueError(f"buffer_limit must be at least 1, got {buffer_limit}")
        self.max_idle_seconds = max_idle_seconds
        self.buffer_limit = buffer_limit
        self.byte_limit = byte_limit
        self._buffers: dict[int, deque[Any]] = {}
        #: Partition -> bytes of the records its buffer holds (counted only under a byte limit).
        self._bytes: dict[int, int] = {}
        #: Partition -> next offset the consumer will fetch (past everything buffered).
        self._positions: dict[int, int] = {}
        #: Partition -> end offset (the last stable offset), as last learned.
        self._ends: dict[int, int] = {}
        #: Partition -> when it started starving.
        self._starving_since: dict[int, float] = {}
        #: When the last call to take() decided to wait, if it did.
        self._waiting_since: float | None = None
        self.waited_seconds = 0.0

    def assign(self, positions: dict[int, int]) -> None:
        """Start over with these partitions, each to be fetched from ``positions[p]``; drops every buffer."""
        self._buffers = {p: deque() for p in positions}
        self._bytes = dict.fromkeys(positions, 0)
        self._positions = dict(positions)
        self._ends = {}
        self._starving_since = {}
        self._waiting_since = None

    @property
    def partitions(self) -> list[int]:
        return sorted(self._buffers)

    def buffered(self) -> dict[int, int]:
        """Records fetched and not yet taken, by partition: each at most :attr:`buffer_limit`."""
        return {partition: len(buffer) for partition, buffer in self._buffers.items()}

    def buffered_bytes(self) -> dict[int, int]:
        """Bytes of the records fetched and not yet taken, by partition (all 0 without a :attr:`byte_limit`)."""
        return dict(self._bytes)

    def add(self, records: Iterable[Any]) -> dict[int, int]:
        """Append fetched records (each partition's in offset order) to their partitions' buffers.

        Returns the partitions whose buffers filled up, each with the offset
        of its first record refused: the consumer must be sought back there,
        or the records refused are lost (the next :meth:`note_positions`
        would count them as fetched).
        """
        refused: dict[int, int] = {}
        byte_limit = self.byte_limit
        for record in records:
            partition = record.partition
            buffer = self._buffers[partition]
            if buffer and record.offset <= buffer[-1].offset:
                raise ValueError(f"partition {partition}: offset {record.offset} fetched out of order")
            size = 0 if byte_limit is None else record_bytes(record)
            if (
                partition in refused
                or len(buffer) >= self.buffer_limit
                or (byte_limit is not None and buffer and self._bytes[partition] + size > byte_limit)
            ):
                refused.setdefault(partition, record.offset)
                self._positions[partition] = refused[partition]
                # The records refused exist: the partition lags until they are fetched again.
                self._ends[partition] = max(self._ends.get(partition, 0), record.offset + 1)
                continue
            buffer.append(record)
            self._bytes[partition] += size
            self._positions[partition] = max(self._positions[partition], record.offset + 1)
        return refused

    def note_positions(self, positions: dict[int, int]) -> None:
        """The consumer's fetch positions: they can pass what was buffered (transaction markers, aborted records)."""
        for partition, position in positions.items():
            if partition in self._positions:
                self._positions[partition] = max(self._positions[partition], position)

    def note_ends(self, ends: dict[int, int]) -> None:
        """End offsets of partitions, as the broker last reported them."""
        for partition, end in ends.items():
            if partition in self._buffers:
                self._ends[partition] = end

    def unknown_or_caught_up(self) -> list[int]:
        """Partitions whose lag is unknown or zero: those whose end offset is worth asking for again.

        Buffered ones too: a partition's buffer can run dry in the middle of a
        :meth:`take`, which then needs to know whether more of it is on the way.
        """
        return [p for p in self._buffers if not self._lagging(p)]

    def starving(self) -> list[int]:
        """Partitions with known lag and nothing buffered."""
        return [p for p, buffer in self._buffers.items() if not buffer and self._lagging(p)]

    def take(self, limit: int, now: float) -> list[Any]:
        """Up to ``limit`` records, the smallest ``(timestamp, partition, offset)`` first.

        Stops early at a partition that starves within its idle time: the
        records after that point might not be next. ``now`` is a monotonic
        clock in seconds; the time between a call that waited and the next
        call is added to :attr:`waited_seconds`.
        """
        if self._waiting_since is not None:
            self.waited_seconds += max(0.0, now - self._waiting_since)
            self._waiting_since = None
        taken: list[Any] = []
        if self._must_wait(now):
            self._waiting_since = now
            return taken
        # The partitions' heads in a heap. Whether to wait can change only when a
        # buffer runs empty, so it is asked again only then, not once per record.
        heads = [(order_key(buffer[0]), partition) for partition, buffer in self._buffers.items() if buffer]
        heapq.heapify(heads)
        while heads and len(taken) < limit:
            _, partition = heapq.heappop(heads)
            buffer = self._buffers[partition]
            record = buffer.popleft()
            taken.append(record)
            if self.byte_limit is not None:
                self._bytes[partition] -= record_bytes(record)
            if buffer:
                heapq.heappush(heads, (order_key(buffer[0]), partition))
            elif self._must_wait(now):
                self._waiting_since = now
                break
        return taken

    def unread(self, records: Sequence[Any]) -> None:
        """Put back records just taken (a prefix of the order), so that they are taken again next."""
        for record in reversed(records):
            self._buffers[record.partition].appendleft(record)
            if self.byte_limit is not None:
                self._bytes[record.partition] += record_bytes(record)

    def _lagging(self, partition: int) -> bool:
        end = self._ends.get(partition)
        return end is not None and end > self._positions[partition]

    def _must_wait(self, now: float) -> bool:
        """Whether a partition starves within its idle time; keeps each partition's starving clock.

        A clock runs only while records wait: with every buffer empty there is
        nothing to take and nobody held back, and the clocks start again when
        the first records come.
        """
        starving = set(self.starving()) if any(self._buffers.values()) else set()
        for partition in list(self._starving_since):
            if partition not in starving:
                del self._starving_since[partition]
        for partition in starving:
            self._starving_since.setdefault(partition, now)
        return any(now - since < self.max_idle_seconds for since in self._starving_since.values())
