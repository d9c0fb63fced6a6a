"""Normalised texts kept on disk by a small whole number (the offline command's line numbers).

The offline command's verification asks for the texts of the few pairs too
near the threshold for the sketch (:mod:`stream_dedup.engine.text_verification`),
and its input may be a pipe, read once. So every document's normalised text
is appended to an unnamed temporary file as it is read, and found again by
its number: memory holds one 8-byte end offset per number, the texts stay
on disk, and the file is gone when the spool is closed or the process ends.

Under retention the index forgets the oldest documents, and no pair ever
asks for their texts again: the caller says so (:meth:`TextSpool.forget_before`),
and once the texts forgotten take as much as those kept (and at least
:data:`COMPACT_BYTES`, or their numbers :data:`COMPACT_NUMBERS`), the kept
ones are copied to a new file and the old one is closed. Disk and memory then
stay within about twice what retention holds, however long the input (they
grew with every line: a million lines of 1 KB took 1 GB of ``TMPDIR`` under
``--max-documents 20000``), and each byte is copied about once on average.

Example::

    with TextSpool() as spool:
        spool.add([1, 2], ["first text", "second text"])
        spool.texts_of(np.array([2, 7], dtype=np.uint64))  # ["second text", None]
        spool.forget_before(2)  # the text of 1 is never asked for again
"""

import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

#: Bytes of forgotten texts below which the file is never copied, so that a small run copies nothing.
COMPACT_BYTES = 64 << 20
#: Forgotten numbers below which their end offsets are kept: a run of short lines copies seldom.
COMPACT_NUMBERS = 1 << 20


class TextSpool:
    """Texts by number, appended in increasing order of number; a number never added (or forgotten) has none."""

    def __init__(self, directory: str | None = None) -> None:
        self._directory = directory
        self._file = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 (closed by close())
        # _ends[n - _base]: the file offset where the text of number n ends, and the next one starts;
        # numbers up to _base have none (forgotten, or never added), _ends[0] is where the file's texts start.
        self._base = 0
        self._ends = np.zeros(1024, dtype=np.int64)
        self._last = 0  # highest number added; texts are appended in order of number
        self._forgotten = 0  # numbers up to this one are never asked for again
        self._size = 0

    def __enter__(self) -> "TextSpool":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the file, and so remove it.

        Nothing in it is read again, so what a failed write (a full disk)
        left in its buffer is dropped: flushed again here, it raised a bare
        "[Errno 28] No space left on device" over the error that named the
        directory, as the run ended.
        """
        with contextlib.suppress(OSError):
            self._file.close()

    @property
    def disk_bytes(self) -> int:
        """Bytes of the spool's file: the texts kept, and those forgotten but not yet copied away."""
        return self._size

    @property
    def numbers_held(self) -> int:
        """Numbers whose end offsets memory holds (8 bytes each), forgotten ones not yet dropped included."""
        return self._last - self._base

    def add(self, numbers: Sequence[int], texts: Sequence[str]) -> None:
        """Keep ``texts`` under ``numbers``, which must be increasing and above every number added before."""
        if not numbers:
            return
        if numbers[0] <= self._last or (np.diff(numbers) <= 0).any():
            raise ValueError("numbers must increase, and past every number added before")
        top = numbers[-1] - self._base
        if top >= self._ends.size:
            self._ends = np.resize(self._ends, max(top + 1, 2 * self._ends.size))
        # One text encoded at a time: a batch of large documents encoded (and joined) at once held twice its size.
        self._file.seek(self._size)
        sizes = [self._file.write(text.encode("utf-8", "surrogatepass")) for text in texts]
        ends = self._size + np.cumsum(sizes)
        # Numbers skipped (lines without a document) end where the previous text did: no text.
        fill_from = self._last + 1 - self._base
        self._ends[fill_from : top + 1] = np.repeat(
            np.concatenate(([self._size], ends[:-1])), np.diff(np.concatenate(([self._last], numbers)))
        )
        self._ends[np.asarray(numbers) - self._base] = ends
        self._file.flush()
        self._size = int(ends[-1])
        self._last = numbers[-1]

    def forget_before(self, number: int) -> None:
        """Never give the texts of numbers below ``number`` again: their disk and memory can be reused."""
        self._forgotten = max(self._forgotten, min(number - 1, self._last))
        dead_numbers = self._forgotten - self._base
        dead_bytes = int(self._ends[dead_numbers])
        if dead_bytes >= max(self._size - dead_bytes, COMPACT_BYTES) or dead_numbers >= max(
            self._last - self._forgotten, COMPACT_NUMBERS
        ):
            self._compact(dead_numbers, dead_bytes)

    def texts_of(self, numbers: npt.NDArray[np.uint64]) -> list[str | None]:
        """The text kept under each number, or ``None``."""
        texts: list[str | None] = []
        descriptor = self._file.fileno()
        for number in numbers.tolist():
            if not self._forgotten < number <= self._last:
                texts.append(None)
                continue
            start, end = int(self._ends[number - 1 - self._base]), int(self._ends[number - self._base])
            texts.append(
                os.pread(descriptor, end - start, start).decode("utf-8", "surrogatepass") if end > start else None
            )
        return texts

    def _compact(self, dead_numbers: int, dead_bytes: int) -> None:
        """Drop the first ``dead_numbers`` end offsets, and copy the texts past ``dead_bytes`` to a new file.

        The texts are copied first: a copy that fails (a full disk) leaves
        the spool as it was, every text still where its offsets say.
        """
        if dead_bytes:
            kept = tempfile.TemporaryFile(dir=self._directory)  # noqa: SIM115 (closed by close())
            try:
                self._file.seek(dead_bytes)
                shutil.copyfileobj(self._file, kept)
                kept.flush()
            except BaseException:
                kept.close()
                raise
            self._file.close()
            self._file = kept
            self._size -= dead_bytes
        live = self._ends[dead_numbers : self._last - self._base + 1] - dead_bytes
        self._ends = np.zeros(max(1024, 2 * live.size), dtype=np.int64)
        self._ends[: live.size] = live
        self._base += dead_numbers
