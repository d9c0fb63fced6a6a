"""The start-up check of the bootstrap servers: one line that says why Kafka cannot be used.

kafka-python reports every start-up failure alike, after its whole bootstrap
timeout: ``KafkaTimeoutError: Unable to bootstrap from [...]``, whether the
address is wrong, nothing listens there, TLS fails or the password is wrong.
So before the stage builds its clients, :func:`check_bootstrap_servers` asks
each bootstrap server itself, in the order a client meets the failures:

1. the host name resolves (else "DNS lookup failed");
2. a TCP connection opens within the timeout ("connection refused",
   "timed out after N s", "unreachable");
3. kafka-python's own connection code (the very TLS and SASL code the
   clients run) completes its handshake: TLS ("TLS handshake failed",
   "client certificate refused"), the ApiVersions exchange, SASL ("authentication failed", "SASL mechanism not
   enabled", "not a SASL listener");
4. the broker answers a metadata request (a PLAINTEXT client on a SASL or
   TLS listener gets through 3 and is dropped here: "no Kafka answer").

A broker that takes the connection and then says nothing at all within the
timeout, in 3 or 4, is hung or overloaded (a long GC pause, a stopped JVM),
not set up otherwise: "answered nothing", and the advice is about the broker,
not the settings.

One server that passes all four is enough (the clients find the others in
its metadata); the failing ones are logged. If none passes, the error names
every server with its answer and the settings involved, never a password.

Step 3 drives kafka-python's connection manager (``kafka.net``), which is
not a documented API; if a kafka-python release moves it, the check keeps
steps 1, 2 and 4 through the public admin client and says less about step 3.
"""

import contextlib
import logging
import socket
import time
from dataclasses import dataclass
from typing import Any

from kafka import KafkaAdminClient
from kafka.errors import (
    IllegalSaslStateError,
    KafkaError,
    RequestTimedOutError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)

from stream_dedup.errors import BrokersRejectedError, BrokersUnreachableError, ConfigError
from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.tls_files import check_tls_files

log = logging.getLogger(__name__)

#: Seconds a step may take per server: long enough for a slow TLS handshake,
#: short enough that a wrong address is reported in seconds, not after 30 s.
DEFAULT_TIMEOUT_SECONDS = 5.0

#: Answers meaning the broker is there but refuses us: fixing a setting helps,
#: waiting does not (exit 4 rather than 3).
REJECTIONS = frozenset(
    {
        "TLS handshake failed",
        "client certificate refused",
        "authentication failed",
        "SASL mechanism not enabled",
        "not a SASL listener",
    }
)


@dataclass(frozen=True)
class BrokerAnswer:
    """What one bootstrap server answered: ``problem`` is None when it can be used."""

    server: str
    problem: str | None = None
    detail: str = ""

    def __str__(self) -> str:
        if self.problem is None:
            return f"{self.server} answered"
        return f"{self.server}: {self.problem}" + (f" ({self.detail})" if self.detail else "")


def check_bootstrap_servers(connection: KafkaConnection, timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS) -> None:
    """Return if at least one bootstrap server can be used; else raise a one-line error.

    Raises :class:`~stream_dedup.errors.BrokersRejectedError` (exit 4) if any
    server refused us (TLS, SASL), else
    :class:`~stream_dedup.errors.BrokersUnreachableError` (exit 3); and
    :class:`~stream_dedup.errors.ConfigError` (exit 2) for a TLS file the
    clients could not use (:mod:`stream_dedup.kafka.tls_files`).
    """
    check_tls_files(connection)
    answers = [probe_server(server, connection, timeout_seconds) for server in connection.servers()]
    if any(answer.problem is None for answer in answers):
        for answer in answers:
            if answer.problem is not None:
                log.warning("bootstrap server %s", answer)
        return
    message = f"cannot use Kafka: {'; '.join(map(str, answers))}. {_settings(connection)}. {_advice(answers)}"
    if any(answer.problem in REJECTIONS for answer in answers):
        raise BrokersRejectedError(message)
    raise BrokersUnreachableError(message)


