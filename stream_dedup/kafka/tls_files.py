"""The client's TLS files, loaded once at start-up the way kafka-python loads them, so a bad one is a bad setting.

kafka-python reads ``ssl_cafile``, ``ssl_certfile``, ``ssl_keyfile`` and
``ssl_password`` only when it opens a connection (each connection builds its
own ``SSLContext``). A file it cannot use then failed the connection, and
the start-up check read that as the broker's silence: "no Kafka answer
([SSL] PEM lib ...)", exit 3 ("a restart retries"), with advice about
``security_protocol``. And a key that is encrypted, with no ``ssl_password``,
made OpenSSL ask for the pass phrase on the terminal, once per connection.

:func:`check_tls_files` loads them into a throwaway context as kafka-python
does (``load_verify_locations``, then ``load_cert_chain``) and raises
:class:`~stream_dedup.errors.ConfigError` (exit 2) naming the setting at fault.
"""

import os
import ssl

from stream_dedup.errors import ConfigError
from stream_dedup.kafka.clients import KafkaConnection


class _NoPasswordError(Exception):
    """The key is encrypted and ``ssl_password`` is not set (raised instead of OpenSSL's terminal prompt)."""


def check_tls_files(connection: KafkaConnection) -> None:
    """Raise :class:`~stream_dedup.errors.ConfigError` for a TLS file the clients could not use; no-op without TLS.

    Checks, in kafka-python's order: each file exists and is a file, the CA
    bundle holds a certificate, the certificate file holds one, the key
    belongs to it and opens with ``ssl_password``.
    """
    if not connection.security_protocol.endswith("SSL"):
        return  # not read at all (the unused-settings warning says so)
    c = connection
    files = (("ssl_cafile", c.ssl_cafile), ("ssl_certfile", c.ssl_certfile), ("ssl_keyfile", c.ssl_keyfile))
    for setting, path in files:
        if path is not None and os.path.isdir(path):
            raise ConfigError(setting, f"{path} is a directory: name the PEM file in it")
        if path is not None and not os.path.isfile(path):
            raise ConfigError(setting, f"no such file: {path}")
    if c.ssl_cafile is not None:
        _check_certificates("ssl_cafile", c.ssl_cafile)
    if c.ssl_certfile is None:
        return  # no client certificate: an ssl_keyfile alone is not read (the unused-settings warning says so)
    _check_certificates("ssl_certfile", c.ssl_certfile)
    _check_key(c.ssl_certfile, c.ssl_keyfile, c.ssl_password)


def _check_certificates(setting: str, path: str) -> None:
    """``path`` holds at least one PEM certificate."""
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(path)
    except (ssl.SSLError, ValueError) as error:
        raise ConfigError(setting, f"{path} holds no PEM certificate ({_reason(error)})") from error


def _check_key(certfile: str, keyfile: str | None, password: str | None) -> None:
    """The private key (in ``keyfile``, else in ``certfile``) opens with ``password`` and belongs to the certificate."""
    asked = []

    def give_password() -> str:
        asked.append(True)
        if password is None:
            raise _NoPasswordError
        return password

    where = keyfile or certfile
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(certfile, keyfile, give_password)
    except _NoPasswordError:
        raise ConfigError("ssl_password", f"is required: the private key in {where} is encrypted") from None
    except ssl.SSLError as error:
        if asked:
            raise ConfigError("ssl_password", f"does not open the private key in {where}") from error
        if error.reason == "KEY_VALUES_MISMATCH":
            raise ConfigError("ssl_keyfile", f"{where} is not the key of the certificate in {certfile}") from error
        if keyfile is None:
            raise ConfigError("ssl_keyfile", f"is needed: {certfile} holds no private key") from error
        raise ConfigError("ssl_keyfile", f"{keyfile} holds no PEM private key ({_reason(error)})") from error


def _reason(error: Exception) -> str:
    """OpenSSL's reason without its source line: ``no certificate or crl found``."""
    if isinstance(error, ssl.SSLError) and error.reason:
        return str(error.reason).replace("_", " ").lower()
    return str(error)
