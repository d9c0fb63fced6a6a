"""Find a real Kafka broker for the tests.

provide_bootstrap_servers() tries, in order:
  1. env KAFKA_BOOTSTRAP_SERVERS (a broker someone already runs);
  2. a testcontainers apache/kafka container, if a Docker engine answers;
  3. the local broker from Apache's jars (scripts/kafka/broker.sh), needing only Java and
     Maven: fetched once into .cache/kafka, started on a free port with a temporary data
     dir, stopped at the end.
If none works it raises NoBrokerError: a missing broker is never a skip (in CI, CI=true,
that would hide the whole Kafka test suite).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BROKER_SH = REPO_ROOT / "scripts" / "kafka" / "broker.sh"
log = logging.getLogger(__name__)


class NoBrokerError(RuntimeError):
    """No Kafka broker could be found or started."""


def kafka_version() -> str:
    """The Kafka version pinned in scripts/kafka/pom.xml (the container uses the same)."""
    pom = (REPO_ROOT / "scripts" / "kafka" / "pom.xml").read_text()
    match = re.search(r"<kafka.version>(.+?)</kafka.version>", pom)
    assert match, "no <kafka.version> in scripts/kafka/pom.xml"
    return match.group(1)


def wait_for_broker(bootstrap: str, timeout: float = 30.0) -> None:
    """Block until the broker at `bootstrap` answers metadata with at least one broker."""
    from kafka import KafkaAdminClient

    deadline = time.monotonic() + timeout
    last_error: Exception | None = None
    while time.monotonic() < deadline:
        admin = None
        try:
            admin = KafkaAdminClient(
                bootstrap_servers=bootstrap,
                client_id="stream-dedup-tests-wait",
                bootstrap_timeout_ms=5000,
                request_timeout_ms=5000,
            )
            if admin.describe_cluster()["brokers"]:
                return
        except Exception as exc:  # any client error means "not ready yet"
            last_error = exc
        finally:
            if admin is not None:
                admin.close()
        time.sleep(0.5)
    raise NoBrokerError(f"Kafka at {bootstrap} not ready after {timeout:.0f}s: {last_error!r}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _docker_available() -> bool:
    try:
        import docker

        client = docker.from_env(timeout=3)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # no SDK, no socket, engine down: all mean "no Docker"
        return False


@contextlib.contextmanager
def _container_broker() -> Iterator[str]:
    # testcontainers' KafkaContainer drives Confluent's cp-kafka start scripts and rejects
    # apache/kafka 4.x tags in KRaft mode, so this runs the apache/kafka image directly.
    # Clients reach the broker on a host port, which must also be the advertised one: bind a
    # port chosen beforehand instead of letting Docker pick one after start.
    from testcontainers.core.container import DockerContainer

    port = _free_port()
    container = DockerContainer(f"apache/kafka:{kafka_version()}")
    host = container.get_docker_client().host()
    # Setting any KAFKA_* variable replaces the image's default config, so all are needed.
    for key, value in {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": "1@localhost:9093",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_LISTENERS": "PLAINTEXT://:9092,CONTROLLER://:9093",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://{host}:{port}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_OFFSETS_TOPIC_NUM_PARTITIONS": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_NUM_PARTITIONS": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_TRANSACTION_ABORT_TIMED_OUT_TRANSACTION_CLEANUP_INTERVAL_MS": "1000",
        "KAFKA_NUM_PARTITIONS": "1",
    }.items():
        container.with_env(key, value)
    container.with_bind_ports(9092, port)
    container.start()
    try:
        bootstrap = f"{host}:{port}"
        wait_for_broker(bootstrap, timeout=90)
        yield bootstrap
    finally:
        container.stop()


def _run_broker_sh(*args: str, timeout: float) -> str:
    try:
        proc = subprocess.run(
            ["bash", str(BROKER_SH), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise NoBrokerError(f"scripts/kafka/broker.sh {' '.join(args)} timed out") from exc
    if proc.returncode != 0:
        raise NoBrokerError(
            f"scripts/kafka/broker.sh {' '.join(args)} failed ({proc.returncode}):\n{proc.stderr[-12000:]}"
        )
    return proc.stdout


class JarBroker:
    """A local jar broker of our own, which a test may stop and start again (same port, same data).

    With ``sasl_users`` (name -> password) it also has a SASL_PLAINTEXT listener
    (mechanism PLAIN) at ``sasl_bootstrap``; with ``ssl_dir`` (``broker.pem`` and
    ``ca.pem``, see :func:`tests.tls.make_certificates`) an SSL listener requiring
    client certificates at ``ssl_bootstrap``; ``bootstrap`` stays PLAINTEXT.
    ``overrides`` (property -> value) change the broker's own settings.
    """

    def __init__(
        self,
        sasl_users: dict[str, str] | None = None,
        overrides: dict[str, str] | None = None,
        ssl_dir: Path | None = None,
    ) -> None:
        if shutil.which("java") is None:
            raise NoBrokerError("the local jar broker needs Java (java on PATH)")
        _run_broker_sh("fetch", timeout=900)  # once per checkout: Maven Central download
        self.data = tempfile.mkdtemp(prefix="stream-dedup-kafka-")
        self.port = _free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.sasl_users = dict(sasl_users or {})
        self.sasl_port = _free_port() if self.sasl_users else None
        self.sasl_bootstrap = f"127.0.0.1:{self.sasl_port}" if self.sasl_users else None
        self.ssl_dir = ssl_dir
        self.ssl_port = _free_port() if ssl_dir else None
        self.ssl_bootstrap = f"127.0.0.1:{self.ssl_port}" if ssl_dir else None
        self.overrides = dict(overrides or {})

    def start(self) -> None:
        sasl = ["--sasl-port", str(self.sasl_port)] if self.sasl_port else []
        for name, password in self.sasl_users.items():
            sasl += ["--sasl-user", f"{name}:{password}"]
        tls = ["--ssl-port", str(self.ssl_port), "--ssl-dir", str(self.ssl_dir)] if self.ssl_dir else []
        overrides = [argument for item in self.overrides.items() for argument in ("--override", "=".join(item))]
        _run_broker_sh("start", "--port", str(self.port), "--data", self.data, *sasl, *tls, *overrides, timeout=120)
        wait_for_broker(self.bootstrap, timeout=30)

    def stop(self) -> None:
        _run_broker_sh("stop", "--data", self.data, timeout=60)

    def pause(self) -> None:
        """SIGSTOP: the broker hangs without dying (a long GC pause, a frozen VM); its connections stay open
        and nothing answers on them until :meth:`resume`."""
        os.kill(self._pid(), signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`: the broker goes on where it stopped, its timers late."""
        os.kill(self._pid(), signal.SIGCONT)

    def kill(self) -> None:
        """kill -9, as a crash: no clean shutdown, the logs recovered at the next start."""
        pid = self._pid()
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)

    def _pid(self) -> int:
        return int(Path(self.data, "broker.pid").read_text())


