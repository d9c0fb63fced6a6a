"""Start-up against a real SSL listener that requires client certificates (mutual TLS).

One jar broker for the module, with a PLAINTEXT listener and an SSL one whose
clients must present a certificate its CA signed. A certificate refused is
exit 4 naming ssl_certfile: under TLS 1.3 the broker's refusal arrives after
the client's side of the handshake, and it was read as "no Kafka answer"
(exit 3, "a restart retries", check security_protocol).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from stream_dedup.cli.main import main
from stream_dedup.cli.produce_sample_command import sample_documents
from stream_dedup.kafka.record_lookup import RecordLookup
from stream_dedup.worker.settings import ConnectionSettings
from tests.tls import CLIENT_KEY_PASSWORD, Certificates, make_certificates

from .broker import JarBroker, jar_broker

pytestmark = pytest.mark.kafka


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_broker(certificates: Certificates) -> Iterator[JarBroker]:
    with jar_broker(ssl_dir=certificates.ca.parent) as broker:
        yield broker


def _tls_flags(broker: JarBroker, ca: Path, certificate: Path | None = None, key: Path | None = None) -> list[str]:
    assert broker.ssl_bootstrap is not None
    flags = ["--bootstrap-servers", broker.ssl_bootstrap, "--security-protocol", "SSL", "--ssl-cafile", str(ca)]
    if certificate is not None:
        flags += ["--ssl-certfile", str(certificate)]
    if key is not None:
        flags += ["--ssl-keyfile", str(key)]
    return flags


def test_produce_sample_watch_and_text_lookups_work_through_mutual_tls(
    tls_broker: JarBroker,
    certificates: Certificates,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c = certificates
    topic = f"tls-sample-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("STREAM_DEDUP_SSL_PASSWORD", CLIENT_KEY_PASSWORD)
    flags = _tls_flags(tls_broker, c.ca, c.client_certificate, c.client_key)
    assert main(["produce-sample", *flags, "--topic", topic, "--count", "25"]) == 0
    assert main(["watch", *flags, "--topic", topic, "--format", "json", "--count", "25", "--idle-seconds", "20"]) == 0
    out, err = capsys.readouterr()
    assert sorted(json.loads(line)["id"] for line in out.splitlines()) == [d["id"] for d in sample_documents()[:25]]
    assert CLIENT_KEY_PASSWORD not in out + err
    assert tls_broker.ssl_bootstrap is not None
    connection = ConnectionSettings(
        bootstrap_servers=tls_broker.ssl_bootstrap,
        security_protocol="SSL",
        ssl_cafile=str(c.ca),
        ssl_certfile=str(c.client_certificate),
        ssl_keyfile=str(c.client_key),
        ssl_password=CLIENT_KEY_PASSWORD,
    ).connection("tests-lookup")
    with RecordLookup(connection, timeout_seconds=20) as lookup:  # what the stage re-reads texts with
        assert json.loads(lookup.fetch(topic, 0, 0).value)["id"].startswith("ad-")


@pytest.mark.parametrize("client", ["no certificate", "a certificate of another CA"])
@pytest.mark.parametrize("command", ["run", "produce-sample", "watch"])
def test_a_client_certificate_the_broker_refuses_exits_4_naming_ssl_certfile(
    client: str, command: str, tls_broker: JarBroker, certificates: Certificates, capsys: pytest.CaptureFixture[str]
) -> None:
    c = certificates
    own = [] if client == "no certificate" else [c.stranger_certificate, c.stranger_key]
    argv = [command, *_tls_flags(tls_broker, c.ca, *own), "--metrics-port", "0"]
    if command != "run":
        argv = [a for a in argv if a not in ("--metrics-port", "0")] + ["--count", "1"]
    assert main(argv) == 4
    err = capsys.readouterr().err
    assert f"{tls_broker.ssl_bootstrap}: client certificate refused" in err
    assert "Check ssl_certfile and ssl_keyfile" in err


def test_a_broker_certificate_of_an_untrusted_ca_exits_4_naming_ssl_cafile(
    tls_broker: JarBroker, certificates: Certificates, capsys: pytest.CaptureFixture[str]
) -> None:
    c = certificates
    flags = _tls_flags(tls_broker, c.other_ca, c.client_certificate, c.client_key)
    assert main(["produce-sample", *flags, "--ssl-password", CLIENT_KEY_PASSWORD, "--count", "1"]) == 4
    err = capsys.readouterr().err
    assert f"{tls_broker.ssl_bootstrap}: TLS handshake failed" in err and "CERTIFICATE_VERIFY_FAILED" in err
    assert "ssl_cafile" in err
