"""kill -9 at random moments loses nothing and duplicates nothing (the exactly-once promise)."""

from __future__ import annotations

import json
import random
import time
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from tests.corpus import make_clustered_corpus
from tests.hostile_records import HOSTILE, MAX_DOCUMENT_BYTES
from tests.processes import children, wait_ended

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
    committed offset (the record after the last one judged) passes only once
    the stage has been idle a while (kafka.processed_lag).
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
) -> tuple[list[dict[str, object]], dict[str, dict[str, object]], list[int], list[Any]]:
    """Feed ``documents`` and every kind of hostile record while killing the worker -9 ``kills`` times.

    The worker signs in two signer processes; each kill must also end them.

    Returns the verdicts, the expected verdicts, for each kill the records
    fed but not committed when the worker died (a kill counts only if it left
    work undone: an idle worker proves nothing; each is measured after the
    process is dead, so no commit can follow it), and the dead letters. The
    worker must be alive at the end.

    The hostile records (``tests/hostile_records.py``) are spread through the
    feed and over the partitions, each stamped like its neighbour.

    Near-copies are spread over the partitions (round-robin), and the whole
    stream is in the topic before the worker starts: every start (after each
    kill) meets a backlog, which must be judged in event-time order whatever
    the timing of the fetches. (At the live edge, records are judged as they
    arrive: a transaction's commit markers reach its partitions one after
    another, so no order across partitions is promised there.) Small batches
    keep the worker busy long enough for every kill to leave work undone.
    """
    rng = random.Random(seed)
    corpus = make_clustered_corpus(documents, seed=seed)
    messages: list[tuple[bytes | None, bytes | None, int, int]] = list(document_messages(corpus, partitions=3))
    for number, (_, key, value, _) in enumerate(HOSTILE):
        at = (number + 1) * len(messages) // (len(HOSTILE) + 1)
        messages.insert(at, (key, value, number % 3, messages[at][3]))
    for start in range(0, len(messages), 5000):
        produce(stage.bootstrap, stage.input_topic, messages[start : start + 5000])
    # Signing pipelined in two signer processes: kills also meet batches being signed.
    environment = stage.environment(
        batch_size=40, snapshot_interval_seconds=1, max_document_bytes=MAX_DOCUMENT_BYTES, signing_processes=2
    )
    left_undone: list[int] = []
    signers: list[int] = []
    worker = WorkerProcess(environment, tmp_path / "worker.log").start()
    deadline = time.monotonic() + 60 + 10 * kills
    try:
        while len(left_undone) < kills and time.monotonic() < deadline:
            # Random moments: mid-batch, mid-commit, mid-snapshot, mid-restore.
            time.sleep(rng.uniform(0.5, 2.5))
            signers += children(worker.pid, "stream_dedup.worker.signer_process")
            worker.kill()
            undone = unprocessed(stage)
            if undone > 0:
                left_undone.append(undone)
            worker.start()
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=180, settle=3)
        letters = read_committed(stage.bootstrap, stage.dead_letter_topic, len(HOSTILE), timeout=60, settle=3)
        assert worker.running(), "the worker died by itself"
    finally:
        if worker.running():
            worker.kill()
    assert signers and not wait_ended(signers, 20), "signer processes outlived their killed worker"
    return [json.loads(r.value) for r in records], expected_verdicts(corpus), left_undone, letters


def check_every_hostile_record_dead_lettered_once(letters: list[Any]) -> None:
    """One dead letter per hostile record, with its reason, its own key and (but for truncated ones) its value."""
    by_key: dict[bytes | None, list[Any]] = {}
    for letter in letters:
        by_key.setdefault(letter.key, []).append(letter)
    for name, key, value, reason in HOSTILE:
        found = by_key.get(key, [])
        assert len(found) == 1, f"{name}: {len(found)} dead letters"
        headers = dict(found[0].headers)
        assert headers["stream-dedup-reason"].decode() == reason, name
        assert found[0].value == value or headers.get("stream-dedup-truncated") == b"value", name
    assert len(letters) == len(HOSTILE)


def test_kill_9_twelve_times_with_hostile_records_publishes_each_verdict_once_as_an_uninterrupted_run(
    stage: Stage, tmp_path: Path
) -> None:
    verdicts, expected, left_undone, letters = crash_run(stage, tmp_path, documents=20_000, kills=12, seed=21)
    assert len(left_undone) == 12, f"only {len(left_undone)} kills met a worker with records left to process"
    assert sum(v["verdict"] == "duplicate" for v in expected.values()) > 2500  # planted near-copies
    check_exactly_once(verdicts, expected)
    check_every_hostile_record_dead_lettered_once(letters)


@pytest.mark.long
def test_kill_9_many_times_over_a_longer_stream(stage: Stage, tmp_path: Path) -> None:
    verdicts, expected, left_undone, letters = crash_run(stage, tmp_path, documents=100_000, kills=25, seed=22)
    assert len(left_undone) == 25, f"only {len(left_undone)} kills met a worker with records left to process"
    check_exactly_once(verdicts, expected)
    check_every_hostile_record_dead_lettered_once(letters)
