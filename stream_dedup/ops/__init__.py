"""Ops layer: Prometheus metrics, liveness and readiness over HTTP, and logging set-up.

It sits above the worker: it listens to the worker's events (:mod:`stream_dedup.ops.runtime`)
and the worker never imports it.
"""

from stream_dedup.ops.http import Health, OpsServer, Readiness
from stream_dedup.ops.logs import configure_logging
from stream_dedup.ops.metrics import DEAD_LETTER_REASONS, ROLES, WorkerMetrics, observe_many

__all__ = [
    "DEAD_LETTER_REASONS",
    "ROLES",
    "Health",
    "OpsServer",
    "Readiness",
    "WorkerMetrics",
    "configure_logging",
    "observe_many",
]
