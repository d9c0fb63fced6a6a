"""Two signers and a backlog: judged in event-time order across partitions, as one process judges it.

With the input's partitions shared between signers (``parallel_signers``),
each signer sequences its own partitions in event-time order, but their steps
reach the sequenced topic in the order they commit: the signer of 20 older
originals paused 5 s while their newer near-copies reached the other signer's
partition, and all 20 originals were judged duplicates of their copies. By
default one signer holds every partition and the other stands by.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from tests.real_text import stdlib_paragraphs

from .stage import Stage, WorkerProcess, produce, read_committed, role_processes, wait_until
from .test_pause import said
from .test_roles import SLOTS

pytestmark = pytest.mark.kafka

ROLES = {
    "signer-1": {"role": "signer"},
    "signer-2": {"role": "signer"},
    "shard": {"role": "shard", "shard_index": 0},
    "judge": {"role": "judge"},
}


def holder_of_partition(stage: Stage, group: str, partition: int) -> str:
    """The instance id of the member of ``group`` assigned ``partition`` of the input topic."""
    admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap)
    try:
        members = admin.describe_groups([group])[group]["members"]
    finally:
        admin.close()
    for member in members:
        if any(partition in held["partitions"] for held in member["member_assignment"]["assigned_partitions"]):
            return str(member["group_instance_id"])
    raise AssertionError(f"no member of {group} holds partition {partition}")


def test_a_backlog_is_sequenced_in_event_time_order_while_a_signer_is_paused(stage: Stage, tmp_path: Path) -> None:
    # A session long enough that the pause hands no partition over.
    common = {"batch_size": 20, "shards": 1, "index_slots": SLOTS, "session_timeout_seconds": 30}
    processes: dict[str, WorkerProcess] = {}
    for name, own in ROLES.items():  # one after the other: the first signer joins first
        processes |= role_processes(stage, tmp_path, {name: own}, **common)
        wait_until(lambda p=processes[name]: said(p, "active:") + said(p, "standby for"), 60, name)
    group = stage.settings("signer-1", role="signer").role_group_id
    holder = holder_of_partition(stage, group, 0)
    # The copies on a partition another signer would hold, if the signers shared them.
    other = next((p for p in (1, 2) if holder_of_partition(stage, group, p) != holder), 1)
    texts = [p for p in stdlib_paragraphs() if len(p) > 400][:20]
    older = int(time.time() * 1000) - 10_000
    originals = [(None, _document(f"orig-{i}", text), 0, older + i) for i, text in enumerate(texts)]
    copies = [
        (None, _document(f"copy-{i}", text + " and a word"), other, older + 5_000 + i) for i, text in enumerate(texts)
    ]

    signer = processes[holder]
    signer.pause()
    try:
        produce(stage.bootstrap, stage.input_topic, originals + copies)
        time.sleep(5)
    finally:
        signer.resume()
    verdicts = {
        v["id"]: v for v in (json.loads(r.value) for r in read_committed(stage.bootstrap, stage.output_topic, 40))
    }

    assert [verdicts[f"orig-{i}"]["verdict"] for i in range(20)] == ["unique"] * 20
    assert [verdicts[f"copy-{i}"]["duplicate_of"] for i in range(20)] == [f"orig-{i}" for i in range(20)]


def _document(doc_id: str, text: str) -> bytes:
    return json.dumps({"id": doc_id, "text": text}).encode()
