"""The TLS files are loaded at start-up: one the clients could not use is a bad setting (exit 2) naming itself.

Before, each went to the brokers' check and came back "no Kafka answer" (exit 3, "a restart retries"),
with advice to check security_protocol; an encrypted key without ssl_password prompted on the terminal.
"""

from __future__ import annotations

import pytest

from stream_dedup.cli.main import main
from stream_dedup.errors import ConfigError
from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.tls_files import check_tls_files
from tests.tls import CLIENT_KEY_PASSWORD, Certificates, make_certificates


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(tmp_path_factory.mktemp("tls"))


def _connection(c: Certificates, **changes: object) -> KafkaConnection:
    given: dict[str, object] = {
        "ssl_cafile": str(c.ca),
        "ssl_certfile": str(c.client_certificate),
        "ssl_keyfile": str(c.client_key),
        "ssl_password": CLIENT_KEY_PASSWORD,
        **changes,
    }
    return KafkaConnection("127.0.0.1:1", security_protocol="SSL", **given)  # type: ignore[arg-type]


def _refusal(connection: KafkaConnection) -> ConfigError:
    with pytest.raises(ConfigError) as refused:
        check_tls_files(connection)
    return refused.value


def test_usable_files_pass(certificates: Certificates) -> None:
    check_tls_files(_connection(certificates))
    check_tls_files(_connection(certificates, ssl_certfile=None, ssl_keyfile=None, ssl_password=None))


def test_a_ca_file_without_a_certificate_names_ssl_cafile(certificates: Certificates) -> None:
    error = _refusal(_connection(certificates, ssl_cafile=str(certificates.stranger_key)))
    assert error.setting == "ssl_cafile" and "holds no PEM certificate" in str(error)


def test_a_certificate_file_without_a_certificate_names_ssl_certfile(certificates: Certificates) -> None:
    error = _refusal(_connection(certificates, ssl_certfile=str(certificates.stranger_key)))
    assert error.setting == "ssl_certfile" and "holds no PEM certificate" in str(error)


def test_an_encrypted_key_without_password_names_ssl_password_instead_of_prompting(certificates: Certificates) -> None:
    error = _refusal(_connection(certificates, ssl_password=None))
    assert error.setting == "ssl_password" and "is required" in str(error)
    assert str(certificates.client_key) in str(error)


def test_a_wrong_key_password_names_ssl_password(certificates: Certificates) -> None:
    error = _refusal(_connection(certificates, ssl_password="not-it"))
    assert error.setting == "ssl_password" and "does not open the private key" in str(error)


def test_a_key_of_another_certificate_names_ssl_keyfile(certificates: Certificates) -> None:
    error = _refusal(_connection(certificates, ssl_keyfile=str(certificates.stranger_key), ssl_password=None))
    assert error.setting == "ssl_keyfile" and "is not the key of the certificate" in str(error)


def test_a_certificate_without_its_key_names_ssl_keyfile(certificates: Certificates) -> None:
    error = _refusal(_connection(certificates, ssl_keyfile=None, ssl_password=None))
    assert error.setting == "ssl_keyfile" and "holds no private key" in str(error)


def test_files_are_not_read_without_tls(certificates: Certificates) -> None:
    """security_protocol PLAINTEXT or SASL_PLAINTEXT reads no TLS file: a bad one only draws the unused warning."""
    broken = _connection(certificates, ssl_cafile=str(certificates.stranger_key))
    for protocol in ("PLAINTEXT", "SASL_PLAINTEXT"):
        check_tls_files(KafkaConnection("127.0.0.1:1", security_protocol=protocol, ssl_cafile=broken.ssl_cafile))


def test_run_exits_2_naming_the_setting_before_trying_the_brokers(
    certificates: Certificates, capsys: pytest.CaptureFixture[str]
) -> None:
    tls = ["--security-protocol", "SSL", "--ssl-cafile", str(certificates.ca)]
    client = ["--ssl-certfile", str(certificates.client_certificate), "--ssl-keyfile", str(certificates.client_key)]
    argv = ["run", "--bootstrap-servers", "127.0.0.1:1", *tls, *client, "--ssl-password", "not-it"]
    assert main([*argv, "--metrics-port", "0", "--log-level", "ERROR"]) == 2
    err = capsys.readouterr().err
    assert "invalid setting 'ssl_password': does not open the private key" in err
    assert "cannot use Kafka" not in err
