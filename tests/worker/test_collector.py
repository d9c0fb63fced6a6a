"""The garbage collector's thresholds: set for a whole stage's process by ``stream-dedup run``."""

import argparse
import gc
from collections.abc import Iterator
from typing import Any

import pytest

from stream_dedup.cli import run_command
from stream_dedup.worker.collector import COLLECTOR_THRESHOLDS, tune_collector


@pytest.fixture(autouse=True)
def default_thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


class _StoppedError(Exception):
    pass


def test_tuning_sets_the_thresholds_of_the_process() -> None:
    tune_collector()
    assert gc.get_threshold() == COLLECTOR_THRESHOLDS
    assert COLLECTOR_THRESHOLDS[0] >= 10_000  # a young collection per batch, not per 700 objects


def test_run_tunes_the_collector_before_anything_else(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, ...]] = []

    def settings_read(*args: Any) -> None:
        seen.append(gc.get_threshold())
        raise _StoppedError()

    monkeypatch.setattr(run_command, "layered_settings", settings_read)
    with pytest.raises(_StoppedError):
        run_command.run(argparse.Namespace(config=None))
    assert seen == [COLLECTOR_THRESHOLDS]
