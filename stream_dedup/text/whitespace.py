"""Whitespace collapsed over code points: the last step of normalisation, done in numpy.

:func:`~stream_dedup.text.normalize` ends with ``" ".join(text.split())``:
every run of whitespace becomes one space and both ends are trimmed. In
Python that builds one string object per word, about 9 µs for a kilobyte of
prose, as long as hashing all its shingles; shingling therefore does it
instead, on the code points of a whole chunk of documents at once, where it
costs a few passes over bytes. Whitespace is exactly what ``str.split``
splits at (``str.isspace``): tests compare the two over all of Unicode.
"""

import numpy as np
import numpy.typing as npt

#: The highest whitespace code point, U+3000 IDEOGRAPHIC SPACE.
LAST_WHITESPACE = 0x3000
#: Code points below this are ASCII, where only controls and the space can be whitespace.
_FIRST_NON_ASCII = 0x80
_SPACE = 0x20
#: ``str.isspace`` of every code point up to :data:`LAST_WHITESPACE`, then ``False`` for all above.
_IS_WHITESPACE = np.array([chr(c).isspace() for c in range(LAST_WHITESPACE + 2)])

IntArray = npt.NDArray[np.intp]
CodeArray = npt.NDArray[np.uint8] | npt.NDArray[np.uint32]


def collapse_whitespace(codes: CodeArray, lengths: IntArray) -> tuple[CodeArray, IntArray]:
    """Each document as ``" ".join(text.split())`` leaves it, and the new lengths.

    ``codes`` holds the documents' code points back to back, ``lengths[i]``
    of them for document ``i``; the result is laid out the same way. Text
    that is already collapsed (single spaces between words, none at the ends:
    every normalised text, and most prose) comes back as it is, after three
    passes that find nothing to do.
    """
    space = codes == _SPACE
    # Other whitespace is a control character or non-ASCII: only those few code points are looked up.
    suspects = codes < _SPACE
    if codes.dtype.itemsize > 1:
        suspects |= codes >= _FIRST_NON_ASCII
    other = np.flatnonzero(suspects)
    other = other[_IS_WHITESPACE[np.minimum(codes[other], LAST_WHITESPACE + 1, dtype=np.uint32)]]
    space[other] = True
    ends = np.cumsum(lengths)
    starts = ends - lengths
    first, end = starts[lengths > 0], ends[lengths > 0]
    if not (other.size or space[first].any() or space[end - 1].any() or (space[:-1] & space[1:]).any()):
        return codes, lengths
    # Keep every non-space and, of each run of spaces, its last one if the same document goes on
    # after it and had a non-space before it. One slot more, always False, ends the last document.
    size = codes.size
    keep = np.zeros(size + 1, dtype=bool)
    np.logical_not(space, out=keep[:size])
    run_ends = space[:-1] & keep[1:size]
    run_ends[end[end < size] - 1] = False  # the next code point belongs to another document
    leading = space[first]
    if leading.any():
        # A leading run ends at the first run end at or after its document's start, if that lies inside it.
        candidates = np.flatnonzero(run_ends)
        found = np.searchsorted(candidates, first[leading])
        inside = found < candidates.size
        found = candidates[found[inside]]
        run_ends[found[found < end[leading][inside]]] = False
    keep[: size - 1] |= run_ends
    if other.size:
        codes = codes.copy()
        codes[other] = _SPACE
    # reduceat sums keep[starts[i]:starts[i+1]], but gives keep[starts[i]] when those are equal.
    kept = np.add.reduceat(keep, starts, dtype=np.intp)
    kept[lengths == 0] = 0
    return codes[keep[:size]], kept
