"""Choosing the table layout of the Hamming index (Manku, Jain and Das Sarma, WWW 2007).

To find every stored 64-bit fingerprint within Hamming distance ``k`` of a
query, split the 64 bit positions into ``B > k`` blocks. At most ``k`` blocks
hold a differing bit, so by pigeonhole some ``B - k`` blocks agree exactly.
One table per choice of ``B - k`` blocks, keyed on those blocks' bits, is
therefore certain to file every near fingerprint under the query's key:
``t = C(B, k)`` tables with keys of ``p ~ 64 * (B - k) / B`` bits.

Levels refine this: the ``k`` blocks left over after a first choice still hold
all the differences, so they can be split again into ``B2`` blocks of which
``B2 - k`` agree, and so on. ``levels=(4, 4)`` at ``k = 3`` is the paper's
example: ``4 * 4 = 16`` tables keyed on ``16 + 12 = 28`` bits.

Among ``N`` random fingerprints, a table returns about ``N / 2**p`` whose key
matches, each checked by one XOR and popcount; a query costs one search per
table plus those checks. Memory is what limits ``t``: every table stores each
document once (a uint32 document number and the key, 2 bytes up to 16 key
bits, else 4 bytes). :func:`choose_layout` takes the layout with the least
query work whose tables fit a byte budget per document. At ``k = 3`` and the
default 32 bytes, only ``(4,)`` fits (4 tables x 6 bytes, 16-bit keys:
``4 * N / 65536`` probes, 61 at a million documents); ``(5,)`` would need 80
bytes for 10 tables and probe ~0.2.

Keys longer than 32 bits are cut to their top 32 bits: matches are checked on
the full fingerprint anyway, so this costs only probes (``N / 2**32``).
"""

import functools
import itertools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from stream_dedup.errors import ConfigError
from stream_dedup.text.hashing import U64, Uint64Array

FINGERPRINT_BITS = 64
#: Largest distance the index supports: beyond it a quarter of the bits differ and SimHash says little.
MAX_DISTANCE = 16
#: Stored key bits at most (a uint32 per entry).
MAX_KEY_BITS = 32
#: Bytes of a document number in a table.
DOC_BYTES = 4

KeyArray = npt.NDArray[np.uint16] | npt.NDArray[np.uint32]


@dataclass(frozen=True)
class HammingLayout:
    """The tables of a Hamming index: ``levels[i]`` blocks at level ``i``, distance ``max_distance``.

    Attributes:
        max_distance: ``k``, the largest Hamming distance the index must find.
        levels: blocks per level, each greater than ``k``; ``(4,)`` is one
            level of 4 blocks.
    """

    max_distance: int
    levels: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.max_distance, int) or not 0 <= self.max_distance <= MAX_DISTANCE:
            raise ConfigError(
                "max_distance", f"must be a whole number from 0 to {MAX_DISTANCE}, got {self.max_distance!r}"
            )
        if not self.levels or any(blocks <= self.max_distance for blocks in self.levels):
            raise ConfigError(
                "hamming_levels",
                f"every level needs more than max_distance={self.max_distance} blocks, got {self.levels!r}",
            )
        _key_positions(self.max_distance, self.levels)  # raises if some level runs out of bits

    @property
    def tables(self) -> int:
        return len(_key_positions(self.max_distance, self.levels))

    @property
    def key_bits(self) -> tuple[int, ...]:
        """Bits of each table's key as stored (at most 32)."""
        return tuple(min(len(p), MAX_KEY_BITS) for p in _key_positions(self.max_distance, self.levels))

    @property
    def table_bytes(self) -> int:
        """Bytes every document costs in the tables (document number and key, per table)."""
        return sum(DOC_BYTES + _key_dtype(bits).itemsize for bits in self.key_bits)

    def expected_probes(self, documents: int) -> float:
        """Stored fingerprints a query checks, on average, among ``documents`` random ones."""
        return float(sum(documents / 2.0**bits for bits in self.key_bits))

    def keys(self, fingerprints: Uint64Array) -> list[KeyArray]:
        """Each table's key of each fingerprint: ``tables`` arrays of ``(n,)`` uint16 or uint32."""
        out: list[KeyArray] = []
        for positions in _key_positions(self.max_distance, self.levels):
            key = np.zeros(fingerprints.shape, dtype=U64)
            for start, width in _runs(positions):
                key <<= U64(width)
                key |= (fingerprints >> U64(start)) & U64((1 << width) - 1)
            if len(positions) > MAX_KEY_BITS:
                key >>= U64(len(positions) - MAX_KEY_BITS)
            out.append(key.astype(np.uint16) if len(positions) <= 16 else key.astype(np.uint32))
        return out


