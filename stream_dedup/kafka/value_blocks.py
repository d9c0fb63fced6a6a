"""Record values kept compressed in blocks of neighbouring offsets, within a byte budget.

The texts a stage reads again (:mod:`stream_dedup.kafka.record_texts`) are
kept as their records' values. Compressed one by one, 1 KB of prose shrinks
to about 560 bytes, and each entry of a Python map costs about 170 more; so a
block holds the values of up to :data:`BLOCK_OFFSETS` neighbouring offsets of
one partition, compressed together (about 500 bytes a value, the map's cost
shared). A batch's records arrive in offset order within each partition, so
its values fill whole blocks; a value added to a block held already (a batch
boundary, a record fetched again) makes that block compressed again with it.
Reading one value decompresses its block: about 20 µs, against the 2 ms of a
fetch.
"""

import struct
from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

import zstandard

from stream_dedup.kafka.sized_lru import SizedLru

#: Offsets per block (a power of two: a block is ``offset >> BLOCK_BITS``).
BLOCK_BITS = 4
_IN_BLOCK = (1 << BLOCK_BITS) - 1
#: What a block takes besides its compressed bytes (measured): its slot in the map, its key, its fields.
_BLOCK_OVERHEAD = 400
#: zstd's fastest level: 16 KB of prose in about 50 µs, to under half its size.
_COMPRESSION_LEVEL = 1
_END = struct.Struct("<I")


class _Block(NamedTuple):
    """Values of some offsets of one block, in offset order, compressed together."""

    #: Bit ``offset & _IN_BLOCK`` set for each offset held.
    present: int
    #: Where each value ends in the decompressed data (u32 each, little-endian).
    ends: bytes
    data: bytes


class ValueBlocks:
    """Values by (partition, offset), kept compressed; the least recently read blocks go first past ``budget`` bytes."""

    def __init__(self, budget: int) -> None:
        self._blocks: SizedLru[tuple[int, int], _Block] = SizedLru(
            budget, lambda block: len(block.data) + _BLOCK_OVERHEAD
        )
        self._compressor = zstandard.ZstdCompressor(level=_COMPRESSION_LEVEL)
        self._decompressor = zstandard.ZstdDecompressor()
        #: The block read last, decompressed: values asked for in offset order are often neighbours.
        self._last: tuple[_Block | None, bytes] = (None, b"")

    def add(self, values: Iterable[tuple[int, int, bytes]]) -> None:
        """Keep each (partition, offset, value); a value held already stays as it is."""
        by_block: defaultdict[tuple[int, int], dict[int, bytes]] = defaultdict(dict)
        for partition, offset, value in values:
            by_block[(partition, offset >> BLOCK_BITS)].setdefault(offset & _IN_BLOCK, value)
        for key, added in by_block.items():
            held = self._blocks.pop(key)
            if held is not None:
                added.update(self._values(held))
            self._blocks.put(key, self._block(added))

    def get(self, partition: int, offset: int) -> bytes | None:
        """The value kept for (partition, offset), its block now the most recently read; ``None`` if not kept."""
        block = self._blocks.get((partition, offset >> BLOCK_BITS))
        bit = offset & _IN_BLOCK
        if block is None or not block.present >> bit & 1:
            return None
        i = (block.present & ((1 << bit) - 1)).bit_count()
        start = _END.unpack_from(block.ends, 4 * (i - 1))[0] if i else 0
        return self._data(block)[start : _END.unpack_from(block.ends, 4 * i)[0]]

    def _block(self, values: dict[int, bytes]) -> _Block:
        """``values`` (by offset within the block) as one block."""
        present, ends, end = 0, bytearray(), 0
        for bit in sorted(values):
            present |= 1 << bit
            end += len(values[bit])
            ends += _END.pack(end)
        compressed = self._compressor.compress(b"".join(values[bit] for bit in sorted(values)))
        # Copied to its own size: python-zstandard's result keeps the allocation of the
        # worst case (more than the input), which would make the budget a third of the memory.
        return _Block(present, bytes(ends), bytes(memoryview(compressed)))

    def _data(self, block: _Block) -> bytes:
        """``block``'s values, decompressed."""
        last, data = self._last
        if last is not block:
            data = self._decompressor.decompress(block.data)
            self._last = (block, data)
        return data

    def _values(self, block: _Block) -> dict[int, bytes]:
        """The values of ``block``, by offset within it."""
        data = self._data(block)
        bits = [bit for bit in range(_IN_BLOCK + 1) if block.present >> bit & 1]
        ends = [end for (end,) in _END.iter_unpack(block.ends)]
        starts = [0, *ends[:-1]]
        return {bit: data[start:end] for bit, start, end in zip(bits, starts, ends, strict=True)}
