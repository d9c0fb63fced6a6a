"""Types for the commands' own flags: a value out of range, or empty, is refused by the parser, naming the flag.

Without them ``--count -5`` or ``--idle-seconds nan`` reached the code as
given and failed there (a traceback, a wait without end), far from the flag
that caused it; and ``--topic=`` or ``--report=`` read as the flag left out
(the default topic, no report) without a word. The stage's settings have
their own checks (:mod:`stream_dedup.bounds`); these are for flags that are
not settings.
"""

import argparse
import math
from collections.abc import Callable

from stream_dedup.engine.field_paths import check_field_setting
from stream_dedup.errors import ConfigError
from stream_dedup.worker.settings import KAFKA_NAME_RULE, is_kafka_name


def whole_number(low: int, high: int) -> Callable[[str], int]:
    """A flag type: a whole number from ``low`` to ``high``."""

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            value = None
        if value is None or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be a whole number from {low} to {high}, got {raw!r}")
        return value

    return parse


def number(low: float, high: float) -> Callable[[str], float]:
    """A flag type: a finite number from ``low`` to ``high``."""

    def parse(raw: str) -> float:
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if not low <= value <= high:  # NaN is never in range
            raise argparse.ArgumentTypeError(f"must be a number from {low:g} to {high:g}, got {raw!r}")
        return value

    return parse


def rate(raw: str) -> float:
    """A flag type: documents per second, 0 (as fast as possible) or from 0.01 to ten million."""
    if raw.strip() in ("0", "0.0"):
        return 0.0
    return number(0.01, 1e7)(raw)


def non_empty_text(raw: str) -> str:
    """A flag type: text of at least one character (a topic, a file, a field name).

    The commands read a flag's absence as "use the default" (``args.topic or
    ...``), so an empty value would silently mean the flag was not given; and an
    empty field name would reject every record for lacking it.
    """
    if not raw:
        raise argparse.ArgumentTypeError("must not be empty")
    return raw


def topic_name(raw: str) -> str:
    """A flag type: a topic name Kafka takes (not empty, see :func:`non_empty_text`).

    ``produce-sample --topic ü`` reached the brokers, whose refusal of the
    topic's creation (``InvalidTopicError``) ended the command in a traceback;
    ``watch`` waited for a topic that can never exist.
    """
    if raw and not is_kafka_name(raw):
        raise argparse.ArgumentTypeError(f"{raw!r} is not a valid Kafka topic name ({KAFKA_NAME_RULE})")
    return non_empty_text(raw)


def field_setting(raw: str) -> str:
    """A flag type: a JSON field name, or a JSON Pointer to a nested one (:mod:`stream_dedup.engine.field_paths`)."""
    try:
        check_field_setting("field", raw)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error).removeprefix("invalid setting 'field': ")) from None
    return raw
