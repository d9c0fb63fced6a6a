"""Normalised texts kept on disk by a small whole number (the offline command's line numbers).

The offline command's verification asks for the texts of the few pairs too
near the threshold for the sketch (:mod:`stream_dedup.engine.text_verification`),
and its input may be a pipe, read once. So every document's normalised text
is appended to an unnamed temporary file as it is read, and found again by
its number: memory holds one 8-byte end offset per number, the texts stay
on disk (about the size of the input), and the file is gone when the spool
is closed or the process ends.

Example::

    with TextSpool() as spool:
        spool.add([1, 2], ["first text", "second text"])
        spool.texts_of(np.array([2, 7], dtype=np.uint64))  # ["second text", None]
"""

import os
import tempfile
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt


class TextSpool:
    """Texts by number, appended in increasing order of number; a number never added has none."""

    def __init__(self, directory: str | None = None) -> None:
        self._file = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 (closed by close())
        # _ends[n]: the file offset where the text of number n ends, and the next one starts.
        self._ends = np.zeros(1024, dtype=np.int64)
        self._last = 0  # highest number added; texts are appended in order of number
        self._size = 0

    def __enter__(self) -> "TextSpool":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._file.close()

    def add(self, numbers: Sequence[int], texts: Sequence[str]) -> None:
        """Keep ``texts`` under ``numbers``, which must be increasing and above every number added before."""
        if not numbers:
            return
        if numbers[0] <= self._last or (np.diff(numbers) <= 0).any():
            raise ValueError("numbers must increase, and past every number added before")
        top = numbers[-1]
        if top >= self._ends.size:
            self._ends = np.resize(self._ends, max(top + 1, 2 * self._ends.size))
        # One text encoded at a time: a batch of large documents encoded (and joined) at once held twice its size.
        self._file.seek(self._size)
        sizes = [self._file.write(text.encode("utf-8", "surrogatepass")) for text in texts]
        ends = self._size + np.cumsum(sizes)
        # Numbers skipped (lines without a document) end where the previous text did: no text.
        fill_from = self._last + 1
        self._ends[fill_from : top + 1] = np.repeat(
            np.concatenate(([self._size], ends[:-1])), np.diff(np.concatenate(([self._last], numbers)))
        )
        self._ends[np.asarray(numbers)] = ends
        self._file.flush()
        self._size = int(ends[-1])
        self._last = top

    def texts_of(self, numbers: npt.NDArray[np.uint64]) -> list[str | None]:
        """The text kept under each number, or ``None``."""
        texts: list[str | None] = []
        descriptor = self._file.fileno()
        for number in numbers.tolist():
            if not 0 < number <= self._last:
                texts.append(None)
                continue
            start, end = int(self._ends[number - 1]), int(self._ends[number])
            texts.append(
                os.pread(descriptor, end - start, start).decode("utf-8", "surrogatepass") if end > start else None
            )
        return texts
