"""kill -9 of every role of a sharded stage, at random moments: each verdict once, as an uninterrupted run."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition

from stream_dedup.config import DetectionConfig
from tests.corpus import make_clustered_corpus
from tests.hostile_records import HOSTILE, MAX_DOCUMENT_BYTES

from .stage import (
    Stage,
    WorkerProcess,
    document_messages,
    produce,
    read_committed,
    role_processes,
    verdicts_by_source,
    wait_until,
)
from .test_crash import check_every_hostile_record_dead_lettered_once
from .test_roles import SLOTS, check_unique_records_forwarded_once, one_process_verdicts, sequenced_batches

pytestmark = pytest.mark.kafka

#: Most kills the short run tries before giving up on ten that left work undone.
ATTEMPTS = 36

#: Records fed before each kill: enough that every role is still at them a few tenths of a second later,
#: even on a quiet machine (a batch is 20 records).
CHUNK = 200

#: Each process of the stage: its instance id and role settings. Shard 1 has a standby.
PROCESSES = {
    "signer-1": {"role": "signer"},
    "signer-2": {"role": "signer"},
    "shard-0": {"role": "shard", "shard_index": 0},
    "shard-1a": {"role": "shard", "shard_index": 1},
    "shard-1b": {"role": "shard", "shard_index": 1},
    "shard-2": {"role": "shard", "shard_index": 2},
    "judge-1": {"role": "judge"},
}


class Backlog:
    """How many records of a topic one group has yet to commit: committed by their writers, not by the group.

    Opened before a kill is aimed, so that looking costs a round trip, not a new connection (see
    test_crash.unprocessed).
    """

    def __init__(self, stage: Stage, group: str, topic: str) -> None:
        self.consumer = KafkaConsumer(
            bootstrap_servers=stage.bootstrap,
            group_id=group,
            enable_auto_commit=False,
            isolation_level="read_committed",
        )
        self.parts = [TopicPartition(topic, p) for p in sorted(self.consumer.partitions_for_topic(topic) or [])]

    def records(self) -> int:
        ends = self.consumer.end_offsets(self.parts)
        return sum(max(0, ends[tp] - 1 - (self.consumer.committed(tp) or 0)) for tp in self.parts if ends[tp])

    def close(self) -> None:
        self.consumer.close()


def work_of(stage: Stage, name: str) -> tuple[str, str]:
    """The group and the topic a process of the stage reads."""
    settings = stage.settings(name, shards=3, index_slots=SLOTS, **PROCESSES[name])
    topic = settings.input_topic if settings.role == "signer" else settings.sequenced_topic
    return settings.role_group_id, topic


def holds_partitions(process: WorkerProcess) -> bool:
    """Whether a running process last said it holds its role's partitions (not standing by)."""
    said = [
        line["message"]
        for line in process.log_lines()
        if str(line.get("message", "")).startswith(("active:", "standby for"))
    ]
    return process.running() and bool(said) and said[-1].startswith("active:")


def kill_and_restart(
    stage: Stage,
    name: str,
    process: WorkerProcess,
    rng: random.Random,
    feed: Callable[[], None],
    standby: WorkerProcess | None,
) -> int:
    """Call ``feed``, kill -9 once the role has work in hand (or after a few seconds), then start it again after
    a moment; a standby, if any, must have taken over first.

    Returns the records the killed role's group had left undone when it died
    (measured once it is dead, so that no commit can follow).
    """
    backlog = Backlog(stage, *work_of(stage, name))
    try:
        feed()
        deadline = time.monotonic() + 3
        while not backlog.records() and time.monotonic() < deadline:
            time.sleep(0.02)
        # Random moments within that work: mid-step, mid-commit, mid-replay, mid-rebalance.
        time.sleep(rng.uniform(0.0, 0.2))
        process.kill()
        left = backlog.records()
    finally:
        backlog.close()
    if standby is not None:
        wait_until(lambda: holds_partitions(standby), 60, "the standby shard taking over")
    time.sleep(rng.uniform(0.2, 1.5))
    process.start()
    return left


def test_kill_9_of_every_role_twelve_times_publishes_each_verdict_once_as_one_process_would(
    stage: Stage, tmp_path: Path, topic_factory: Callable[..., str]
) -> None:
    unique_topic = topic_factory(partitions=3)
    roles_crash_run(stage, tmp_path, unique_topic, documents=6000, meaningful_kills=10, attempts=ATTEMPTS, seed=41)


@pytest.mark.long
def test_kill_9_of_every_role_many_times_over_a_longer_stream(
    stage: Stage, tmp_path: Path, topic_factory: Callable[..., str]
) -> None:
    unique_topic = topic_factory(partitions=3)
    roles_crash_run(stage, tmp_path, unique_topic, documents=40_000, meaningful_kills=30, attempts=90, seed=43)


