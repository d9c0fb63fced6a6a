"""Metrics, liveness, readiness and a status page over HTTP, served from a daemon thread.

``GET /``         the status page for people (:mod:`stream_dedup.ops.status_page`).
``GET /metrics``  Prometheus text exposition of a :class:`WorkerMetrics` registry.
``GET /healthz``  200 while the processing loop keeps calling :meth:`Health.heartbeat`,
                  503 once the last heartbeat is older than the liveness timeout.
``GET /readyz``   200 when the worker has said it is ready and its loop went round within
                  :data:`READY_STALL_SECONDS`, else 503.

Liveness and readiness answer different questions: a restoring replica is alive
(do not restart it, it is making progress) but not ready; a caught-up standby
is ready (it can take over at once) although it holds no partitions.

Example (the worker's loop calls ``health.heartbeat()`` every round)::

    >>> import urllib.request
    >>> health = Health()
    >>> with OpsServer("127.0.0.1", 0, WorkerMetrics(), health) as server:
    ...     health.heartbeat()
    ...     url = f"http://127.0.0.1:{server.port}/healthz"
    ...     urllib.request.urlopen(url).status
    200
"""

import errno
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal
from urllib.parse import urlsplit

from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest

from stream_dedup.errors import StreamDedupError
from stream_dedup.ops.metrics import ROLES, WorkerMetrics
from stream_dedup.ops.status import MetricsHistory, RecentDuplicates
from stream_dedup.ops.status_page import render_status_page
from stream_dedup.worker.events import Role

_log = logging.getLogger(__name__)

AddressPart = Literal["host", "port"]
#: Why a bind fails because of the port (taken; below 1024 without the privilege): any other reason
#: (a name that does not resolve, an address not of this machine) is the host's.
_PORT_ERRNOS = frozenset({errno.EADDRINUSE, errno.EACCES})
_ADDRESS_ADVICE: dict[AddressPart, str] = {
    "port": "choose another port or free this one",
    "host": "give an address of this machine (0.0.0.0: all of them)",
}


class AddressError(StreamDedupError):
    """The server cannot bind its address; ``part`` says which part to change, the host or the port."""

    def __init__(self, message: str, part: AddressPart) -> None:
        super().__init__(message)
        self.part = part


#: The readiness and reason that go with each role, for :meth:`Health.set_role`.
_ROLE_STATES: dict[Role, tuple[bool, str]] = {
    "restoring": (False, "restoring state from snapshot and changelog"),
    "standby": (True, "standby: another replica holds the partitions"),
    "active": (True, "active: processing the assigned partitions"),
    "stopping": (False, "stopping: shutting down"),
}


@dataclass(frozen=True)
class Readiness:
    """What ``/readyz`` reports."""

    ready: bool
    role: Role
    reason: str


#: A loop that has not gone round for this long is held up in a call to the brokers (a commit, an offset
#: lookup, a read of the input), which are away or hung: not ready, whatever its role. Each such call is
#: bounded, so it stays alive (``liveness_timeout_seconds``). A round is a poll and at most one batch,
#: well under a second at the default settings.
READY_STALL_SECONDS = 10.0


