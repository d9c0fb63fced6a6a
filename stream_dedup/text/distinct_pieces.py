"""A long document's pieces of shingle hashes made one chunk again: its distinct hashes, each with its repeats.

:func:`~stream_dedup.text.shingle_chunks` hashes a long document in pieces,
so that hashing it never takes more than a piece's worth of memory. MinHash
takes the pieces as they come (a minimum per bin). What needs a document's
shingle *set* cannot: the shingle sets of exact verification and of
settling pairs by text, containment's set sizes, SimHash (each distinct
shingle votes once, or as often as it occurs). For those the pieces are
merged here into the sorted distinct hashes of the whole document and how
often each occurs: 12 bytes a distinct shingle, twice that while runs of
them are merged. Real text repeats most of its shingles; a random blob (base64,
say) repeats none, and then this is 24 bytes a character of the document at
its peak, which ``max_document_bytes`` bounds.

Example::

    for chunk in whole_chunks(shingle_chunks(texts, shingling, seed)):
        ...  # no chunk is a piece; a long document's has its ``repeats``
"""

from collections.abc import Iterable, Iterator

import numpy as np
import numpy.typing as npt

from stream_dedup.text.hashing import Uint64Array
from stream_dedup.text.shingles import ShingleChunk

RepeatArray = npt.NDArray[np.uint32]


def whole_chunks(chunks: Iterable[ShingleChunk]) -> Iterator[ShingleChunk]:
    """``chunks`` as they come, but each long document's pieces as one chunk of its distinct hashes (sorted).

    That chunk's :attr:`~stream_dedup.text.ShingleChunk.repeats` says how
    often each hash occurs in the document.
    """
    # Sorted runs of distinct hashes, each larger than the next, merged as a binary counter carries: every
    # hash is copied about log2(pieces) times (merging each piece into one whole run copied that run every
    # time: a random 50 MB blob took 24 s).
    runs: list[tuple[Uint64Array, RepeatArray]] = []
    for chunk in chunks:
        if not chunk.piece:
            yield chunk
            continue
        hashes, repeats = np.unique(chunk.hashes[0, : chunk.counts[0]], return_counts=True)
        runs.append((hashes, repeats.astype(np.uint32)))
        while len(runs) > 1 and (chunk.final or runs[-2][0].size <= runs[-1][0].size):
            _merge_last_two(runs)
        if chunk.final:
            distinct, occurrences = runs.pop()
            yield ShingleChunk(chunk.rows, distinct[None, :], np.array([distinct.size]), repeats=occurrences)


def _merge_last_two(runs: list[tuple[Uint64Array, RepeatArray]]) -> None:
    """Replace the last two runs by their union, the repeats of a hash in both added.

    A stable sort of the two back to back only merges them (timsort finds
    the two runs): linear, where inserting one into the other by binary
    search was several times slower. Each input is let go as soon as it is
    copied: at the last merge, the two halves of a long document.
    """
    right = runs.pop()
    left = runs.pop()
    hashes = np.concatenate((left[0], right[0]))
    repeats = np.concatenate((left[1], right[1]))
    del left, right
    order = np.argsort(hashes, kind="stable")
    # np.take, not hashes[order]: several times faster here (numpy 2.3), the same values.
    hashes = np.take(hashes, order)
    repeats = np.take(repeats, order)
    del order
    # Each side is distinct: a hash is there once, or twice in a row, its repeats then added to the first.
    again = np.flatnonzero(hashes[1:] == hashes[:-1])
    repeats[again] += repeats[again + 1]
    runs.append((np.delete(hashes, again + 1), np.delete(repeats, again + 1)))