def probe_server(server: str, connection: KafkaConnection, timeout_seconds: float) -> BrokerAnswer:
    """Steps 1 to 4 of the module docstring against one ``host:port``."""
    host, port = server_address(server)
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        return BrokerAnswer(server, "DNS lookup failed", str(error.strerror))
    try:
        with socket.create_connection((host, port), timeout=timeout_seconds):
            pass
    except ConnectionRefusedError:
        return BrokerAnswer(server, "connection refused")
    except TimeoutError:
        return BrokerAnswer(server, f"timed out after {timeout_seconds:g} s")
    except OSError as error:
        return BrokerAnswer(server, "unreachable", str(error.strerror or error))
    options = {**connection.options(), "bootstrap_servers": [server]}
    # kafka-python logs each failed step at ERROR; the answer returned says it once.
    kafka_log = logging.getLogger("kafka")
    level = kafka_log.level
    kafka_log.setLevel(logging.CRITICAL)
    try:
        return _handshake(server, options, timeout_seconds) or BrokerAnswer(server)
    finally:
        kafka_log.setLevel(level)


def server_address(server: str) -> tuple[str, int]:
    """The host and port of one bootstrap server, ``host:port`` (``[::1]:9092`` for IPv6).

    Raises :class:`~stream_dedup.errors.ConfigError` naming ``bootstrap_servers``
    for anything else: a port out of range was tried and reported as "connection
    refused" (exit 3, as if no broker listened), and a digit ``isdigit`` takes
    but ``int`` does not (``²``) ended in a traceback.
    """
    host, _, port_text = server.rpartition(":")
    host = host.strip("[]")
    if host and port_text.isascii() and port_text.isdigit() and 1 <= int(port_text) <= 65_535:
        return host, int(port_text)
    raise ConfigError("bootstrap_servers", f"{server!r} is not host:port (a port from 1 to 65535)")


def _handshake(server: str, options: dict[str, Any], timeout_seconds: float) -> BrokerAnswer | None:
    """Steps 3 and 4 with kafka-python's connection code. None if they passed; else what failed."""
    try:
        from kafka.net.manager import KafkaConnectionManager
        from kafka.net.selector import NetworkSelector
    except ImportError:  # moved in a later kafka-python: the admin client does step 4
        return _metadata(server, options, timeout_seconds)
    timeout_ms = int(timeout_seconds * 1000)
    options = {**options, "request_timeout_ms": timeout_ms, "socket_connection_setup_timeout_ms": timeout_ms}
    net = NetworkSelector(**options)
    manager = KafkaConnectionManager(net, **options)
    try:
        node = manager.cluster.bootstrap_brokers()[0]
        conn = manager.get_connection(
            node.node_id, timeout_ms=timeout_ms, pop_on_close=False, refresh_metadata_on_err=False
        )
        sent = _record_requests(conn)
        net.poll(timeout_ms=timeout_ms + 1000, future=conn.init_future)
        if not conn.init_future.is_done:
            return BrokerAnswer(server, "answered nothing", f"no handshake within {timeout_seconds:g} s")
        if conn.init_future.failed():
            return _classify(server, conn.init_future.exception, sent[-1] if sent else "")
        metadata = net.call_soon_with_future(manager.cluster.refresh_metadata, node.node_id)
        net.poll(timeout_ms=timeout_ms + 1000, future=metadata)
        if not metadata.is_done:
            return BrokerAnswer(server, "answered nothing", f"no metadata within {timeout_seconds:g} s")
        if metadata.failed():
            return _classify(server, metadata.exception)
        return None
    finally:
        with contextlib.suppress(Exception):
            manager.close()
            net.close()


def _record_requests(conn: Any) -> list[str]:
    """The names of the requests sent on ``conn``, in order (its ``_send_request`` wrapped)."""
    sent: list[str] = []
    send = conn._send_request

    def recording_send(request: Any, *args: Any, **kwargs: Any) -> Any:
        sent.append(type(request).__name__)
        return send(request, *args, **kwargs)

    conn._send_request = recording_send
    return sent


