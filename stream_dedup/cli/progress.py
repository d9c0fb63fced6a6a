"""A one-line progress display on a terminal, and the end-of-run summary."""

import sys
import time
from typing import TextIO

from stream_dedup.cli.terminal_text import counted
from stream_dedup.engine import DetectorStats


class Progress:
    """Redraws ``documents, duplicates, rate`` at most twice a second, only on a terminal.

    Args:
        stream: where to write (default: standard error).
        containment: whether the run judges containment: its ``contained`` and
            ``contains`` verdicts are then counted apart, neither unique nor duplicates,
            so that every verdict written is in a count.
    """

    def __init__(self, stream: TextIO | None = None, containment: bool = False) -> None:
        self._stream = stream or sys.stderr
        self._enabled = self._stream.isatty()
        self._containment = containment
        self._started = time.monotonic()
        self._last_draw = 0.0

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def update(self, stats: DetectorStats) -> None:
        now = time.monotonic()
        if self._enabled and now - self._last_draw >= 0.5:
            self._last_draw = now
            self._stream.write(f"\r{self._line(stats)}")
            self._stream.flush()

    def finish(self, stats: DetectorStats, rejected: int) -> None:
        if self._enabled:
            self._stream.write("\r\033[K")
        self._stream.write(f"{self._line(stats)}, {rejected} rejected\n")
        self._stream.flush()

    def _line(self, stats: DetectorStats) -> str:
        documents, elapsed = stats.documents, self.elapsed
        share = 100.0 * stats.duplicates / documents if documents else 0.0
        rate = documents / elapsed if elapsed > 0 else 0.0
        counts = f"{counted(documents, 'document')}, {counted(stats.duplicates, 'duplicate')} ({share:.1f}%)"
        if self._containment:
            counts += f", {stats.contained} contained, {stats.contains} contains"
        # Under 10 a second (documents of megabytes), a whole number would say 0 or round by half.
        return f"{counts}, {elapsed:.1f} s, {rate:,.{0 if rate >= 10 else 2}f} documents/s"
