"""Distinct shingle sets kept for exact verification, as flat ragged arrays; set sizes.

Exact Jaccard needs each document's set of shingles. A set is stored as the
sorted distinct high 32 bits of its shingle hashes (4 bytes a shingle: two
different shingles of one pair collide with probability about
``(|A| + |B|)**2 / 2**33``, negligible), all sets of a batch or generation back to
back in one ``uint32`` array with cumulative ``ends``: no Python object per
document.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

import numpy as np
import numpy.typing as npt

from stream_dedup.text.distinct_pieces import whole_chunks
from stream_dedup.text.hashing import U64
from stream_dedup.text.shingles import ShingleChunk, Shingling, shingle_chunks

IntArray = npt.NDArray[np.intp]

#: Values (of both sides) per round of :func:`jaccard_of_pairs`: its tagged copy (8 bytes a value, 2 MB)
#: and the round's other arrays then stay within the CPU's caches and below glibc's mmap threshold, so
#: that no round pays page faults for fresh memory. At once, the 768k pairs a batch of 4,096 templated
#: listings settles by text took 6x as long; in rounds of 1M values, twice as long as in rounds of 256k.
_VALUES_PER_ROUND = 1 << 18
#: Sets longer than this on average are copied one slice each by :meth:`ShingleSets.take` (a Python
#: step per set, about 0.2 µs); shorter ones by one gather over all their values (about 4 ns a value).
_SLICED_SET_LENGTH = 64


@dataclass(frozen=True)
class ShingleSets:
    """Sets ``values[ends[i-1]:ends[i]]`` (sorted, distinct) for ``i`` in ``range(len(ends))``."""

    values: npt.NDArray[np.uint32]
    ends: npt.NDArray[np.int64]

    def __len__(self) -> int:
        return int(self.ends.size)

    @property
    def lengths(self) -> npt.NDArray[np.int64]:
        return np.diff(self.ends, prepend=0)

    @classmethod
    def empty(cls) -> "ShingleSets":
        """No sets at all."""
        return cls(np.empty(0, np.uint32), np.empty(0, np.int64))

    @classmethod
    def of_chunk(cls, chunk: ShingleChunk) -> "ShingleSets":
        """The distinct shingles of every document of ``chunk``, in the chunk's row order."""
        high = np.sort((chunk.hashes >> U64(32)).astype(np.uint32), axis=1)
        keep = np.arange(high.shape[1]) < chunk.counts[:, None]
        keep[:, 1:] &= high[:, 1:] != high[:, :-1]
        return cls(high[keep], np.cumsum(np.count_nonzero(keep, axis=1)))

    @classmethod
    def of_texts(cls, texts: Sequence[str], shingling: Shingling, seed: int) -> "ShingleSets":
        """The distinct shingles of normalised ``texts``, in order: the sets signing them would keep."""
        chunks = list(whole_chunks(shingle_chunks(texts, shingling, seed)))
        sets = cls.concat([cls.of_chunk(chunk) for chunk in chunks])
        rows = np.concatenate([chunk.rows for chunk in chunks]) if chunks else np.empty(0, np.intp)
        return sets.take(np.argsort(rows))

    @classmethod
    def concat(cls, parts: Sequence["ShingleSets"]) -> "ShingleSets":
        offsets = np.cumsum([0] + [int(p.ends[-1]) if len(p) else 0 for p in parts[:-1]])
        return cls(
            np.concatenate([p.values for p in parts]) if parts else np.empty(0, np.uint32),
            np.concatenate([p.ends + o for p, o in zip(parts, offsets, strict=True)])
            if parts
            else np.empty(0, np.int64),
        )

    def take(self, which: IntArray) -> "ShingleSets":
        """The sets at positions ``which`` (any order, repeats allowed)."""
        lengths = self.lengths[which]
        starts = self.ends[which] - lengths
        ends = np.cumsum(lengths)
        total = int(ends[-1]) if ends.size else 0
        if total > _SLICED_SET_LENGTH * ends.size:
            stops = starts + lengths
            sliced = [self.values[start:stop] for start, stop in zip(starts.tolist(), stops.tolist(), strict=True)]
            return ShingleSets(np.concatenate(sliced), ends)
        return ShingleSets(self.values[_positions(starts, lengths)], ends)