def _classify(server: str, error: BaseException, last_request: str = "") -> BrokerAnswer:
    """A kafka-python handshake failure in our words; ``last_request`` is the last request sent."""
    if isinstance(error, SaslAuthenticationFailedError):
        detail = str(error).split("Authentication failed: ", 1)[-1].removeprefix("SaslAuthenticationFailedError: ")
        return BrokerAnswer(server, "authentication failed", detail)
    if isinstance(error, UnsupportedSaslMechanismError):
        return BrokerAnswer(server, "SASL mechanism not enabled", str(error))
    if isinstance(error, IllegalSaslStateError):
        return BrokerAnswer(server, "not a SASL listener", "it expects no SASL handshake")
    if isinstance(error, RequestTimedOutError):
        return BrokerAnswer(server, "answered nothing", str(error).removeprefix("[Error 7] RequestTimedOutError: "))
    text = str(error)
    # A broker refusing the credentials may close the socket without sending its
    # answer (it delays the close, not always the answer): kafka-python then only
    # says "socket disconnected". Which request was in flight says what failed.
    if last_request.startswith("SaslAuthenticate"):
        return BrokerAnswer(server, "authentication failed", "the broker closed the connection on the credentials")
    if last_request.startswith("SaslHandshake"):
        return BrokerAnswer(server, "SASL mechanism not enabled", "the broker closed the connection on the mechanism")
    # A client certificate the broker refuses is answered with a TLS alert. Under TLS 1.3 the client has
    # finished its side of the handshake by then, so kafka-python fails the first read instead ("no Kafka
    # answer", exit 3, which said to check security_protocol); under TLS 1.2 the handshake itself fails.
    alert = _tls_alert(text)
    if alert and ("CERTIFICATE" in alert or "UNKNOWN_CA" in alert):
        return BrokerAnswer(server, "client certificate refused", text[text.index("[SSL: ") :])
    if "Handshake failed" in text or alert:
        return BrokerAnswer(server, "TLS handshake failed", text.split("Handshake failed: ", 1)[-1])
    return BrokerAnswer(server, "no Kafka answer", text)


def _tls_alert(text: str) -> str | None:
    """The name of the TLS alert the broker sent, in OpenSSL's words (``SSLV3_ALERT_BAD_CERTIFICATE``); None if none."""
    _, found, rest = text.partition("[SSL: ")
    name = rest.split("]", 1)[0]
    return name if found and "_ALERT_" in name else None


def _metadata(server: str, options: dict[str, Any], timeout_seconds: float) -> BrokerAnswer | None:
    """Step 4 alone, through the public admin client (which retries until its timeout)."""
    timeout_ms = int(timeout_seconds * 1000)
    started = time.monotonic()
    try:
        admin = KafkaAdminClient(**options, bootstrap_timeout_ms=timeout_ms, request_timeout_ms=timeout_ms)
    except KafkaError as error:
        return BrokerAnswer(
            server, "no Kafka answer", f"{type(error).__name__} after {time.monotonic() - started:.0f} s"
        )
    try:
        admin.describe_cluster()
    except KafkaError as error:
        return BrokerAnswer(server, "no Kafka answer", str(error))
    finally:
        admin.close()
    return None


def _settings(connection: KafkaConnection) -> str:
    """The settings involved, by the stage's names (``sasl_username``, not kafka-python's), no password."""
    c = connection
    shown = [f"bootstrap_servers={c.bootstrap_servers}", f"security_protocol={c.security_protocol}"]
    if c.security_protocol.startswith("SASL"):
        shown += [f"sasl_mechanism={c.sasl_mechanism}", f"sasl_username={c.sasl_plain_username!r}"]
        shown.append("sasl_password " + ("set" if c.sasl_plain_password else "NOT set"))
    if c.security_protocol.endswith("SSL"):
        shown += [f"{name}={getattr(c, name)}" for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile")]
    return "Settings: " + ", ".join(shown)


def _advice(answers: list[BrokerAnswer]) -> str:
    """What to do about the most telling answer (a refusal says more than a timeout)."""
    problems = {answer.problem for answer in answers}
    for problem, advice in (
        ("authentication failed", "Check sasl_username, sasl_password and sasl_mechanism."),
        ("SASL mechanism not enabled", "Set sasl_mechanism to one the brokers enable."),
        ("not a SASL listener", "Check security_protocol: this listener takes no SASL."),
        (
            "client certificate refused",
            "Check ssl_certfile and ssl_keyfile: the brokers require a client certificate their truststore trusts.",
        ),
        ("TLS handshake failed", "Check security_protocol and ssl_cafile, ssl_certfile, ssl_keyfile."),
        ("no Kafka answer", "Check security_protocol (it must be the listener's) and sasl_mechanism."),
        (
            "answered nothing",
            "Check the brokers: they take connections but answer nothing, hung or overloaded "
            "(their logs, GC pauses, disks); a restart retries.",
        ),
        ("DNS lookup failed", "Check the host names in bootstrap_servers."),
        ("connection refused", "Check bootstrap_servers: is a broker listening on that port?"),
    ):
        if problem in problems:
            return advice
    return "Check bootstrap_servers and the network path to the brokers (firewall, advertised listeners)."