@contextlib.contextmanager
def _local_jar_broker() -> Iterator[str]:
    with jar_broker() as broker:
        yield broker.bootstrap


@contextlib.contextmanager
def jar_broker(
    sasl_users: dict[str, str] | None = None, overrides: dict[str, str] | None = None, ssl_dir: Path | None = None
) -> Iterator[JarBroker]:
    """A started :class:`JarBroker`, stopped and deleted at the end."""
    broker = JarBroker(sasl_users, overrides, ssl_dir)
    try:
        broker.start()
        yield broker
    finally:
        # Always stop, even if start timed out half-way: no JVM may outlive the tests.
        with contextlib.suppress(Exception):
            broker.stop()
        shutil.rmtree(broker.data, ignore_errors=True)


@contextlib.contextmanager
def provide_bootstrap_servers() -> Iterator[str]:
    """Yield "host:port" of a running Kafka broker; see the module docstring for the order."""
    env = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "").strip()
    if env:
        log.info("Kafka: using KAFKA_BOOTSTRAP_SERVERS=%s", env)
        wait_for_broker(env, timeout=30)
        yield env
        return
    if _docker_available():
        log.info("Kafka: Docker engine found, starting apache/kafka:%s", kafka_version())
        with _container_broker() as bootstrap:
            yield bootstrap
        return
    log.info("Kafka: no Docker engine, starting the local jar broker")
    with contextlib.ExitStack() as stack:
        try:
            bootstrap = stack.enter_context(_local_jar_broker())
        except NoBrokerError as exc:
            in_ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
            raise NoBrokerError(
                "no Kafka broker: KAFKA_BOOTSTRAP_SERVERS is unset, no Docker engine answers,"
                " and the local jar broker failed"
                f"{' (in CI a missing broker is a failure)' if in_ci else ''}:\n{exc}"
            ) from exc
        yield bootstrap
