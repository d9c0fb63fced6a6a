"""SIGTERM and SIGINT: a clean stop within the grace period, or an exit past it."""

import logging
import os
import signal
import threading
from typing import Protocol

from stream_dedup.worker.settings import WorkerSettings

log = logging.getLogger(__name__)


class Stoppable(Protocol):
    """What a signal stops: the worker, or a role of a sharded stage."""

    settings: WorkerSettings

    def request_stop(self) -> None: ...


def install_stop_signals(worker: Stoppable) -> None:
    """SIGTERM and SIGINT ask the worker to stop; past the grace period the process exits regardless."""

    def on_signal(signum: int, _frame: object) -> None:
        log.info(
            "received %s: stopping within %.0f s", signal.Signals(signum).name, worker.settings.shutdown_grace_seconds
        )
        worker.request_stop()
        timer = threading.Timer(worker.settings.shutdown_grace_seconds, _exit_late)
        timer.daemon = True
        timer.start()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def _exit_late() -> None:
    # Safe at any moment: whatever was not committed is aborted by the broker
    # and processed again by the next worker, like after kill -9.
    log.error("shutdown grace period exceeded: exiting without a clean shutdown")
    os._exit(1)
