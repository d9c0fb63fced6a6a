"""A shard killed after a snapshot replays only what followed it; a standby that tailed the topic, nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from stream_dedup.config import DetectionConfig
from tests.corpus import make_clustered_corpus

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
from .test_failover import logged
from .test_roles import SLOTS, one_process_verdicts, sequenced_batches
from .test_roles_crash import holds_partitions

pytestmark = pytest.mark.kafka

PROCESSES = {
    "signer-1": {"role": "signer"},
    "shard-0": {"role": "shard", "shard_index": 0},
    "shard-1": {"role": "shard", "shard_index": 1},
    "judge-1": {"role": "judge"},
}

#: Settings of every process: batches of 25 (many steps), two shards, short timeouts (quick take-overs).
SETTINGS = {
    "batch_size": 25,
    "shards": 2,
    "index_slots": SLOTS,
    "session_timeout_seconds": 6,
    "transaction_timeout_seconds": 10,
}


def snapshot_offsets(directory: Path) -> list[int]:
    """The sequenced offsets the shard's snapshots on disk cover (``snapshot-OFFSET.sds``)."""
    return sorted(int(path.stem.removeprefix("snapshot-")) for path in directory.glob("snapshot-*.sds"))


def replays(process: WorkerProcess) -> list[dict[str, Any]]:
    """The shard's "replayed N documents of sequenced offsets X..C" lines, one per take-over."""
    return [line for line in process.log_lines() if "replayed_documents" in line]


@pytest.mark.parametrize(
    "detection", [{}, {"method": "simhash", "max_hamming": 6, "max_bucket_size": 4}], ids=["minhash", "simhash"]
)
def test_a_shard_killed_after_a_snapshot_replays_only_what_followed_it(
    stage: Stage, tmp_path: Path, detection: dict[str, Any]
) -> None:
    corpus = make_clustered_corpus(1500, seed=43)
    messages = document_messages(corpus, partitions=3)
    common = {
        **detection,
        **SETTINGS,
        # Counted over the whole stream: one snapshot in the first 1,000 documents, past the 600th, so that
        # the documents after it are replayed at the restart.
        "snapshot_every_documents": 600,
    }
    processes = role_processes(stage, tmp_path, PROCESSES, **common)
    shard = processes["shard-1"]
    directory = stage.snapshot_root / "shard-1" / "shard-1"
    # Chunk by chunk, each judged before the next: the shard answers in many steps and snapshots between them.
    for start in range(0, 1000, 100):
        produce(stage.bootstrap, stage.input_topic, messages[start : start + 100])
        read_committed(stage.bootstrap, stage.output_topic, start + 100, settle=0.1)
    wait_until(lambda: snapshot_offsets(directory), 60, "a snapshot of shard 1")
    shard.kill()
    covered = snapshot_offsets(directory)[-1]
    take_overs = len(replays(shard))
    produce(stage.bootstrap, stage.input_topic, messages[1000:])
    shard.start()
    records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), settle=3)
    assert all(process.running() for process in processes.values()), "a role died by itself"

    config = DetectionConfig(index_slots=SLOTS, **detection)
    batches = sequenced_batches(stage.bootstrap, f"{stage.group_id}.sequenced", config)
    restart = replays(shard)[take_overs]
    # It started from the newest snapshot, not from the topic's first offset ...
    assert restart["from_offset"] == covered > batches[0].offset
    # ... and replayed exactly the documents of the batches between the snapshot and the committed offset.
    between = [b for b in batches if covered <= b.offset < restart["to_offset"]]
    assert restart["replayed_documents"] == sum(len(b.entry.documents.ids) for b in between)
    before = sum(len(b.entry.documents.ids) for b in batches if b.offset < restart["to_offset"])
    assert restart["replayed_documents"] < before / 2
    published = [json.loads(r.value) for r in records]
    assert all(len(verdicts) == 1 for verdicts in verdicts_by_source(published).values())
    assert len(published) == len(corpus)
    assert {v["id"]: v for v in published} == one_process_verdicts(batches, config, stage)