def choose_layout(
    max_distance: int = 3, expected_documents: int = 1_000_000, max_table_bytes: int = 32
) -> HammingLayout:
    """The layout with the least work per query whose tables cost at most ``max_table_bytes`` per document.

    Work is ``expected_probes(expected_documents) + tables``: one search per
    table plus one check per probed fingerprint. The 32-byte default leaves
    room, within 64 bytes per document, for the 8-byte fingerprint and the id.

    >>> choose_layout(3, 1_000_000).levels
    (4,)
    """
    if expected_documents < 1:
        raise ConfigError("expected_documents", f"must be at least 1, got {expected_documents}")
    smallest = HammingLayout(max_distance, (max_distance + 1,))  # also validates max_distance
    max_tables = max_table_bytes // (DOC_BYTES + np.dtype(np.uint16).itemsize)
    fitting = [layout for layout in _candidates(max_distance, max_tables) if layout.table_bytes <= max_table_bytes]
    if not fitting:
        raise ConfigError(
            "max_table_bytes",
            f"max_distance={max_distance} needs at least {smallest.table_bytes} bytes of tables per document, "
            f"got {max_table_bytes}; raise it or lower max_distance",
        )
    return min(fitting, key=lambda layout: (layout.expected_probes(expected_documents) + layout.tables, layout.tables))


def _candidates(max_distance: int, max_tables: int) -> list[HammingLayout]:
    """One- and two-level layouts with a few more blocks than ``max_distance``, of ``max_tables`` tables at most.

    Layouts out of bits are skipped, and those of too many tables are never
    built: enumerating the keys of ``(16, 16)`` at ``k = 12`` (3.3 million
    tables) took seconds, and ``choose_layout`` at ``k = 16`` minutes.
    """
    sizes = range(max_distance + 1, max_distance + 6)
    shapes = [(b,) for b in sizes] + list(itertools.product(sizes[:4], repeat=2))
    layouts = []
    for levels in shapes:
        if math.prod(math.comb(blocks, max_distance) for blocks in levels) > max_tables:
            continue
        try:
            layouts.append(HammingLayout(max_distance, levels))
        except ConfigError:
            continue
    return layouts


@functools.cache
def _key_positions(max_distance: int, levels: tuple[int, ...]) -> tuple[tuple[int, ...], ...]:
    """Bit positions (descending) each table keys on; raises if a level has fewer bits than blocks."""
    return tuple(tuple(sorted(p, reverse=True)) for p in _tables(list(range(FINGERPRINT_BITS)), levels, max_distance))


def _tables(positions: list[int], levels: tuple[int, ...], max_distance: int) -> list[list[int]]:
    if not levels:
        return [[]]
    count = levels[0]
    if len(positions) < count:
        raise ConfigError("hamming_levels", f"level of {count} blocks has only {len(positions)} bits left to split")
    # Near-equal contiguous blocks: tables then have keys of near-equal length.
    edges = np.linspace(0, len(positions), count + 1).round().astype(int)
    blocks = [positions[a:b] for a, b in itertools.pairwise(edges)]
    tables: list[list[int]] = []
    for agreeing in itertools.combinations(range(count), count - max_distance):
        key = [bit for i in agreeing for bit in blocks[i]]
        rest = [bit for i in range(count) if i not in agreeing for bit in blocks[i]]
        tables.extend(key + deeper for deeper in _tables(rest, levels[1:], max_distance))
    return tables


def _runs(positions: tuple[int, ...]) -> list[tuple[int, int]]:
    """``(lowest bit, width)`` of each run of consecutive positions, highest run first."""
    runs: list[tuple[int, int]] = []
    for bit in positions:
        if runs and runs[-1][0] == bit + 1:
            runs[-1] = (bit, runs[-1][1] + 1)
        else:
            runs.append((bit, 1))
    return runs


def _key_dtype(bits: int) -> np.dtype[np.uint16] | np.dtype[np.uint32]:
    return np.dtype(np.uint16) if bits <= 16 else np.dtype(np.uint32)
