"""Throwaway TLS certificates for the tests, made with the openssl command (no key is kept in the repository)."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: The pass phrase of :attr:`Certificates.client_key`.
CLIENT_KEY_PASSWORD = "client-key-pass"


@dataclass(frozen=True)
class Certificates:
    """PEM files: a CA, a broker (key and certificate in one file, for 127.0.0.1) and a client it signed,
    and a stranger: a client certificate of another CA."""

    ca: Path
    broker: Path
    client_certificate: Path
    #: Encrypted with :data:`CLIENT_KEY_PASSWORD`.
    client_key: Path
    other_ca: Path
    stranger_certificate: Path
    stranger_key: Path


def make_certificates(directory: Path) -> Certificates:
    """Write the certificates into ``directory`` (valid for a day). Needs the ``openssl`` command."""
    if shutil.which("openssl") is None:
        raise RuntimeError("the TLS tests need the openssl command to make their certificates")
    directory.mkdir(parents=True, exist_ok=True)
    for ca in ("ca", "other-ca"):
        _openssl(
            directory,
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            f"/CN=test {ca}",
            "-keyout",
            f"{ca}.key",
            "-out",
            f"{ca}.pem",
        )
    _signed(directory, "broker", "ca", "IP:127.0.0.1,DNS:localhost")
    _signed(directory, "client", "ca", "DNS:client")
    _signed(directory, "stranger", "other-ca", "DNS:stranger")
    broker = (directory / "broker.key").read_text() + (directory / "broker.crt").read_text()
    (directory / "broker.pem").write_text(broker)
    _openssl(
        directory,
        "pkcs8",
        "-topk8",
        "-in",
        "client.key",
        "-out",
        "client-encrypted.key",
        "-passout",
        f"pass:{CLIENT_KEY_PASSWORD}",
        "-v2",
        "aes-256-cbc",
    )
    return Certificates(
        ca=directory / "ca.pem",
        broker=directory / "broker.pem",
        client_certificate=directory / "client.crt",
        client_key=directory / "client-encrypted.key",
        other_ca=directory / "other-ca.pem",
        stranger_certificate=directory / "stranger.crt",
        stranger_key=directory / "stranger.key",
    )


def _signed(directory: Path, name: str, ca: str, names: str) -> None:
    """``name.key`` and ``name.crt``, signed by ``ca``, for the subject alternative ``names``."""
    _openssl(
        directory,
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-subj",
        f"/CN={name}",
        "-keyout",
        f"{name}.key",
        "-out",
        f"{name}.csr",
    )
    (directory / f"{name}.ext").write_text(f"subjectAltName={names}\n")
    _openssl(
        directory,
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        f"{ca}.pem",
        "-CAkey",
        f"{ca}.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-extfile",
        f"{name}.ext",
        "-out",
        f"{name}.crt",
    )


def _openssl(directory: Path, *arguments: str) -> None:
    subprocess.run(["openssl", *arguments], cwd=directory, check=True, capture_output=True, timeout=60)
