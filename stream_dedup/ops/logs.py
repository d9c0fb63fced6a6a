"""Logging set-up: one JSON object per line for log collectors, or one text line for people.

Context goes in ``extra`` and comes out as fields, never spliced into the message,
so that a collector can filter on it::

    log.info("duplicate published", extra={"partition": 3, "offset": 17, "document_id": "x"})

JSON:  ``{"time": "2026-11-21T10:00:00.123Z", "level": "INFO", "logger": "stream_dedup.worker",
"message": "duplicate published", "partition": 3, "offset": 17, "document_id": "x"}``

text:  ``2026-11-21 10:00:00,123 INFO stream_dedup.worker: duplicate published [partition=3 offset=17 document_id=x]``

Times are UTC in both formats.
"""

import json
import logging
import sys
import time
from typing import Any, TextIO

import numpy as np

from stream_dedup.errors import ConfigError

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("json", "text", "auto")

#: Context fields that come first, in this order, in both formats.
_KNOWN_FIELDS = ("topic", "partition", "offset", "document_id", "role")

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {
    "message",
    "asctime",
    "taskName",
}


def configure_logging(level: str, log_format: str, stream: TextIO | None = None) -> None:
    """Send every log record at ``level`` and above to ``stream`` in ``log_format``.

    Replaces whatever handlers the root logger had, so that calling it again
    changes the set-up instead of duplicating every line.

    Args:
        level: ``DEBUG``, ``INFO``, ``WARNING``, ``ERROR`` or ``CRITICAL`` (any case).
            kafka-python logs routine events at INFO, so its ``kafka`` loggers are
            held at WARNING unless ``level`` is DEBUG.
        log_format: ``json``, ``text`` or ``auto`` (text on a terminal, else json).
        stream: where lines go (default ``sys.stderr``).

    Raises:
        ConfigError: naming ``log_level`` or ``log_format``.
    """
    level_name = str(level).upper()
    if level_name not in LOG_LEVELS:
        raise ConfigError("log_level", f"must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    if log_format not in LOG_FORMATS:
        raise ConfigError("log_format", f"must be one of {', '.join(LOG_FORMATS)}, got {log_format!r}")
    target = stream if stream is not None else sys.stderr
    if log_format == "auto":
        log_format = "text" if _is_terminal(target) else "json"

    handler = logging.StreamHandler(target)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(SaslWarningOnce())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level_name)
    # NOTSET hands the decision back to the root level, also when a second call lowers it to DEBUG.
    logging.getLogger("kafka").setLevel(logging.NOTSET if level_name == "DEBUG" else logging.WARNING)


class SaslWarningOnce(logging.Filter):
    """Let each of kafka-python's SASL warnings through once per process, not once per connection.

    With ``security_protocol = SASL_PLAINTEXT`` kafka-python warns at every
    connection it authenticates that the credentials go unencrypted ("Sending
    username and password in the clear", "Exchanging credentials in the clear
    ..."): 24 lines per worker at start-up, 95 for a sharded stage's four
    roles, and more at every reconnect and session restart. The first says it.
    """

    def __init__(self) -> None:
        super().__init__()
        self._seen: set[tuple[str, object]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.WARNING or not record.name.startswith("kafka.net.sasl"):
            return True
        said = (record.name, record.msg)
        if said in self._seen:
            return False
        self._seen.add(said)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per record: ``time``, ``level``, ``logger``, ``message``, extras, ``exception``."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _utc_time(record, "%Y-%m-%dT%H:%M:%S", ".", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in _extra_fields(record):
            # An extra named like a base field must not overwrite it.
            entry[f"extra_{key}" if key in entry else key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=_json_default, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message [key=value ...]``, then the traceback if any."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_utc_time(record, '%Y-%m-%d %H:%M:%S', ',', '')} {record.levelname} {record.name}: "
        line += record.getMessage()
        fields = " ".join(f"{key}={value}" for key, value in _extra_fields(record))
        if fields:
            line += f" [{fields}]"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


def _extra_fields(record: logging.LogRecord) -> list[tuple[str, Any]]:
    """The record's ``extra`` fields: the known ones first in a fixed order, then the rest."""
    attributes = vars(record)
    known = [(key, attributes[key]) for key in _KNOWN_FIELDS if key in attributes]
    others = [
        (key, value) for key, value in attributes.items() if key not in _RECORD_ATTRIBUTES and key not in _KNOWN_FIELDS
    ]
    return known + others


def _utc_time(record: logging.LogRecord, date_format: str, decimal: str, suffix: str) -> str:
    return f"{time.strftime(date_format, time.gmtime(record.created))}{decimal}{int(record.msecs):03d}{suffix}"


def _json_default(value: object) -> object:
    # numpy scalars (partitions, offsets taken from arrays) stay numbers; anything else becomes its str.
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
