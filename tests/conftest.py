"""Fixtures for every test."""

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def root_logging_restored() -> Iterator[None]:
    """Put the root logger's handlers and level, and the ``kafka`` logger's level, back after each test.

    ``run`` (and anything calling ``configure_logging``) points the root logger
    at the stderr it finds: in a test, pytest's capture, closed after it. A
    later test logging through the root then prints "--- Logging error ---"
    to the real stderr; every test that runs a command in-process would have
    to remember this fixture, so it is applied to all.
    """
    root, kafka = logging.getLogger(), logging.getLogger("kafka")
    handlers, level, kafka_level = list(root.handlers), root.level, kafka.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    kafka.setLevel(kafka_level)
