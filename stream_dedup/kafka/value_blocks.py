"""Record values kept compressed in blocks of records read together, within a byte budget.

The texts a stage reads again (:mod:`stream_dedup.kafka.record_texts`) are
kept as their records' values. Compressed one by one, 1 KB of prose shrinks
to about 560 bytes, and each entry of a Python map costs about 170 more; so
a block holds the values of up to :data:`BLOCK_RECORDS` records added
together (a batch's, in partition and offset order; fewer past
:data:`BLOCK_BYTES` of them), compressed together,
and the least recently read blocks go first. A block never changes once
made, so a record costs one compression however the input is partitioned
(blocks by offset range, compressed again for every batch adding to them,
did fifty times the work on a topic of a thousand partitions). A record is
found by its group of 16 neighbouring offsets: the map holds one entry per
group (the blocks holding any of its offsets, usually one or two), not one
per record, which would cost a fifth of the memory. Reading one value
decompresses its block, about 20 µs, against the 2 ms of a fetch; the block
read last stays decompressed, since neighbours are often asked for together.

A block dropped for room goes to the disk spool, if the stage has one
(:mod:`stream_dedup.kafka.block_spool`), where the caller looks for a value
no longer in memory (:meth:`ValueBlocks.get_spooled`) before fetching it. It
is not brought back into memory: it stays on disk, read from there, until
the spool drops it in turn.

Blocks can be made elsewhere (:func:`pack_blocks`) and handed over whole
(:meth:`ValueBlocks.add_blocks`): the worker's signer processes compress the
texts they read, so that the process that holds the index does not.
"""

import struct
from array import array
from collections.abc import Iterable
from operator import itemgetter
from typing import NamedTuple

import zstandard

from stream_dedup.kafka.block_spool import BlockSpool
from stream_dedup.kafka.messages import pointer_of
from stream_dedup.kafka.sized_lru import SizedLru
from stream_dedup.lsh.generation import NO_SOURCE

#: Records per block: past 16, 1 KB values compress little better and a read decompresses more.
BLOCK_RECORDS = 16
#: A block is closed once its values reach this many bytes, so that reading one value of large
#: documents decompresses little more than that value (and the block kept decompressed stays small).
BLOCK_BYTES = 64 << 10
#: What a block takes besides its compressed bytes, and each of its records (measured with
#: tracemalloc): the block's slot in the LRU and its fields; the record's key, end and share of
#: the groups' map.
_BLOCK_OVERHEAD = 400
_RECORD_OVERHEAD = 16
#: zstd's fastest level: 16 KB of prose in about 50 µs, to under half its size.
_COMPRESSION_LEVEL = 1
#: A group is the key >> _GROUP_BITS: 16 neighbouring offsets of one partition.
_GROUP_BITS = 4
#: A spooled block starts with its number of records (then their keys, their ends, its data).
_SPOOLED_COUNT = struct.Struct("<I")


class ValueBlock(NamedTuple):
    """The values of some records, compressed together, and what to find each again."""

    #: Their keys (the pointer the index keeps for each record, :func:`~stream_dedup.kafka.messages.pointer_of`;
    #: a record without one, past 65,535 partitions or 2**48 offsets, is never asked for and not kept),
    #: in the order of the values.
    keys: "array[int]"
    #: Where each value ends in the decompressed data.
    ends: "array[int]"
    data: bytes


