"""kill -9 at random moments loses nothing and duplicates nothing (the exactly-once promise)."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import pytest

from tests.corpus import make_clustered_corpus

from .stage import (
    Stage,
    WorkerProcess,
    check_exactly_once,
    document_messages,
    expected_verdicts,
    produce,
    read_committed,
)

pytestmark = pytest.mark.kafka


def crash_run(
    stage: Stage, tmp_path: Path, documents: int, kills: int, seed: int
) -> tuple[list[dict[str, object]], dict[str, dict[str, object]], int]:
    """Feed ``documents`` while killing the worker -9 ``kills`` times; return (verdicts, expected, kills done)."""
    rng = random.Random(seed)
    corpus = make_clustered_corpus(documents, seed=seed)
    messages = document_messages(corpus, partitions=3)
    chunks = [messages[i : i + 1000] for i in range(0, len(messages), 1000)]

    def feed() -> None:
        for chunk in chunks:
            produce(stage.bootstrap, stage.input_topic, chunk)
            time.sleep(0.4)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    environment = stage.environment(batch_size=250, snapshot_interval_seconds=1)
    killed = 0
    worker = WorkerProcess(environment, tmp_path / "worker.log").start()
    try:
        while killed < kills:
            # Random moments: mid-batch, mid-commit, mid-snapshot, mid-restore.
            time.sleep(rng.uniform(1.0, 4.0))
            worker.kill()
            killed += 1
            worker.start()
        feeder.join()
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=180, settle=3)
    finally:
        if worker.running():
            worker.kill()
    return [json.loads(r.value) for r in records], expected_verdicts(corpus), killed


def test_kill_9_five_times_publishes_each_verdict_once_as_an_uninterrupted_run(stage: Stage, tmp_path: Path) -> None:
    verdicts, expected, kills = crash_run(stage, tmp_path, documents=20_000, kills=5, seed=21)
    assert kills == 5
    assert sum(v["verdict"] == "duplicate" for v in expected.values()) > 2500  # planted near-copies
    check_exactly_once(verdicts, expected)


@pytest.mark.long
def test_kill_9_many_times_over_a_longer_stream(stage: Stage, tmp_path: Path) -> None:
    verdicts, expected, kills = crash_run(stage, tmp_path, documents=100_000, kills=25, seed=22)
    assert kills == 25
    check_exactly_once(verdicts, expected)
