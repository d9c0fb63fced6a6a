"""Growable arrays of fixed-width rows with bounded over-allocation, and the ids kept in them.

Index storage grows by 25% at a time rather than doubling, so memory held is
at most 1.25 times what is used: the per-document memory budget (400 bytes
at a million documents) leaves no room for a doubling's idle half.
"""

import codecs

import numpy as np
import numpy.typing as npt

_GROWTH = 1.25
_MIN_CAPACITY = 1024


class Arena:
    """Rows ``[0, len)`` of a numpy array of shape ``(capacity, *row_shape)``."""

    def __init__(self, row_shape: tuple[int, ...], dtype: npt.DTypeLike, capacity: int = 0) -> None:
        self._data: np.ndarray = np.empty((max(capacity, _MIN_CAPACITY), *row_shape), dtype=dtype)
        self._size = 0

    @classmethod
    def of(cls, values: np.ndarray) -> "Arena":
        """An arena whose rows (along the first axis) are ``values`` themselves, not a copy.

        A restore reads each array of a snapshot once and hands it here: a
        copy held every array twice at the restore's peak. The first
        :meth:`extend` copies the rows into room to grow. Fewer rows than a
        new arena's room are copied into one (a copy of those costs nothing).
        """
        if values.shape[0] < _MIN_CAPACITY:
            small = cls(values.shape[1:], values.dtype)
            small.extend(values)
            return small
        arena = cls.__new__(cls)
        arena._data, arena._size = values, values.shape[0]
        return arena

    def __len__(self) -> int:
        return self._size

    @property
    def values(self) -> np.ndarray:
        """The used rows (a view: valid until the next :meth:`extend`)."""
        return self._data[: self._size]

    @property
    def nbytes(self) -> int:
        """Bytes allocated, used or not."""
        return int(self._data.nbytes)

    def extend_ends(self, ends: np.ndarray) -> None:
        """Append cumulative end offsets that start from zero, continuing this arena's last end."""
        self.extend(ends + (self.values[-1] if self._size else 0))

    def extend(self, rows: np.ndarray) -> None:
        """Append ``rows`` (shape ``(k, *row_shape)``)."""
        needed = self._size + rows.shape[0]
        if needed > self._data.shape[0]:
            grown = np.empty(
                (max(needed, int(self._data.shape[0] * _GROWTH)), *self._data.shape[1:]),
                self._data.dtype,
            )
            grown[: self._size] = self._data[: self._size]
            self._data = grown
        self._data[self._size : needed] = rows
        self._size = needed


IntArray = npt.NDArray[np.intp]


def ends_fit(ends: np.ndarray, size: int, count: int) -> bool:
    """Whether ``ends`` can be the cumulative end offsets of ``count`` items held in ``size`` elements.

    That is: one end per item, none decreasing (nor below zero), the last at
    ``size`` exactly. Stored ends that fail this (a damaged record or
    snapshot) would slice items out of the wrong bytes without any error.
    """
    if ends.shape != (count,):
        return False
    if count == 0:
        return size == 0
    return int(ends[-1]) == size and bool((np.diff(ends.astype(np.int64), prepend=0) >= 0).all())


#: Bytes of ids checked at a time: a whole generation's decoded at once would take gigabytes for a moment.
_DECODED_AT_ONCE = 1 << 24


def ids_fit(ends: np.ndarray, data: npt.NDArray[np.uint8], count: int) -> bool:
    """Whether ``ends`` cut ``data`` into ``count`` ids as :class:`IdArena` holds them: UTF-8, cut between characters.

    Stored otherwise (a damaged snapshot that checksums right), an id read
    back raised UnicodeDecodeError in the middle of a batch, and again in
    every batch after each restart from the same snapshot.
    """
    if not ends_fit(ends, data.size, count):
        return False
    cuts = ends[:-1][ends[:-1] < data.size].astype(np.intp)
    if ((data[cuts] & 0xC0) == 0x80).any():  # an id starting at a continuation byte: its first character cut
        return False
    decoder = codecs.getincrementaldecoder("utf-8")()
    whole = memoryview(np.ascontiguousarray(data).data)
    try:
        for start in range(0, data.size, _DECODED_AT_ONCE):
            decoder.decode(whole[start : start + _DECODED_AT_ONCE])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


#: Id bytes past which a generation takes no more documents: its end offsets are uint32, and a
#: batch's ids (a few megabytes at most) then still fit below 2**32.
ID_BYTES_PER_GENERATION = 1 << 31


class IdArena:
    """Document ids of a generation: UTF-8 bytes in one arena, and each id's end offset.

    Offsets are uint32, 4 bytes per document fewer than uint64: a generation
    is sealed (``full``) once its ids pass :data:`ID_BYTES_PER_GENERATION`.
    """

    def __init__(self, capacity: int = 0) -> None:
        self.bytes = Arena((), np.uint8)
        self.ends = Arena((), np.uint32, capacity)

    @property
    def nbytes(self) -> int:
        return self.bytes.nbytes + self.ends.nbytes

    @property
    def full(self) -> bool:
        return len(self.bytes) >= ID_BYTES_PER_GENERATION

    def extend(self, ids: list[str]) -> None:
        joined = "".join(ids)
        encoded = joined.encode("utf-8")
        if len(self.bytes) + len(encoded) >= 1 << 32:
            raise ValueError("a generation's ids would pass 4 GiB: it should have been sealed")
        self.bytes.extend(np.frombuffer(encoded, dtype=np.uint8))
        # ASCII ids (str.isascii is a flag check) are as many bytes as characters: no encoding one by one.
        lengths = map(len, ids) if joined.isascii() else (len(doc_id.encode("utf-8")) for doc_id in ids)
        self.ends.extend_ends(np.cumsum(np.fromiter(lengths, dtype=np.uint32, count=len(ids)), dtype=np.uint32))

    def ids_of(self, local: IntArray) -> list[str]:
        """Ids by local number, in the order asked."""
        ends = self.ends.values
        stops = ends[local].tolist()
        starts = np.where(local > 0, ends[local - 1], 0).tolist()
        data = memoryview(self.bytes.values.data)
        return [str(data[a:b], "utf-8") for a, b in zip(starts, stops, strict=True)]