def test_a_shard_restored_under_another_threshold_names_the_change_in_its_log(stage: Stage, tmp_path: Path) -> None:
    """Legitimate (the banding is the same), but its answers change from there on, and the operator must hear it."""
    messages = document_messages(make_clustered_corpus(300, seed=5), partitions=3)
    processes = role_processes(stage, tmp_path, PROCESSES, **SETTINGS, snapshot_every_documents=100)
    shard = processes["shard-1"]
    produce(stage.bootstrap, stage.input_topic, messages)
    read_committed(stage.bootstrap, stage.output_topic, len(messages))
    wait_until(lambda: snapshot_offsets(stage.snapshot_root / "shard-1" / "shard-1"), 60, "a snapshot of shard 1")
    shard.kill()
    assert not logged(shard, "snapshot was made under other detection settings")
    shard.environment["STREAM_DEDUP_THRESHOLD"] = "0.795"
    shard.start()
    wait_until(lambda: logged(shard, "other detection settings (threshold 0.8 -> 0.795)"), 60, "the warning")


def committed_offset(stage: Stage, group: str, topic: str) -> int:
    """The offset ``group`` committed on the one-partition ``topic`` (0 if none)."""
    consumer = KafkaConsumer(bootstrap_servers=stage.bootstrap, group_id=group, enable_auto_commit=False)
    try:
        return int(consumer.committed(TopicPartition(topic, 0)) or 0)
    finally:
        consumer.close()


def test_a_standby_shard_tails_the_topic_and_takes_over_replaying_nothing(stage: Stage, tmp_path: Path) -> None:
    corpus = make_clustered_corpus(1500, seed=47)
    messages = document_messages(corpus, partitions=3)
    # Due every second: the standby snapshots what it tails, in its own directory.
    common = {**SETTINGS, "snapshot_interval_seconds": 1}
    processes = role_processes(stage, tmp_path, PROCESSES, **common)
    active = processes["shard-1"]
    wait_until(lambda: holds_partitions(active), 60, "shard 1 to become active")
    standby = role_processes(stage, tmp_path, {"shard-1b": PROCESSES["shard-1"]}, **common)["shard-1b"]
    wait_until(lambda: logged(standby, "standby for"), 60, "the second replica of shard 1 to stand by")
    for start in range(0, 1000, 200):
        produce(stage.bootstrap, stage.input_topic, messages[start : start + 200])
        read_committed(stage.bootstrap, stage.output_topic, start + 200, settle=0.1)
    group = stage.settings("shard-1", **common, **PROCESSES["shard-1"]).role_group_id
    sequenced = f"{stage.group_id}.sequenced"
    answered = committed_offset(stage, group, sequenced)
    # The standby never held the partition: only tailing can have given it a snapshot where the active one is.
    wait_until(
        lambda: answered in snapshot_offsets(stage.snapshot_root / "shard-1b" / "shard-1"),
        60,
        f"a snapshot of the standby at the committed offset {answered}",
    )
    active.kill()
    produce(stage.bootstrap, stage.input_topic, messages[1000:])
    records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), settle=3)
    assert holds_partitions(standby) and not active.running()
    assert all(p.running() for name, p in processes.items() if name != "shard-1"), "a role died by itself"
    take_over = replays(standby)[-1]
    config = DetectionConfig(index_slots=SLOTS)
    batches = sequenced_batches(stage.bootstrap, sequenced, config)
    # It went on from what it had tailed: nothing to replay before answering. Quiet for 5 s before the kill,
    # the active one committed past the marker after its last batch: only markers lie up to the take-over's end.
    assert take_over["from_offset"] == answered <= take_over["to_offset"]
    assert not [batch for batch in batches if answered <= batch.offset < take_over["to_offset"]]
    assert take_over["replayed_documents"] == 0
    published = [json.loads(r.value) for r in records]
    assert all(len(verdicts) == 1 for verdicts in verdicts_by_source(published).values())
    assert len(published) == len(corpus)
    assert {v["id"]: v for v in published} == one_process_verdicts(batches, config, stage)
