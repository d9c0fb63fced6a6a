"""Fixtures shared by the command tests."""

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture
def root_logging_restored() -> Iterator[None]:
    """``run`` points the root logger at the stderr it finds (here, pytest's capture, closed after the test)."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
