"""A one-line progress display on a terminal, and the end-of-run summary."""

import sys
import time
from typing import TextIO

from stream_dedup.cli.terminal_text import counted


class Progress:
    """Redraws ``documents, duplicates, rate`` at most twice a second, only on a terminal."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream or sys.stderr
        self._enabled = self._stream.isatty()
        self._started = time.monotonic()
        self._last_draw = 0.0

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def update(self, documents: int, duplicates: int) -> None:
        now = time.monotonic()
        if self._enabled and now - self._last_draw >= 0.5:
            self._last_draw = now
            self._stream.write(f"\r{_line(documents, duplicates, self.elapsed)}")
            self._stream.flush()

    def finish(self, documents: int, duplicates: int, rejected: int) -> None:
        if self._enabled:
            self._stream.write("\r\033[K")
        self._stream.write(f"{_line(documents, duplicates, self.elapsed)}, {rejected} rejected\n")
        self._stream.flush()


def _line(documents: int, duplicates: int, elapsed: float) -> str:
    share = 100.0 * duplicates / documents if documents else 0.0
    rate = documents / elapsed if elapsed > 0 else 0.0
    counts = f"{counted(documents, 'document')}, {counted(duplicates, 'duplicate')}"
    # Under 10 a second (documents of megabytes), a whole number would say 0 or round by half.
    return f"{counts} ({share:.1f}%), {elapsed:.1f} s, {rate:,.{0 if rate >= 10 else 2}f} documents/s"
