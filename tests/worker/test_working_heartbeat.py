"""A long call that works heartbeats for the loop; one that is stuck does not.

A snapshot of 100M documents loads in minutes with no poll to heartbeat:
the pod's liveness probe (``/healthz``, 60 s) killed every load, for ever.
"""

import itertools
import threading
import time

from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.working_heartbeat import heartbeats_while_working, work_done


class Beats(WorkerEvents):
    def __init__(self) -> None:
        self.count = 0

    def heartbeat(self) -> None:
        self.count += 1


def run_for(seconds: float, cpu_a_call: float, read_a_call: int) -> int:
    """Heartbeats in ``seconds`` of a block whose process, at each look, has worked that much more."""
    looks = itertools.count()
    beats = Beats()

    def progress() -> tuple[float, int]:
        n = next(looks)
        return n * cpu_a_call, n * read_a_call

    with heartbeats_while_working(beats, every_seconds=0.01, progress=progress):
        time.sleep(seconds)
    return beats.count


def test_a_block_that_computes_heartbeats() -> None:
    assert run_for(0.3, cpu_a_call=0.005, read_a_call=0) > 5


def test_a_block_that_reads_from_storage_heartbeats() -> None:
    assert run_for(0.3, cpu_a_call=0.0, read_a_call=4096) > 5


def test_a_block_stuck_without_working_does_not_heartbeat() -> None:
    # A tiny share of a core is the clients' own threads idling, not the load.
    assert run_for(0.3, cpu_a_call=0.0001, read_a_call=0) == 0


def test_the_heartbeats_stop_with_the_block() -> None:
    before = {thread.name for thread in threading.enumerate()}
    run_for(0.05, cpu_a_call=0.005, read_a_call=0)
    assert "working-heartbeat" not in {thread.name for thread in threading.enumerate()} - before


def test_work_done_moves_with_the_process_cpu() -> None:
    cpu, _ = work_done()
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    assert work_done()[0] - cpu >= 0.05
