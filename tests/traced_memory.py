"""Memory a call allocates, as tracemalloc sees it: for tests that bound what a step holds or peaks at."""

import tracemalloc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def traced(call: Callable[[], T]) -> tuple[T, int, int]:
    """``call()``'s result, the bytes it left allocated (its result included) and its peak, in bytes."""
    tracemalloc.start()
    try:
        result = call()
        held, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, held, peak
