"""The distinct values of an array, sorted: what ``np.unique`` returns, by sorting.

numpy 2.3 on finds a plain ``np.unique``'s values with a hash table, and on
integer arrays that is far slower than the sort it replaced: 0.6 s against
6 ms for a million random int64 here, and a batch of 4,096 documents of one
template (every row a candidate of every other) spent 1.2 s there. Its
variants that also return indices or counts still sort, and are not
affected.
"""

from typing import TypeVar

import numpy as np
import numpy.typing as npt

T = TypeVar("T", bound=np.generic)


def distinct_sorted(values: npt.NDArray[T]) -> npt.NDArray[T]:
    """The distinct values of ``values`` (1-d), in ascending order."""
    ordered = np.sort(values)
    if ordered.size < 2:
        return ordered
    first = np.empty(ordered.size, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first]
