"""A shard killed after a snapshot restores from it: it replays only what followed; verdicts stay one process's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
from .test_roles import SLOTS, one_process_verdicts, sequenced_batches

pytestmark = pytest.mark.kafka

PROCESSES = {
    "signer-1": {"role": "signer"},
    "shard-0": {"role": "shard", "shard_index": 0},
    "shard-1": {"role": "shard", "shard_index": 1},
    "judge-1": {"role": "judge"},
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
        "batch_size": 25,
        "shards": 2,
        "index_slots": SLOTS,
        # Counted over the whole stream: one snapshot in the first 1,000 documents, past the 600th, so that
        # the documents after it are replayed at the restart.
        "snapshot_every_documents": 600,
        "session_timeout_seconds": 6,
        "transaction_timeout_seconds": 10,
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
