"""Logging set-up: JSON lines for collectors, text lines for people, one handler however often configured."""

import calendar
import io
import json
import logging
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stream_dedup.errors import ConfigError
from stream_dedup.ops.logs import JsonFormatter, TextFormatter, configure_logging

# 2026-11-21 10:00:00.123 UTC
CREATED = calendar.timegm((2026, 11, 21, 10, 0, 0)) + 0.123


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def record(message: str = "duplicate published", **extra: Any) -> logging.LogRecord:
    made = logging.makeLogRecord(
        {"name": "stream_dedup.worker", "levelno": logging.INFO, "levelname": "INFO", "msg": message, **extra}
    )
    made.created, made.msecs = CREATED, 123.0
    return made


def json_lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_line_has_utc_time_level_logger_and_message() -> None:
    assert json.loads(JsonFormatter().format(record("batch of %d committed", args=(7,)))) == {
        "time": "2026-11-21T10:00:00.123Z",
        "level": "INFO",
        "logger": "stream_dedup.worker",
        "message": "batch of 7 committed",
    }


def test_json_line_carries_the_extra_fields() -> None:
    stream = io.StringIO()
    configure_logging("INFO", "json", stream)
    logging.getLogger("stream_dedup.worker").info(
        "duplicate published",
        extra={
            "topic": "docs",
            "partition": np.int64(3),
            "offset": 17,
            "document_id": "x",
            "role": "active",
            "batch_size": 12,
            "snapshot": Path("/var/lib/index.snap"),
        },
    )
    [line] = json_lines(stream)
    assert line["message"] == "duplicate published"
    assert {key: line[key] for key in ("topic", "partition", "offset", "document_id", "role", "batch_size")} == {
        "topic": "docs",
        "partition": 3,
        "offset": 17,
        "document_id": "x",
        "role": "active",
        "batch_size": 12,
    }
    assert line["snapshot"] == "/var/lib/index.snap"  # an unknown type, written as its str
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])


def test_an_extra_named_like_a_base_field_does_not_replace_it() -> None:
    line = json.loads(JsonFormatter().format(record(level="mine")))
    assert line["level"] == "INFO"
    assert line["extra_level"] == "mine"


def test_json_exception_is_the_formatted_traceback_on_the_same_line() -> None:
    stream = io.StringIO()
    configure_logging("INFO", "json", stream)
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        logging.getLogger("stream_dedup.worker").exception("snapshot failed", extra={"partition": 1})
    [line] = json_lines(stream)
    assert line["level"] == "ERROR"
    assert line["exception"].startswith("Traceback (most recent call last):")
    assert line["exception"].endswith("ValueError: boom\nsecond line")
    assert line["partition"] == 1


def test_text_line_lists_the_extra_fields_in_brackets() -> None:
    formatted = TextFormatter().format(record(partition=3, offset=17, document_id="x"))
    assert (
        formatted
        == "2026-11-21 10:00:00,123 INFO stream_dedup.worker: duplicate published [partition=3 offset=17 document_id=x]"
    )


def test_text_line_puts_known_fields_first_and_skips_brackets_without_extras() -> None:
    assert TextFormatter().format(record(batch_size=5, role="active", topic="docs")) == (
        "2026-11-21 10:00:00,123 INFO stream_dedup.worker: duplicate published [topic=docs role=active batch_size=5]"
    )
    assert TextFormatter().format(record()).endswith("stream_dedup.worker: duplicate published")


def test_text_exception_follows_the_line() -> None:
    stream = io.StringIO()
    configure_logging("INFO", "text", stream)
    try:
        raise KeyError("missing")
    except KeyError:
        logging.getLogger("stream_dedup.worker").exception("failed")
    first, *rest = stream.getvalue().splitlines()
    assert first.endswith("ERROR stream_dedup.worker: failed")
    assert rest[0] == "Traceback (most recent call last):"
    assert rest[-1] == "KeyError: 'missing'"


def test_configuring_twice_does_not_double_lines() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging("INFO", "json", first)
    configure_logging("INFO", "text", second)
    logging.getLogger("stream_dedup").info("once")
    assert len(logging.getLogger().handlers) == 1
    assert first.getvalue() == ""
    assert second.getvalue().count("once") == 1


@pytest.mark.parametrize(("stream", "is_json"), [(io.StringIO(), True), (Terminal(), False)])
def test_auto_format_is_text_on_a_terminal_and_json_elsewhere(stream: io.StringIO, is_json: bool) -> None:
    configure_logging("INFO", "auto", stream)
    logging.getLogger("stream_dedup").info("hello")
    assert stream.getvalue().startswith("{") is is_json


def test_records_below_the_level_are_dropped() -> None:
    stream = io.StringIO()
    configure_logging("warning", "json", stream)
    log = logging.getLogger("stream_dedup.worker")
    log.info("quiet")
    log.warning("loud")
    assert [line["message"] for line in json_lines(stream)] == ["loud"]


def test_kafka_is_held_at_warning_unless_debugging() -> None:
    stream = io.StringIO()
    kafka = logging.getLogger("kafka.conn")
    configure_logging("INFO", "json", stream)
    kafka.info("connecting")
    kafka.warning("broker unreachable")
    configure_logging("DEBUG", "json", stream)
    kafka.info("connected")
    assert [line["message"] for line in json_lines(stream)] == ["broker unreachable", "connected"]


def test_kafka_pythons_sasl_warning_is_said_once_not_per_connection() -> None:
    stream = io.StringIO()
    configure_logging("INFO", "json", stream)
    plain, scram = logging.getLogger("kafka.net.sasl.plain"), logging.getLogger("kafka.net.sasl.scram")
    for _ in range(12):  # a worker's connections at start-up
        plain.warning("Sending username and password in the clear")
        scram.warning("Exchanging credentials in the clear during Sasl Authentication")
    plain.error("authentication failed")
    plain.error("authentication failed")
    assert [line["message"] for line in json_lines(stream)] == [
        "Sending username and password in the clear",
        "Exchanging credentials in the clear during Sasl Authentication",
        "authentication failed",
        "authentication failed",
    ]


@pytest.mark.parametrize("level", ["verbose", "", "20"])
def test_an_unknown_level_names_the_setting_and_the_choices(level: str) -> None:
    with pytest.raises(ConfigError, match="DEBUG, INFO, WARNING, ERROR, CRITICAL") as raised:
        configure_logging(level, "json", io.StringIO())
    assert raised.value.setting == "log_level"


@pytest.mark.parametrize("log_format", ["yaml", "JSON", ""])
def test_an_unknown_format_names_the_setting_and_the_choices(log_format: str) -> None:
    with pytest.raises(ConfigError, match="json, text, auto") as raised:
        configure_logging("INFO", log_format, io.StringIO())
    assert raised.value.setting == "log_format"
