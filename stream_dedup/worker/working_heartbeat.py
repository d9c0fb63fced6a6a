"""Heartbeats while one long call works, such as loading the snapshot of a large index.

``/healthz`` fails once the last heartbeat is older than
``liveness_timeout_seconds`` (60 s), and the loop heartbeats only between
its own steps. A snapshot of 100M documents loads in about three minutes
(1.9 s a million): the pod's liveness probe killed the load, and the next
one, for ever. While such a call runs, a thread heartbeats for it as long
as the process is seen working: its CPU time moves (at least a tenth of a
core), or it reads from storage. A load stuck on a hung filesystem does
neither, and ``/healthz`` fails as before.
"""

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from stream_dedup.worker.events import WorkerEvents

#: CPU seconds a second of wall time that count as working (the clients' own threads idle far below it).
_BUSY_CPU_SHARE = 0.1


def work_done() -> tuple[float, int]:
    """(CPU seconds of the process, bytes it has read from storage); 0 bytes where Linux does not say."""
    read_bytes = 0
    with contextlib.suppress(OSError, StopIteration, ValueError), open("/proc/self/io") as io:
        read_bytes = int(next(line for line in io if line.startswith("read_bytes:")).split()[1])
    return time.process_time(), read_bytes


@contextlib.contextmanager
def heartbeats_while_working(
    events: WorkerEvents, every_seconds: float = 5.0, progress: Callable[[], tuple[float, int]] = work_done
) -> Iterator[None]:
    """Heartbeat every ``every_seconds`` while the process works (see the module docstring), until the block ends."""
    stopped = threading.Event()

    def beat() -> None:
        cpu, read = progress()
        while not stopped.wait(every_seconds):
            now_cpu, now_read = progress()
            if now_cpu - cpu >= _BUSY_CPU_SHARE * every_seconds or now_read > read:
                events.heartbeat()
            cpu, read = now_cpu, now_read

    thread = threading.Thread(target=beat, name="working-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stopped.set()
        thread.join()
