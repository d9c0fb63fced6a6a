"""A snapshot volume that fails under the running stage: said for as long as it fails, written once it is back."""

from __future__ import annotations

import contextlib
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from stream_dedup.worker.events import WorkerEvents
from tests.corpus import make_clustered_corpus

from .stage import Stage, document_messages, produce, read_committed, role_threads, wait_until, worker_thread
from .test_roles import SLOTS

pytestmark = pytest.mark.kafka


class SnapshotEvents(WorkerEvents):
    """What the worker says of its snapshots, in order: ``("written" | "current" | "failed", monotonic time)``."""

    def __init__(self) -> None:
        self.said: list[tuple[str, float]] = []
        self.lock = threading.Lock()

    def _say(self, what: str) -> None:
        with self.lock:
            self.said.append((what, time.monotonic()))

    def snapshot_written(self, seconds: float, pause_seconds: float, size_bytes: int) -> None:
        self._say("written")

    def snapshot_current(self, as_of: float) -> None:
        self._say("current")

    def snapshot_failed(self, reason: str) -> None:
        self._say("failed")

    def since(self, moment: float) -> list[str]:
        with self.lock:
            return [what for what, at in self.said if at >= moment]


def one_process(stage: Stage, events: WorkerEvents) -> tuple[contextlib.AbstractContextManager[Any], Path]:
    """A single-process stage, and its snapshot directory."""
    settings = stage.settings(batch_size=50, snapshot_interval_seconds=1)
    return worker_thread(settings, events=events), Path(settings.snapshot_dir)


def one_shard(stage: Stage, events: WorkerEvents) -> tuple[contextlib.AbstractContextManager[Any], Path]:
    """A signer, one shard and a judge, and the shard's snapshot directory (no other role snapshots)."""
    roles = dict(batch_size=50, index_slots=SLOTS, shards=1, snapshot_interval_seconds=1)
    shard = stage.settings("shard-0", role="shard", shard_index=0, **roles)
    runners = role_threads(
        stage.settings("signer-1", role="signer", **roles),
        shard,
        stage.settings("judge-1", role="judge", **roles),
        events=events,
    )
    return runners, Path(shard.snapshot_dir) / "shard-0"


@pytest.mark.parametrize("run", [one_process, one_shard], ids=["one_process", "shard"])
def test_a_failed_snapshot_is_never_called_current_and_is_written_once_the_volume_is_back(
    stage: Stage, run: Callable[[Stage, WorkerEvents], tuple[contextlib.AbstractContextManager[Any], Path]]
) -> None:
    """The volume goes (here a file where the directory was) while a batch is new, then the input is quiet.

    The next due times must try again and fail again, not call the snapshot
    before the failure current (which set ``snapshot_last_success`` to now:
    the stale-snapshot alert never fired while every write failed); once the
    volume is back, a write succeeds with no new input, and so would the final one.
    """
    corpus = make_clustered_corpus(400, seed=61)
    messages = document_messages(corpus, partitions=3)
    events = SnapshotEvents()
    running, directory = run(stage, events)
    aside = directory.with_name(f"{directory.name}.aside")
    produce(stage.bootstrap, stage.input_topic, messages[:200])
    with running:
        read_committed(stage.bootstrap, stage.output_topic, 200, settle=0)
        judged = time.monotonic()
        # Written, and no write in flight: the snapshot holds every batch.
        wait_until(lambda: "current" in events.since(judged), 30, "a snapshot of the batches judged")
        directory.rename(aside)
        directory.write_text("not a directory")  # every write fails now, the final one too
        broken = time.monotonic()
        produce(stage.bootstrap, stage.input_topic, messages[200:])
        read_committed(stage.bootstrap, stage.output_topic, len(corpus), settle=0)
        wait_until(lambda: len(events.since(broken)) >= 3, 30, "three due snapshots")
        said = events.since(broken)
        assert set(said) == {"failed"}, f"a failed snapshot was called current: {said}"
        directory.unlink()
        shutil.move(aside, directory)
        back = time.monotonic()
        wait_until(lambda: "written" in events.since(back), 30, "a snapshot written once the volume is back")