class Health:
    """Liveness and readiness, written by the worker loop and read by the HTTP threads.

    Thread safety: each write replaces one attribute with an immutable value (a
    float, a frozen :class:`Readiness`), and assigning an attribute is atomic in
    CPython, so a reader sees the old state or the new one, never a mix, without a lock.

    Args:
        liveness_timeout_seconds: heartbeats older than this make ``/healthz`` fail (default 60).
        clock: monotonic seconds; replaceable in tests.
    """

    def __init__(self, liveness_timeout_seconds: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        if not liveness_timeout_seconds > 0:
            raise ValueError(f"liveness_timeout_seconds must be positive, got {liveness_timeout_seconds!r}")
        self.liveness_timeout_seconds = liveness_timeout_seconds
        self._clock = clock
        # Counting from construction gives the loop one timeout to make its first heartbeat.
        self._last_heartbeat = clock()
        self._readiness = Readiness(False, "restoring", _ROLE_STATES["restoring"][1])

    def heartbeat(self) -> None:
        """Record that the processing loop is alive; call it every iteration."""
        self._last_heartbeat = self._clock()

    def heartbeat_age(self) -> float:
        """Seconds since the last heartbeat."""
        return self._clock() - self._last_heartbeat

    def set_state(self, ready: bool, role: Role, reason: str) -> None:
        """Set what ``/readyz`` reports."""
        if role not in ROLES:
            raise ValueError(f"unknown role {role!r}; expected one of {', '.join(ROLES)}")
        self._readiness = Readiness(ready, role, reason)

    def set_role(self, role: Role) -> None:
        """``set_state`` with the usual readiness and reason of ``role``: ready if standby or active."""
        ready, reason = _ROLE_STATES[role]
        self.set_state(ready, role, reason)

    @property
    def readiness(self) -> Readiness:
        """What the worker said, unless its loop has been held up for :data:`READY_STALL_SECONDS`.

        Why: the role changes only when a session ends, and a broker killed
        mid-stream held the loop in one call (the intake's end offsets, a
        commit) for the whole outage, up to 45 s: /readyz said "active" and
        ready throughout while nothing was published.
        """
        said, age = self._readiness, self.heartbeat_age()
        if said.ready and age > READY_STALL_SECONDS:
            reason = (
                f"the loop has not gone round for {age:.0f} s, held up waiting (on the brokers?); was: {said.reason}"
            )
            return Readiness(False, said.role, reason)
        return said


class OpsServer:
    """The HTTP server for ``/``, ``/metrics``, ``/healthz`` and ``/readyz``.

    Args:
        host: address to listen on (``"0.0.0.0"`` in a container, ``"127.0.0.1"`` in tests).
        port: TCP port; 0 picks a free one, then read it from :attr:`port`.
        metrics: whose registry ``/metrics`` exposes.
        health: what ``/healthz`` and ``/readyz`` report.
        history, duplicates: what the status page draws and lists besides ``metrics``
            (default: empty ones, for a server whose worker does not feed them).
    """

    def __init__(
        self,
        host: str,
        port: int,
        metrics: WorkerMetrics,
        health: Health,
        history: MetricsHistory | None = None,
        duplicates: RecentDuplicates | None = None,
    ) -> None:
        self.host = host
        self._requested_port = port
        self.metrics = metrics
        self.health = health
        self.history = history or MetricsHistory(metrics)
        self.duplicates = duplicates or RecentDuplicates()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Bind the port and serve from a daemon thread; returns at once."""
        if self._server is not None:
            raise RuntimeError("OpsServer already started")
        try:
            server = _Server((self.host, self._requested_port), _Handler)
        except OSError as exc:
            part: AddressPart = "port" if exc.errno in _PORT_ERRNOS else "host"
            advice = _ADDRESS_ADVICE[part]
            raise AddressError(
                f"cannot serve metrics and health checks on {self.host}:{self._requested_port}: {exc}; {advice}", part
            ) from exc
        server.ops = self
        self._server = server
        # A daemon thread never keeps a stopping worker alive, even if close() is skipped.
        # serve_forever notices shutdown() only between polls: the interval bounds how long close() takes.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="ops-http", daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        """The bound port (useful when constructed with port 0)."""
        if self._server is None:
            raise RuntimeError("OpsServer not started")
        return int(self._server.server_address[1])

    def close(self) -> None:
        """Stop serving and release the port; safe to call twice or before ``start``."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None or thread is None:
            return
        # shutdown() waits for serve_forever() to return, so only call it on a running server.
        server.shutdown()
        server.server_close()
        thread.join()

    def __enter__(self) -> "OpsServer":
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    ops: OpsServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # The default prints a traceback to stderr, outside the log format.
        _log.exception("ops HTTP request from %s failed", client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:
        path = urlsplit(self.path).path
        ops = self.server.ops
        if path == "/":
            readiness = ops.health.readiness
            page = render_status_page(ops.metrics, readiness.role, readiness.reason, ops.history, ops.duplicates)
            self._send(HTTPStatus.OK, "text/html; charset=utf-8", page.encode("utf-8"))
        elif path == "/metrics":
            self._send(HTTPStatus.OK, CONTENT_TYPE_LATEST, generate_latest(self.server.ops.metrics.registry))
        elif path == "/healthz":
            self._send_json(*_liveness(self.server.ops.health))
        elif path == "/readyz":
            readiness = self.server.ops.health.readiness
            status = HTTPStatus.OK if readiness.ready else HTTPStatus.SERVICE_UNAVAILABLE
            self._send_json(status, {"ready": readiness.ready, "role": readiness.role, "reason": readiness.reason})
        else:
            self._send_json(HTTPStatus.NOT_FOUND, {"error": f"not found: {path}; try /, /metrics, /healthz or /readyz"})

    def log_message(self, format: str, *args: Any) -> None:
        # One line per scrape and probe would drown the worker's own log.
        _log.debug("ops HTTP %s: " + format, self.address_string(), *args)

    def _send_json(self, status: HTTPStatus, body: dict[str, object]) -> None:
        self._send(status, "application/json", json.dumps(body).encode("utf-8"))

    def _send(self, status: HTTPStatus, content_type: str, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _liveness(health: Health) -> tuple[HTTPStatus, dict[str, object]]:
    age = health.heartbeat_age()
    timeout = health.liveness_timeout_seconds
    if age < timeout:
        return HTTPStatus.OK, {"status": "ok", "heartbeat_age_seconds": round(age, 3), "role": health.readiness.role}
    return HTTPStatus.SERVICE_UNAVAILABLE, {
        "status": "stalled",
        "heartbeat_age_seconds": round(age, 3),
        "liveness_timeout_seconds": timeout,
        "reason": f"no heartbeat from the processing loop for {age:.1f} s (limit {timeout:g} s)",
    }
