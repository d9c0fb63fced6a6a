"""Blocks of texts the text cache let go, kept on local disk within a byte budget: a second tier under it.

The texts a stage reads again (:mod:`stream_dedup.kafka.record_texts`) are
held in memory, compressed in blocks (:mod:`stream_dedup.kafka.value_blocks`),
as many as ``text_cache_mb`` holds: at 1 KB documents, about the last 60k.
The earlier half of a pair near the threshold is often older than that, and
fetching it from Kafka again costs 1.6-1.8 ms of the stage's CPU (most of it
kafka-python's) and a round trip. A block the memory lets go comes here
instead: reading it back is one ``pread`` of local disk (tens of µs).

What is spooled is a copy of what the input topic holds, private to the
process that wrote it. Its files are made in a directory (the snapshot
directory's volume, which the deploy sizes) and unlinked at once, so nothing
of them outlives the process, a kill -9 included, and no other process (a
standby on the same volume) ever sees them. A restarted stage starts with an
empty spool and fetches until it has spooled again.

The budget is a ring of segments: blocks are appended to the newest, and when
the next would pass the budget the oldest segment is closed (its disk freed)
and the blocks it held are forgotten. Each block is written with its xxh64
and checked on every read: one that does not read back as written (a disk
error) is not used, and its records are fetched from Kafka. A write that
fails (a full disk) turns the spool off with a warning, for
:data:`RETRY_SECONDS`: the stage goes on, fetching, and then tries again (a
disk that filled for a while is not given up for the process's life). A
block is found by the groups of records it holds (whatever numbers its user
gives them, :meth:`BlockSpool.blocks_of`); the map from
groups to blocks, and each segment's list of its groups (so that dropping a
segment visits only those), is all the spool keeps in memory, about 13
bytes a record.
"""

import logging
import math
import os
import tempfile
import time
from array import array
from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

import xxhash

log = logging.getLogger(__name__)

#: The budget's share of one segment: a dropped segment takes an eighth of the spooled blocks with it.
_SEGMENTS = 8
#: A segment is never smaller (a small budget is one or a few segments).
_MIN_SEGMENT_BYTES = 1 << 20
#: What precedes each block on disk: its xxh64.
_CHECKSUM_BYTES = 8
#: How long a spool whose write failed stays off before it tries again.
RETRY_SECONDS = 300.0


class BlockSpool:
    """Byte blocks on local disk, found by group, the oldest dropped once they take ``budget`` bytes.

    Example::

        spool = BlockSpool("snapshots", 1 << 30)
        spool.put([group], block)
        [block] = spool.blocks_of(group)
    """

    def __init__(self, directory: str, budget: int, clock: Callable[[], float] = time.monotonic) -> None:
        """No file is made before the first block: a stage that never spools costs no disk."""
        self._directory = directory
        self._segment_bytes = max(budget // _SEGMENTS, _MIN_SEGMENT_BYTES)
        self._segments_kept = max(budget // self._segment_bytes, 1)
        #: Segment number -> its file; a segment holds the stream of blocks from number * _segment_bytes on.
        self._files: dict[int, BinaryIO] = {}
        #: Where the next block goes in the stream of every block written (segments never reuse positions).
        self._end = 0
        #: Group -> (start, length) of each block holding some of it, flattened: (start, length, start, length...).
        self._groups: dict[int, tuple[int, ...]] = {}
        #: Segment number -> the groups of its blocks: dropping a segment visits those, not every group.
        self._segment_groups: dict[int, array[int]] = {}
        #: When a spool turned off by a failed write tries again (``clock`` time).
        self._off_until = -math.inf
        self._clock = clock

    @property
    def disk_bytes(self) -> int:
        """Disk the spool's files take now (the segments open, the newest up to its end)."""
        if not self._files:
            return 0
        return (len(self._files) - 1) * self._segment_bytes + self._end - max(self._files) * self._segment_bytes

    def put(self, groups: Iterable[int], block: bytes) -> None:
        """Keep ``block``, found again by any of ``groups``; a block larger than a segment is not kept."""
        stored = xxhash.xxh64_digest(block) + block
        if len(stored) > self._segment_bytes or self._clock() < self._off_until:
            return
        if self._end % self._segment_bytes + len(stored) > self._segment_bytes:
            self._end += self._segment_bytes - self._end % self._segment_bytes
        start = self._end
        try:
            self._write(start, stored)
        except OSError as error:
            log.warning(
                "cannot spool texts to %s (%r): texts no longer in memory are fetched from Kafka again; "
                "spooling tries again in %.0f s",
                self._directory,
                error,
                RETRY_SECONDS,
            )
            self.close()
            self._off_until = self._clock() + RETRY_SECONDS
            return
        self._end += len(stored)
        held = self._segment_groups.setdefault(start // self._segment_bytes, array("Q"))
        for group in set(groups):
            self._groups[group] = (*self._groups.get(group, ()), start, len(stored))
            held.append(group)

    def blocks_of(self, group: int) -> Iterator[bytes]:
        """The blocks spooled with ``group``, oldest first, each as put; one that does not read back so is left out."""
        where = self._groups.get(group, ())
        for i in range(0, len(where), 2):
            block = self._read(where[i], where[i + 1])
            if block is not None:
                yield block

    def close(self) -> None:
        """Close (and so free) every file; the spool holds nothing after."""
        for file in self._files.values():
            file.close()
        self._files.clear()
        self._groups.clear()
        self._segment_groups.clear()

    def _write(self, start: int, stored: bytes) -> None:
        segment = start // self._segment_bytes
        if segment not in self._files:
            os.makedirs(self._directory, exist_ok=True)
            # Open for the segment's life (closed by _drop or close), not one block's.
            self._files[segment] = tempfile.TemporaryFile(dir=self._directory, prefix=".text-spool-")  # noqa: SIM115
            if len(self._files) > self._segments_kept:
                self._drop(min(self._files))
        # A disk filling up writes what fits and says nothing: only writing the rest says why (ENOSPC).
        # Stopped there, the warning said "wrote 398 of 3561 bytes", and not that the disk was full.
        written = 0
        while written < len(stored):
            wrote = os.pwrite(self._files[segment].fileno(), stored[written:], start % self._segment_bytes + written)
            if not wrote:
                raise OSError(f"wrote {written} of {len(stored)} bytes")
            written += wrote

    def _drop(self, segment: int) -> None:
        """Close the oldest segment, and forget the blocks it held."""
        self._files.pop(segment).close()
        first_kept = (segment + 1) * self._segment_bytes
        for group in set(self._segment_groups.pop(segment, ())):
            where = self._groups[group]
            kept = tuple(x for i in range(0, len(where), 2) if where[i] >= first_kept for x in where[i : i + 2])
            if kept:
                self._groups[group] = kept
            else:
                del self._groups[group]

    def _read(self, start: int, length: int) -> bytes | None:
        file = self._files.get(start // self._segment_bytes)
        if file is None:
            return None
        try:
            stored = os.pread(file.fileno(), length, start % self._segment_bytes)
        except OSError as error:
            log.warning("cannot read spooled texts back (%r): their records are fetched from Kafka", error)
            return None
        block = stored[_CHECKSUM_BYTES:]
        if len(stored) != length or xxhash.xxh64_digest(block) != stored[:_CHECKSUM_BYTES]:
            log.warning("a spooled block of texts read back changed: its records are fetched from Kafka")
            return None
        return block
