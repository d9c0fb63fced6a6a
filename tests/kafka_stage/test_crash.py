"""kill -9 at random moments loses nothing and duplicates nothing (the exactly-once promise)."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

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


def unprocessed(stage: Stage) -> int:
    """Input records committed by the feeder and not yet by the stage's group.

    The feeder writes in transactions: the offset before a partition's last
    stable offset is the commit marker of its last chunk, which the stage's
    committed offset (the record after the last one judged) never passes.
    """
    consumer = KafkaConsumer(
        bootstrap_servers=stage.bootstrap,
        group_id=stage.group_id,
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    try:
        parts = [TopicPartition(stage.input_topic, p) for p in range(3)]
        ends = consumer.end_offsets(parts)
        return sum(max(0, ends[tp] - 1 - (consumer.committed(tp) or 0)) for tp in parts if ends[tp])
    finally:
        consumer.close()


def crash_run(
    stage: Stage, tmp_path: Path, documents: int, kills: int, seed: int
) -> tuple[list[dict[str, object]], dict[str, dict[str, object]], list[int]]:
    """Feed ``documents`` while killing the worker -9 ``kills`` times.

    Returns the verdicts, the expected verdicts, and for each kill the records
    fed but not committed when the worker died: a kill counts only if it left
    work undone (an idle worker proves nothing), and each is measured after
    the process is dead, so no commit can follow it.

    Near-copies are spread over the partitions (round-robin). Each chunk of
    the feed is one producer transaction, so it becomes visible on all
    partitions at once: the live edge, where the worker judges records as
    they arrive, never sees a later document of a chunk before an earlier
    one on another partition. Every backlog (after each restart) is judged in
    event-time order, whatever the timing.
    """
    rng = random.Random(seed)
    corpus = make_clustered_corpus(documents, seed=seed)
    messages = document_messages(corpus, partitions=3)
    chunks = [messages[i : i + 1000] for i in range(0, len(messages), 1000)]
    # The feed lasts about as long as the kills take, so that they meet a worker with work to do.
    pause = max(0.4, 3.0 * kills / len(chunks))

    def feed() -> None:
        for number, chunk in enumerate(chunks):
            produce(stage.bootstrap, stage.input_topic, chunk, transactional_id=f"feeder-{stage.group_id}-{number}")
            time.sleep(pause)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    environment = stage.environment(batch_size=250, snapshot_interval_seconds=1)
    left_undone: list[int] = []
    worker = WorkerProcess(environment, tmp_path / "worker.log").start()
    deadline = time.monotonic() + 60 + 10 * kills
    try:
        while len(left_undone) < kills and time.monotonic() < deadline:
            # Random moments: mid-batch, mid-commit, mid-snapshot, mid-restore.
            time.sleep(rng.uniform(1.0, 4.0))
            worker.kill()
            undone = unprocessed(stage)
            if undone > 0:
                left_undone.append(undone)
            worker.start()
        feeder.join()
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=180, settle=3)
    finally:
        if worker.running():
            worker.kill()
    return [json.loads(r.value) for r in records], expected_verdicts(corpus), left_undone


def test_kill_9_five_times_publishes_each_verdict_once_as_an_uninterrupted_run(stage: Stage, tmp_path: Path) -> None:
    verdicts, expected, left_undone = crash_run(stage, tmp_path, documents=20_000, kills=5, seed=21)
    assert len(left_undone) == 5, f"only {len(left_undone)} kills met a worker with records left to process"
    assert sum(v["verdict"] == "duplicate" for v in expected.values()) > 2500  # planted near-copies
    check_exactly_once(verdicts, expected)


@pytest.mark.long
def test_kill_9_many_times_over_a_longer_stream(stage: Stage, tmp_path: Path) -> None:
    verdicts, expected, left_undone = crash_run(stage, tmp_path, documents=100_000, kills=25, seed=22)
    assert len(left_undone) == 25, f"only {len(left_undone)} kills met a worker with records left to process"
    check_exactly_once(verdicts, expected)