def shared_counts(left: ShingleSets, right: ShingleSets) -> npt.NDArray[np.int64]:
    """``|left[i] ∩ right[i]|`` for every ``i``, all pairs at once."""
    middle = left.values.size
    keyed = np.empty(middle + right.values.size, dtype=np.uint64)
    keyed[:middle] = left.values
    keyed[middle:] = right.values
    return _shared_counts_of(keyed, left.lengths, right.lengths)


def _shared_counts_of(
    keyed: npt.NDArray[np.uint64], left_lengths: npt.NDArray[np.int64], right_lengths: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """:func:`shared_counts` of the pairs whose values ``keyed`` holds: every left set, then every right set.

    Both sides are tagged with their pair number (the high 32 bits) and
    sorted together (``keyed``, in place): a value present in both sets of a
    pair appears twice in a row. Each side, its sets sorted, is sorted
    already once tagged, so a stable sort (timsort) only merges the two: 2.4
    times faster than sorting them afresh. Sorted, a pair's values lie
    together, as many as its two sets hold: a running count of the repeats,
    read at the pairs' ends, counts each pair's (4 times faster than
    selecting the repeats and counting them by their tags).
    """
    middle = int(left_lengths.sum())
    tags = np.arange(left_lengths.size, dtype=np.uint64) << U64(32)
    keyed[:middle] |= np.repeat(tags, left_lengths)
    keyed[middle:] |= np.repeat(tags, right_lengths)
    keyed.sort(kind="stable")
    repeats = np.zeros(keyed.size + 1, dtype=np.int64)  # repeats[i]: values among the first i equal to the one before
    np.cumsum(keyed[1:] == keyed[:-1], out=repeats[2:])
    ends = np.cumsum(left_lengths + right_lengths)
    shared: npt.NDArray[np.int64] = repeats[ends] - repeats[ends - left_lengths - right_lengths]
    return shared


def exact_jaccard(left: ShingleSets, right: ShingleSets) -> npt.NDArray[np.float64]:
    """Jaccard similarity of ``left[i]`` and ``right[i]`` for every ``i``, all pairs at once."""
    return _jaccard(shared_counts(left, right), left.lengths, right.lengths)


def _jaccard(
    shared: npt.NDArray[np.int64], left_lengths: npt.NDArray[np.int64], right_lengths: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    union = left_lengths + right_lengths - shared
    return np.asarray(shared / np.maximum(union, 1), dtype=np.float64)


def distinct_counts(chunk: ShingleChunk) -> npt.NDArray[np.uint32]:
    """Number of distinct shingle hashes of every document of ``chunk``: its set size, for containment."""
    hashes = np.sort(chunk.hashes, axis=1)
    first = np.arange(hashes.shape[1]) < chunk.counts[:, None]
    first[:, 1:] &= hashes[:, 1:] != hashes[:, :-1]
    sizes: npt.NDArray[np.uint32] = np.count_nonzero(first, axis=1).astype(np.uint32)
    return sizes


def jaccard_of_pairs(sets: ShingleSets, left: IntArray, right: IntArray) -> npt.NDArray[np.float64]:
    """:func:`exact_jaccard` of ``sets[left[i]]`` and ``sets[right[i]]``, in rounds of :data:`_VALUES_PER_ROUND`.

    A round's values are gathered straight into the 64-bit array its pairs are tagged and sorted in: no
    copy of each side's sets first (:meth:`ShingleSets.take`, a Python step per set).
    """
    lengths = sets.lengths
    starts = sets.ends - lengths
    values = sets.values.astype(np.uint64)
    work = np.cumsum(lengths[left] + lengths[right])
    total = int(work[-1]) if work.size else 0
    cuts = np.searchsorted(work, np.arange(_VALUES_PER_ROUND, total, _VALUES_PER_ROUND), side="right")
    bounds = [0, *sorted(set(cuts.tolist()) - {0, left.size}), left.size]
    similarity = [np.empty(0)]
    for start, stop in pairwise(bounds):
        which = np.concatenate((left[start:stop], right[start:stop]))
        keyed = values[_positions(starts[which], lengths[which])]
        left_lengths, right_lengths = lengths[left[start:stop]], lengths[right[start:stop]]
        similarity.append(_jaccard(_shared_counts_of(keyed, left_lengths, right_lengths), left_lengths, right_lengths))
    return np.concatenate(similarity)


def _positions(starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]) -> IntArray:
    """Where the values of the sets at ``starts`` (with ``lengths``) lie, set after set: one gather takes them."""
    total = int(lengths.sum())
    return np.arange(total) - np.repeat(np.cumsum(lengths) - lengths - starts, lengths)
