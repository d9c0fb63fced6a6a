"""The ops HTTP server: metrics, liveness and readiness, over real HTTP on a free local port."""

import json
import logging
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from stream_dedup.ops.http import READY_STALL_SECONDS, AddressError, Health, OpsServer
from stream_dedup.ops.metrics import WorkerMetrics


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Response:
    def __init__(self, status: int, content_type: str, body: bytes) -> None:
        self.status = status
        self.content_type = content_type
        self.body = body

    def json(self) -> dict[str, object]:
        assert self.content_type == "application/json"
        decoded = json.loads(self.body)
        assert isinstance(decoded, dict)
        return decoded


def get(server: OpsServer, path: str) -> Response:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{path}", timeout=5) as response:
            return Response(response.status, response.headers["Content-Type"], response.read())
    except urllib.error.HTTPError as error:
        return Response(error.code, error.headers["Content-Type"], error.read())


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def metrics() -> WorkerMetrics:
    return WorkerMetrics()


@pytest.fixture
def health(clock: FakeClock) -> Health:
    return Health(liveness_timeout_seconds=60.0, clock=clock)


@pytest.fixture
def server(metrics: WorkerMetrics, health: Health) -> Iterator[OpsServer]:
    with OpsServer("127.0.0.1", 0, metrics, health) as running:
        yield running


def test_metrics_serves_the_registry_in_prometheus_text(server: OpsServer, metrics: WorkerMetrics) -> None:
    metrics.documents.labels("duplicate").inc(3)
    response = get(server, "/metrics")
    assert response.status == 200
    assert response.content_type == CONTENT_TYPE_LATEST
    assert 'stream_dedup_documents_total{verdict="duplicate"} 3.0\n' in response.body.decode()


def test_metrics_ignores_a_query_string(server: OpsServer) -> None:
    assert get(server, "/metrics?name[]=stream_dedup_role").status == 200


def test_alive_while_heartbeats_are_recent(server: OpsServer, health: Health, clock: FakeClock) -> None:
    clock.now += 59.0
    response = get(server, "/healthz")
    assert response.status == 200
    assert response.json()["status"] == "ok"
    assert response.json()["heartbeat_age_seconds"] == 59.0


def test_not_alive_once_the_loop_stops_beating(server: OpsServer, health: Health, clock: FakeClock) -> None:
    health.heartbeat()
    clock.now += 61.5
    response = get(server, "/healthz")
    assert response.status == 503
    assert response.json()["status"] == "stalled"
    assert response.json()["heartbeat_age_seconds"] == 61.5
    assert response.json()["liveness_timeout_seconds"] == 60.0


def test_a_heartbeat_revives_a_stalled_loop(server: OpsServer, health: Health, clock: FakeClock) -> None:
    clock.now += 100.0
    assert get(server, "/healthz").status == 503
    health.heartbeat()
    assert get(server, "/healthz").status == 200


def test_a_restoring_worker_is_not_ready(server: OpsServer) -> None:
    response = get(server, "/readyz")
    assert response.status == 503
    assert response.json() == {
        "ready": False,
        "role": "restoring",
        "reason": "restoring state from snapshot and changelog",
    }


def test_a_caught_up_standby_is_ready(server: OpsServer, health: Health) -> None:
    health.set_role("standby")
    response = get(server, "/readyz")
    assert response.status == 200
    assert response.json() == {
        "ready": True,
        "role": "standby",
        "reason": "standby: another replica holds the partitions",
    }


@pytest.mark.parametrize(("role", "status"), [("active", 200), ("stopping", 503), ("restoring", 503)])
def test_readiness_follows_the_role(server: OpsServer, health: Health, role: str, status: int) -> None:
    health.set_role("standby")
    health.set_role(role)  # type: ignore[arg-type]
    response = get(server, "/readyz")
    assert response.status == status
    assert response.json()["role"] == role
    assert response.json()["ready"] is (status == 200)


