"""Paused processes (SIGSTOP, then SIGCONT: a long GC pause, a frozen VM, a stopped container).

A replica paused past ``session_timeout_seconds`` is out of its group: its
standby takes over, and when it resumes it is a zombie holding a batch, maybe
a transaction, of partitions it no longer owns. What it publishes must never
reach a read_committed reader, and it must come back as a standby.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import MemberToRemove
from kafka.structs import OffsetAndMetadata

from stream_dedup.kafka.clients import KafkaConnection, transactional_producer
from stream_dedup.kafka.membership import MembershipLostError, current_membership
from tests.corpus import make_clustered_corpus

from .stage import (
    Stage,
    WorkerProcess,
    check_exactly_once,
    document_messages,
    expected_verdicts,
    produce,
    read_committed,
    role_processes,
    wait_until,
)
from .test_roles import SLOTS, check_one_process_verdicts_once
from .test_roles_crash import holds_partitions

pytestmark = pytest.mark.kafka

#: A pause past the session timeout (the standby takes over) but within the transaction timeout (the broker
#: has not aborted the zombie's open transaction when it resumes); past both; and short of both.
TIMEOUTS = {"session_timeout_seconds": 6, "transaction_timeout_seconds": 10}


def said(process: WorkerProcess, fragment: str) -> int:
    return sum(fragment in str(line.get("message", "")) for line in process.log_lines())


def role_of(worker: WorkerProcess) -> str:
    """What a single-process replica last said it is: ``active`` or ``standby``."""
    messages = [str(line.get("message", "")) for line in worker.log_lines()]
    roles = [m.split(":")[0] for m in messages if m.startswith(("active:", "standby:"))]
    return roles[-1] if roles else ""


def test_a_replica_out_of_its_group_sends_no_offsets_under_a_lost_generation(stage: Stage) -> None:
    """kafka-python resets the generation of a member the broker no longer knows (what a resumed zombie
    hears); offsets sent under no generation are taken by a group with no member, so they are refused."""
    group, connection = f"group-{uuid.uuid4().hex[:8]}", KafkaConnection(stage.bootstrap)
    consumer = KafkaConsumer(
        bootstrap_servers=stage.bootstrap,
        group_id=group,
        group_instance_id="worker-1",
        enable_auto_commit=False,
    )
    admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap)
    partition = TopicPartition(stage.input_topic, 0)
    try:
        # Known before joining: a group joined before its consumer knows the topic's partitions gets none
        # (kafka-python's range assignor), and a static member does not join again when they come.
        wait_until(lambda: bool(consumer.partitions_for_topic(stage.input_topic)), 30, "the topic's partitions")
        consumer.subscribe([stage.input_topic])
        wait_until(lambda: consumer.poll(100) is not None and bool(consumer.assignment()), 60, "the assignment")
        assert current_membership(consumer) == consumer.group_metadata()
        # Its session ends (as during a pause), the group is left empty, and its heartbeat hears so.
        admin.remove_group_members(group, [MemberToRemove(group_instance_id="worker-1")])
        wait_until(lambda: consumer.group_metadata().generation_id < 0, 30, "the heartbeat to reset the generation")
        with pytest.raises(MembershipLostError, match=f"no longer a member of group '{group}'"):
            current_membership(consumer)
        # What the check prevents: the broker takes offsets sent under the lost generation.
        producer = transactional_producer(connection, f"test-{uuid.uuid4().hex}", 30)
        try:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send_offsets_to_transaction({partition: OffsetAndMetadata(7, "", -1)}, consumer.group_metadata())
            producer.commit_transaction()
        finally:
            producer.close()

        # Once the transaction's marker is written, which commit_transaction does not wait for.
        def committed() -> Any:
            return admin.list_group_offsets({group: None})[group].get(partition)

        wait_until(lambda: committed() is not None, 30, "the offsets sent under no generation to be committed")
        assert committed().offset == 7
    finally:
        admin.close()
        consumer.close()


@pytest.mark.parametrize("pause", [9.0])
def test_an_active_replica_paused_past_its_session_comes_back_a_standby_publishing_nothing(
    stage: Stage, tmp_path: Path, pause: float
) -> None:
    paused_replica_run(stage, tmp_path, pause)


@pytest.mark.long
@pytest.mark.parametrize("pause", [3.0, 16.0])
def test_an_active_replica_paused_shorter_than_its_session_or_past_its_transaction_loses_nothing(
    stage: Stage, tmp_path: Path, pause: float
) -> None:
    paused_replica_run(stage, tmp_path, pause)


def paused_replica_run(stage: Stage, tmp_path: Path, pause: float) -> None:
    """Pause the active replica mid-stream for ``pause`` seconds while input keeps coming, resume it; then
    kill -9 the other one, so that the resumed replica judges on (its index and snapshots must be whole),
    and restart it from its snapshots. Each record has one verdict, an uninterrupted run's."""
    corpus = make_clustered_corpus(5000, seed=51)
    messages = document_messages(corpus, partitions=3)
    settings = {**TIMEOUTS, "batch_size": 100, "snapshot_interval_seconds": 1}
    first = WorkerProcess(stage.environment("worker-1", **settings), tmp_path / "worker-1.log").start()
    wait_until(lambda: role_of(first) == "active", 60, "worker-1 to become active")
    second = WorkerProcess(stage.environment("worker-2", **settings), tmp_path / "worker-2.log").start()
    wait_until(lambda: role_of(second) == "standby", 60, "worker-2 to stand by")
    produce(stage.bootstrap, stage.input_topic, messages[:2500])
    read_committed(stage.bootstrap, stage.output_topic, 500, settle=0)  # mid-stream now
    first.pause()
    produce(stage.bootstrap, stage.input_topic, messages[2500:3500])
    time.sleep(pause)
    took_over = role_of(second) == "active"
    assert took_over == (pause > TIMEOUTS["session_timeout_seconds"])
    first.resume()
    if took_over:
        wait_until(lambda: role_of(first) == "standby", 60, "the resumed replica to stand by")
    read_committed(stage.bootstrap, stage.output_topic, 3500, settle=0)
    assert said(first, "Kafka error, restarting the session") <= 1, "one restart, not a crash loop"
    # The resumed replica takes over, judging on the index it rebuilt; then restarts from its own snapshots.
    (second if took_over else first).kill()
    survivor = first if took_over else second
    wait_until(lambda: role_of(survivor) == "active", 60, "the other replica to take over")
    produce(stage.bootstrap, stage.input_topic, messages[3500:4200])
    read_committed(stage.bootstrap, stage.output_topic, 4200, settle=1.5)
    survivor.kill()
    survivor.start()
    produce(stage.bootstrap, stage.input_topic, messages[4200:])
    records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), settle=3)
    assert said(survivor, "loaded snapshot"), "the restart must load a snapshot the replica wrote"
    survivor.kill()
    check_exactly_once([json.loads(r.value) for r in records], expected_verdicts(corpus))