def roles_crash_run(
    stage: Stage, tmp_path: Path, unique_topic: str, documents: int, meaningful_kills: int, attempts: int, seed: int
) -> None:
    """Kill roles until ``meaningful_kills`` kills left work undone (at most ``attempts``), then check the verdicts
    and the judge's forwards to ``unique_topic``."""
    rng = random.Random(seed)
    corpus = make_clustered_corpus(documents, seed=seed)
    messages: list[tuple[bytes | None, bytes | None, int, int]] = list(document_messages(corpus, partitions=3))
    for number, (_, key, value, _) in enumerate(HOSTILE):
        at = (number + 1) * len(messages) // (len(HOSTILE) + 1)
        messages.insert(at, (key, value, number % 3, messages[at][3]))
    common = {
        "batch_size": 20,
        "shards": 3,
        "index_slots": SLOTS,
        "max_document_bytes": MAX_DOCUMENT_BYTES,
        "session_timeout_seconds": 6,
        "transaction_timeout_seconds": 10,
        # Shards snapshot every few hundred documents of the stream: most restarts load one, some a full replay.
        "snapshot_every_documents": 400,
        "unique_topic": unique_topic,
    }
    processes = role_processes(stage, tmp_path, PROCESSES, **common)
    # Every role in turn, then at random; the shard with a standby is killed where it is active. A quarter of
    # the feed is in the topic first, so that the first restarts meet a backlog; the rest comes a chunk at a
    # time, each just before a kill aimed at the victim's work on it. Kills go on until ten of them left work
    # undone (an idle role proves nothing).
    kinds = ["signer", "shard", "judge", "shard-1"]
    backlog = len(messages) // 4
    produce(stage.bootstrap, stage.input_topic, messages[:backlog])
    chunks = [messages[i : i + CHUNK] for i in range(backlog, len(messages), CHUNK)]
    standby_took_over = 0
    left_undone: list[tuple[str, int]] = []
    try:
        for attempt in range(attempts):
            if sum(left > 0 for _, left in left_undone) >= meaningful_kills and standby_took_over:
                break
            victim = kinds[attempt] if attempt < len(kinds) else rng.choice(kinds)
            chunk = chunks.pop(0) if chunks else []

            def feed(chunk: list[tuple[bytes | None, bytes | None, int, int]] = chunk) -> None:
                produce(stage.bootstrap, stage.input_topic, chunk)

            if victim == "shard-1":
                shard_1 = [n for n in processes if n.startswith("shard-1")]
                active = next((n for n in shard_1 if holds_partitions(processes[n])), None)
                if active is not None:
                    other = processes[next(n for n in shard_1 if n != active)]
                    left_undone.append((active, kill_and_restart(stage, active, processes[active], rng, feed, other)))
                    standby_took_over += 1
                    continue
                victim = "shard"
            name = rng.choice([n for n in processes if n.startswith(victim) and not n.startswith("shard-1")])
            left_undone.append((name, kill_and_restart(stage, name, processes[name], rng, feed, standby=None)))
        for chunk in chunks:
            produce(stage.bootstrap, stage.input_topic, chunk)
        records = read_committed(
            stage.bootstrap, stage.output_topic, len(corpus), timeout=max(240, documents // 50), settle=4
        )
        letters = read_committed(stage.bootstrap, stage.dead_letter_topic, len(HOSTILE), timeout=60, settle=3)
        forwarded = read_committed(stage.bootstrap, unique_topic, 1, timeout=60, settle=3)
        died = [name for name, process in processes.items() if not process.running()]
        assert not died, f"{died} died by themselves"
    finally:
        for process in processes.values():
            if process.running():
                process.kill()

    assert standby_took_over >= 1
    # A kill proves something only if the role had work in hand: most must have.
    meaningful = [name for name, left in left_undone if left > 0]
    assert len(meaningful) >= meaningful_kills, f"kills that left work undone: {left_undone}"
    assert {name.split("-")[0] for name in meaningful} == {"signer", "shard", "judge"}
    published = [json.loads(r.value) for r in records]
    duplicated = {source: vs for source, vs in verdicts_by_source(published).items() if len(vs) > 1}
    assert not duplicated, f"{len(duplicated)} records got more than one verdict"
    assert len(published) == len(corpus)
    check_every_hostile_record_dead_lettered_once(letters)
    config = DetectionConfig(index_slots=SLOTS)
    batches = sequenced_batches(stage.bootstrap, f"{stage.group_id}.sequenced", config)
    # Each document was signed into the sequenced topic once, whatever the signers' kills.
    assert sorted(d for b in batches for d in b.entry.documents.ids) == sorted(f"doc-{i}" for i in range(len(corpus)))
    assert {v["id"]: v for v in published} == one_process_verdicts(batches, config, stage)
    check_unique_records_forwarded_once(published, messages, forwarded)
