"""A real Prometheus for tests: started on a free port, scraping given targets, asked over its HTTP API.

The binary is the one operators run (Debian's ``prometheus`` package, installed by
``scripts/validate-deploy.sh --install``); where it is missing a test skips, or fails under
CI (see :func:`tests.deploy.deployfiles.missing`). The configuration is
:func:`tests.deploy.promql.prometheus_config`: job ``stream-dedup`` (or another), the alert rules of
deploy/prometheus/alerts.yml, scrapes and rule evaluations every second.

Example::

    with running_prometheus(["127.0.0.1:9400"], tmp_path) as prometheus:
        prometheus.wait_for_targets_up(1, timeout=30)
        answer = prometheus.query("up")
        assert answer["status"] == "success" and answer["data"]["result"]
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from .deployfiles import tool
from .promql import JOB, prometheus_config

_HTTP_TIMEOUT_SECONDS = 10.0


def prometheus_binary() -> str:
    """Path of the ``prometheus`` binary; skips the test, or fails it under CI, if it is not installed."""
    return tool("prometheus")


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (the kernel picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class PrometheusServer:
    """A running Prometheus: its HTTP API, and its log for failure messages."""

    def __init__(self, url: str, process: subprocess.Popen[bytes], log_path: Path) -> None:
        self.url = url
        self.process = process
        self.log_path = log_path

    def get(self, path: str, **params: str) -> dict[str, Any]:
        """The JSON answer of ``GET path?params``, error answers (HTTP 400, 422...) included.

        Prometheus answers a query it cannot parse or run with ``status: error`` and an
        ``error`` text under a 4xx status; those are returned, not raised, so that a test
        can report every failing expression at once.
        """
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=_HTTP_TIMEOUT_SECONDS) as response:
                return json.loads(response.read())  # type: ignore[no-any-return]
        except urllib.error.HTTPError as error:
            body = error.read()
            try:
                return json.loads(body)  # type: ignore[no-any-return]
            except json.JSONDecodeError:
                return {"status": "error", "errorType": f"http {error.code}", "error": body.decode(errors="replace")}

    def query(self, expr: str) -> dict[str, Any]:
        """``/api/v1/query`` at the server's now: ``{"status", "data": {"resultType", "result"}}`` or an error."""
        return self.get("/api/v1/query", query=expr)

    def active_targets(self) -> list[dict[str, Any]]:
        """``/api/v1/targets``' active targets (``labels``, ``health``, ``lastError``...)."""
        return list(self.get("/api/v1/targets", state="active")["data"]["activeTargets"])

    def rule_groups(self) -> list[dict[str, Any]]:
        """``/api/v1/rules``' groups, each with its ``rules`` (``name``, ``health``, ``lastError``...)."""
        return list(self.get("/api/v1/rules")["data"]["groups"])

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=_HTTP_TIMEOUT_SECONDS) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return False

    def wait_until_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while not self.ready():
            if self.process.poll() is not None:
                raise AssertionError(f"prometheus exited with status {self.process.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"prometheus not ready after {timeout:.0f} s:\n{self.log_tail()}")
            time.sleep(0.2)

    def wait_for_targets_up(self, count: int, timeout: float) -> None:
        """Wait until ``count`` targets have been scraped successfully; name the failing ones otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            targets = self.active_targets()
            if sum(target["health"] == "up" for target in targets) >= count:
                return
            if time.monotonic() > deadline:
                states = [f"{t['scrapeUrl']}: {t['health']} {t.get('lastError', '')}" for t in targets]
                raise AssertionError(f"fewer than {count} targets up after {timeout:.0f} s: {states}")
            time.sleep(0.2)

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@contextlib.contextmanager
def running_prometheus(
    targets: Iterable[str],
    directory: Path,
    scrape_interval: str = "1s",
    timeout: float = 30.0,
    binary: str | None = None,
    job: str = JOB,
) -> Iterator[PrometheusServer]:
    """Prometheus scraping ``targets`` as ``job``, ready, stopped (and reaped) at the end.

    Config, TSDB and log live in ``directory``. The listen port is picked just before the
    start; a collision with another process shows as an early exit, with the log in the error.
    ``binary`` defaults to :func:`prometheus_binary`.
    """
    binary = binary or prometheus_binary()
    config = directory / "prometheus.yml"
    config.write_text(prometheus_config(list(targets), scrape_interval=scrape_interval, job=job), encoding="utf-8")
    port = free_port()
    log_path = directory / "prometheus.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=directory,
        )
    server = PrometheusServer(f"http://127.0.0.1:{port}", process, log_path)
    try:
        server.wait_until_ready(timeout)
        yield server
    finally:
        # Nothing in its TSDB is worth a clean shutdown: kill, and reap the process.
        process.kill()
        process.wait(30)