def test_readiness_reports_what_the_worker_set(server: OpsServer, health: Health) -> None:
    health.set_state(False, "standby", "standby: replaying 1200 changelog records")
    response = get(server, "/readyz")
    assert response.status == 503
    assert response.json() == {"ready": False, "role": "standby", "reason": "standby: replaying 1200 changelog records"}


def test_a_loop_held_up_past_the_stall_limit_is_not_ready_but_alive_and_ready_again_once_it_goes_round(
    server: OpsServer, health: Health, clock: FakeClock
) -> None:
    health.set_role("active")
    health.heartbeat()
    clock.now += READY_STALL_SECONDS - 1
    assert get(server, "/readyz").status == 200
    clock.now += 12  # the loop waits on brokers that went away
    response = get(server, "/readyz")
    assert response.status == 503
    assert response.json()["role"] == "active"
    assert response.json()["reason"] == (
        "the loop has not gone round for 21 s, held up waiting (on the brokers?); "
        "was: active: processing the assigned partitions"
    )
    assert get(server, "/healthz").status == 200, "a bounded wait is no reason to restart the process"
    health.heartbeat()
    assert get(server, "/readyz").json()["ready"] is True


def test_unknown_role_is_refused(health: Health) -> None:
    with pytest.raises(ValueError, match="leader"):
        health.set_state(True, "leader", "")  # type: ignore[arg-type]


def test_liveness_timeout_must_be_positive() -> None:
    with pytest.raises(ValueError, match="liveness_timeout_seconds"):
        Health(liveness_timeout_seconds=0)


@pytest.mark.parametrize("path", ["/index.html", "/metrics/extra", "/health", "/readyz/"])
def test_other_paths_are_not_found(server: OpsServer, path: str) -> None:
    assert get(server, path).status == 404


def test_requests_are_logged_at_debug_not_written_to_stderr(
    server: OpsServer, capfd: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="stream_dedup.ops.http"):
        get(server, "/metrics")
        get(server, "/nowhere")
    assert capfd.readouterr().err == ""
    messages = [record.getMessage() for record in caplog.records if record.levelno == logging.DEBUG]
    assert any("GET /nowhere" in message for message in messages)


def test_serves_concurrent_scrapes(server: OpsServer) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(lambda _: get(server, "/metrics").status, range(32)))
    assert statuses == [200] * 32


def test_port_zero_binds_a_free_port(metrics: WorkerMetrics, health: Health) -> None:
    with OpsServer("127.0.0.1", 0, metrics, health) as first, OpsServer("127.0.0.1", 0, metrics, health) as second:
        assert first.port > 0
        assert second.port > 0
        assert first.port != second.port


def test_close_stops_serving_and_releases_the_port(metrics: WorkerMetrics, health: Health) -> None:
    server = OpsServer("127.0.0.1", 0, metrics, health)
    server.start()
    port = server.port
    server.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    with OpsServer("127.0.0.1", port, metrics, health) as again:
        assert get(again, "/healthz").status == 200
    server.close()  # a second close is harmless


def test_a_port_in_use_is_reported_with_the_address(server: OpsServer, metrics: WorkerMetrics, health: Health) -> None:
    with pytest.raises(AddressError, match=f"127.0.0.1:{server.port}.*choose another port") as raised:
        OpsServer("127.0.0.1", server.port, metrics, health).start()
    assert raised.value.part == "port"


@pytest.mark.parametrize("host", ["999.1.1.1", "no-such-host.invalid"])
def test_a_host_that_is_not_this_machines_is_blamed_on_the_host(
    host: str, metrics: WorkerMetrics, health: Health
) -> None:
    with pytest.raises(AddressError, match="give an address of this machine") as raised:
        OpsServer(host, 0, metrics, health).start()
    assert raised.value.part == "host"


def test_port_is_unknown_before_start(metrics: WorkerMetrics, health: Health) -> None:
    server = OpsServer("127.0.0.1", 0, metrics, health)
    with pytest.raises(RuntimeError, match="not started"):
        _ = server.port
    server.close()  # closing a server that never started is harmless
