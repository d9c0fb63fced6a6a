"""What every benchmark shares: a result table with its anchors, timing and memory probes."""

from __future__ import annotations

import ctypes
import gc
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Row:
    """One figure beside its anchor measured in the same run.

    ``ratio`` is ours/anchor, or anchor/ours when ``lower_is_better``; >1 means we win.
    ``bar`` is the issue's acceptance bar as text and ``passed`` whether we meet it
    (None when the bar does not apply to this row).
    """

    metric: str
    ours: float
    anchor_name: str = ""
    anchor: float | None = None
    bar: str = ""
    passed: bool | None = None
    lower_is_better: bool = False
    fmt: str = ",.0f"

    @property
    def ratio(self) -> float | None:
        if self.anchor is None or self.anchor == 0 or self.ours == 0:
            return None
        return self.anchor / self.ours if self.lower_is_better else self.ours / self.anchor


def print_table(title: str, rows: Sequence[Row], notes: Sequence[str] = ()) -> None:
    header = ("metric", "stream_dedup", "anchor", "anchor value", "ratio", "bar", "pass")
    body = [
        (
            r.metric,
            format(r.ours, r.fmt),
            r.anchor_name,
            "" if r.anchor is None else format(r.anchor, r.fmt),
            "" if r.ratio is None else f"{r.ratio:.2f}x",
            r.bar,
            {True: "PASS", False: "FAIL", None: ""}[r.passed],
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in (header, *body)) for i in range(len(header))]
    rule = "-+-".join("-" * w for w in widths)
    print(f"\n{title}")
    print(" | ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    print(rule)
    for line in body:
        print(" | ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)))
    load = os.getloadavg()[0]
    for note in (
        *notes,
        f"load average {load:.2f} over {os.cpu_count()} cores at the end (other work slows us)",
    ):
        print(f"  * {note}")


@contextmanager
def stopwatch() -> Iterator[list[float]]:
    """``with stopwatch() as t: ...`` then ``t[0]`` is the elapsed wall time in seconds."""
    elapsed = [0.0]
    start = time.perf_counter()
    try:
        yield elapsed
    finally:
        elapsed[0] = time.perf_counter() - start


def rss_bytes() -> int:
    """Resident set size of this process, after a full garbage collection."""
    gc.collect()
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("VmRSS not found in /proc/self/status")


def pin_to_one_core() -> None:
    """Run this process on one core, so throughput is per core.

    Call it before importing numpy or rensa: the variables cap their thread pools, and
    every thread that exists now is pinned (threads started later inherit the pin).
    """
    for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "RAYON_NUM_THREADS"):
        os.environ[variable] = "1"
    core = {min(os.sched_getaffinity(0))}
    for thread in os.listdir("/proc/self/task"):
        os.sched_setaffinity(int(thread), core)


def trimmed_rss_bytes() -> int:
    """Resident set size after glibc hands freed heap back to the system.

    Large temporaries (table growth, merges) are freed into glibc's heap,
    which keeps them for reuse once its mmap threshold has risen, so the plain
    resident set also holds the last high-water mark; both are worth reporting.
    """
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return rss_bytes()


def isolated(run: Callable[..., T], *args: Any) -> T:
    """Run a contender in a fresh process, so memory freed by an earlier one cannot hide its growth."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(run, args)


def docs_per_second(work: Callable[[Sequence[str]], object], texts: Sequence[str], slices: int = 3) -> float:
    """Best rate over ``slices`` equal slices of ``texts``: the least disturbed by the shared machine."""
    work(texts[:50])  # warm-up: imports, caches, first allocations
    return best_rate(work, texts, slices=slices)


def best_rate(work: Callable[[Sequence[T]], object], items: Sequence[T], per_item: int = 1, slices: int = 3) -> float:
    """Best of ``items * per_item`` per second over ``slices`` consecutive equal slices of ``items``.

    No warm-up: for work that changes state (an index that grows), each slice goes on from the last.
    """
    size = len(items) // slices
    rates = []
    for start in range(0, size * slices, size):
        with stopwatch() as t:
            work(items[start : start + size])
        rates.append(size * per_item / t[0])
    return max(rates)