class ValueBlocks:
    """Values by (partition, offset), kept compressed; the least recently read blocks go first past ``budget`` bytes."""

    def __init__(self, budget: int, spool: BlockSpool | None = None) -> None:
        """``spool``: where blocks dropped for room go, to be read from there; without one they are gone."""
        self._blocks: SizedLru[int, ValueBlock] = SizedLru(budget, _block_bytes)
        self._spool = spool
        #: Group -> the numbers of the blocks holding records of it.
        self._groups: dict[int, tuple[int, ...]] = {}
        self._made = 0
        self._compressor = block_compressor()
        self._decompressor = zstandard.ZstdDecompressor()
        #: The block read last, decompressed (its number, or its data's own bytes when read from
        #: the spool; and the data): under BLOCK_BYTES and one value.
        self._last: tuple[int | bytes, bytes] = (-1, b"")

    def add(self, values: Iterable[tuple[int, int, bytes]]) -> None:
        """Keep each (partition, offset, value); a value held already stays as it is."""
        fresh: dict[int, bytes] = {}
        for partition, offset, value in values:
            key = pointer_of(partition, offset)
            if key != NO_SOURCE and not self._holds(key):
                fresh.setdefault(key, value)
        for block in pack_blocks(fresh.items(), self._compressor):
            self._keep(block)

    def add_blocks(self, blocks: Iterable[ValueBlock]) -> None:
        """Keep blocks made by :func:`pack_blocks`; one whose every value is held already is left out.

        One that holds some values held already is kept whole (those values
        are then held twice, read from either): that happens only when
        records are read again, after a rebalance.
        """
        for block in blocks:
            if not all(self._holds(key) for key in block.keys):
                self._keep(block)

    @property
    def memory_bytes(self) -> int:
        """What the blocks held in memory take, as the budget counts it."""
        return self._blocks.bytes

    def get(self, partition: int, offset: int) -> bytes | None:
        """The value kept in memory for (partition, offset), its block now the most recently read; else ``None``."""
        found = self._find(pointer_of(partition, offset))
        if found is None:
            return None
        number, i = found
        block = self._blocks.get(number)
        assert block is not None
        return self._value(number, block, i)

    def get_spooled(self, partition: int, offset: int) -> bytes | None:
        """The value the spool holds for (partition, offset), read from disk; ``None`` if none (or no spool)."""
        key = pointer_of(partition, offset)
        if self._spool is None or key == NO_SOURCE:
            return None
        for spooled in self._spool.blocks_of(key >> _GROUP_BITS):
            block = _unspooled(spooled)
            if key in block.keys:
                return self._value(block.data, block, block.keys.index(key))
        return None

    def _value(self, name: int | bytes, block: ValueBlock, i: int) -> bytes:
        """The ``i``-th value of ``block``, which is now the one read last (``name``: what tells it from others)."""
        if self._last[0] != name:
            self._last = (name, self._decompressor.decompress(block.data))
        return self._last[1][block.ends[i - 1] if i else 0 : block.ends[i]]

    def _holds(self, key: int) -> bool:
        # A key of a group no block holds is new: most of a fresh batch's, looked up no further.
        return key >> _GROUP_BITS in self._groups and self._find(key) is not None

    def _find(self, key: int) -> tuple[int, int] | None:
        """The number of the block holding ``key`` and its position there, or ``None``."""
        for number in self._groups.get(key >> _GROUP_BITS, ()):
            block = self._blocks.peek(number)
            assert block is not None, "a group names a block no longer held"
            if key in block.keys:
                return number, block.keys.index(key)
        return None

    def _keep(self, block: ValueBlock) -> None:
        number = self._made
        self._made += 1
        for group in {key >> _GROUP_BITS for key in block.keys}:
            self._groups[group] = (*self._groups.get(group, ()), number)
        for dropped_number, dropped in self._blocks.put(number, block):
            dropped_groups = {key >> _GROUP_BITS for key in dropped.keys}
            if self._spool is not None:
                self._spool.put(dropped_groups, _spooled(dropped))
            for group in dropped_groups:
                rest = tuple(n for n in self._groups[group] if n != dropped_number)
                if rest:
                    self._groups[group] = rest
                else:
                    del self._groups[group]


def pack_blocks(items: Iterable[tuple[int, bytes]], compressor: zstandard.ZstdCompressor) -> list[ValueBlock]:
    """Values by key (distinct), in blocks as :class:`ValueBlocks` keeps them.

    In key order, so that neighbours share a block (fewer blocks per group);
    a block closes at :data:`BLOCK_RECORDS` values or :data:`BLOCK_BYTES`.
    """
    blocks: list[ValueBlock] = []
    block: list[tuple[int, bytes]] = []
    size = 0
    for item in sorted(items, key=itemgetter(0)):
        block.append(item)
        size += len(item[1])
        if len(block) == BLOCK_RECORDS or size >= BLOCK_BYTES:
            blocks.append(_packed(block, compressor))
            block, size = [], 0
    if block:
        blocks.append(_packed(block, compressor))
    return blocks


def block_compressor() -> zstandard.ZstdCompressor:
    """What compresses blocks (one per thread: a compressor is not to be shared by threads at once)."""
    return zstandard.ZstdCompressor(level=_COMPRESSION_LEVEL)


def _packed(items: list[tuple[int, bytes]], compressor: zstandard.ZstdCompressor) -> ValueBlock:
    ends, end = array("Q"), 0
    for _, value in items:
        end += len(value)
        ends.append(end)
    compressed = compressor.compress(b"".join(value for _, value in items))
    # Copied to its own size: python-zstandard's result keeps the allocation of the
    # worst case (more than the input), which would make the budget a third of the memory.
    return ValueBlock(array("Q", (key for key, _ in items)), ends, bytes(memoryview(compressed)))


def _block_bytes(block: ValueBlock) -> int:
    return len(block.data) + _BLOCK_OVERHEAD + len(block.keys) * _RECORD_OVERHEAD


def _spooled(block: ValueBlock) -> bytes:
    """``block`` as the spool keeps it (native byte order: it is read back by the process that wrote it)."""
    return _SPOOLED_COUNT.pack(len(block.keys)) + block.keys.tobytes() + block.ends.tobytes() + block.data


def _unspooled(spooled: bytes) -> ValueBlock:
    (count,) = _SPOOLED_COUNT.unpack_from(spooled)
    keys, ends = array("Q"), array("Q")
    start = _SPOOLED_COUNT.size
    keys.frombytes(spooled[start : start + 8 * count])
    ends.frombytes(spooled[start + 8 * count : start + 16 * count])
    return ValueBlock(keys, ends, spooled[start + 16 * count :])