#: A sharded stage with a standby for every role that has state or a single reader: signers share the input.
ROLES = {
    "signer-1": {"role": "signer"},
    "signer-2": {"role": "signer"},
    "shard-a": {"role": "shard", "shard_index": 0},
    "shard-b": {"role": "shard", "shard_index": 0},
    "judge-a": {"role": "judge"},
    "judge-b": {"role": "judge"},
}


def test_paused_signer_shard_and_judge_come_back_publishing_nothing_twice(stage: Stage, tmp_path: Path) -> None:
    paused_roles_run(stage, tmp_path, pauses=[9.0])


@pytest.mark.long
def test_roles_paused_again_and_again_shorter_and_longer_than_their_timeouts(stage: Stage, tmp_path: Path) -> None:
    paused_roles_run(stage, tmp_path, pauses=[3.0, 9.0, 16.0, 9.0])


def paused_roles_run(stage: Stage, tmp_path: Path, pauses: list[float]) -> None:
    """For each pause: pause a signer, the active shard and the active judge at once mid-stream, feed input,
    resume them. Each record has one verdict, the one a single process gives on the sequenced topic."""
    corpus = make_clustered_corpus(1000 * (len(pauses) + 2), seed=52)
    messages = document_messages(corpus, partitions=3)
    common = {**TIMEOUTS, "batch_size": 50, "shards": 1, "index_slots": SLOTS, "signing_processes": 0}
    processes: dict[str, WorkerProcess] = {}
    for name in ROLES:  # one after the other: the first of each pair is active
        processes |= role_processes(stage, tmp_path, {name: ROLES[name]}, **common)
        wait_until(lambda p=processes[name]: said(p, "active:") + said(p, "standby for"), 60, name)
    chunks = [messages[i : i + 1000] for i in range(0, len(messages), 1000)]
    produce(stage.bootstrap, stage.input_topic, chunks.pop(0))
    for pause in pauses:
        read_committed(stage.bootstrap, stage.output_topic, 200, settle=0)
        paused = ["signer-1"] + [
            next(n for n in processes if n.startswith(role) and holds_partitions(processes[n]))
            for role in ("shard", "judge")
        ]
        partners = [next(n for n in processes if n[:-1] == name[:-1] and n != name) for name in paused[1:]]
        took_over = {n: said(processes[n], "active:") for n in partners}
        produce(stage.bootstrap, stage.input_topic, chunks.pop(0))
        for name in paused:
            processes[name].pause()
        time.sleep(pause)
        for name in paused:
            processes[name].resume()
        if pause > TIMEOUTS["session_timeout_seconds"]:
            # Maybe only now: a standby waits for the offsets of a transaction the paused one left open.
            for n, before in took_over.items():
                wait_until(lambda p=processes[n], b=before: said(p, "active:") > b, 30, f"{n} to take over")
    for chunk in chunks:
        produce(stage.bootstrap, stage.input_topic, chunk)
    records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), settle=4)
    assert all(p.running() for p in processes.values())
    restarts = {n: said(p, "Kafka error, restarting the session") for n, p in processes.items()}
    assert max(restarts.values()) <= len(pauses) * 2, f"a crash loop: {restarts}"
    for process in processes.values():
        process.kill()
    check_one_process_verdicts_once(stage, records, f"{stage.group_id}.sequenced", len(corpus))
