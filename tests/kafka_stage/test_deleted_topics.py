"""A topic the stage writes, deleted under it: named, and created again, or the stage stops if its history is gone.

kafka-python retries a transaction's partition of a deleted topic for ever,
and its commit waits for it with no timeout: the stage used to publish
nothing and log nothing of its own (kafka.bounded_commit).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import KafkaError

from stream_dedup.kafka.clients import end_offsets_reader, partition_reader, transactional_producer

from .clear_corpus import brute_force_verdicts, clear_corpus
from .stage import Stage, WorkerProcess, produce, read_committed, role_processes, role_threads, wait_until

pytestmark = pytest.mark.kafka

Message = tuple[bytes, bytes, int, int]


def documents(texts: list[str], ids: range) -> list[Message]:
    now = int(time.time() * 1000)
    return [
        (f"doc-{i}".encode(), json.dumps({"id": f"doc-{i}", "text": texts[i]}).encode(), i % 3, now + i) for i in ids
    ]


def delete_topic(bootstrap: str, topic: str, present: bool = False, timeout: float = 40.0) -> None:
    """Delete ``topic`` and wait until the brokers no longer list it (or, with ``present``, list it again)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        if not present:
            admin.delete_topics([topic])
        deadline = time.monotonic() + timeout
        while (topic in admin.list_topics()) != present:
            assert time.monotonic() < deadline, f"topic {topic} still {'missing' if present else 'listed'}"
            time.sleep(0.2)
    finally:
        admin.close()


def logged(worker: WorkerProcess, level: str, text: str) -> list[str]:
    return [str(line["message"]) for line in worker.log_lines() if line["level"] == level and text in line["message"]]


def check_the_later_verdicts_once(stage: Stage, texts: list[str]) -> None:
    """The recreated output topic holds one verdict for each of doc-60..119, as brute force judges it.

    The index kept what it held: the copies are judged against the originals judged before the deletion.
    """
    records = read_committed(stage.bootstrap, stage.output_topic, 60, settle=3, timeout=40)
    verdicts = {json.loads(r.value)["id"]: json.loads(r.value)["verdict"] for r in records}
    assert len(records) == 60 and set(verdicts) == {f"doc-{i}" for i in range(60, 120)}
    truth = brute_force_verdicts([(f"doc-{i}", text) for i, text in enumerate(texts)])
    assert all(verdicts[d] == truth[d] for d in verdicts)


def test_an_output_topic_deleted_under_the_stage_is_named_created_again_and_no_verdict_lost_or_doubled(
    stage: Stage, tmp_path: Path
) -> None:
    texts = [text for text, _ in clear_corpus(60, 60)]
    worker = WorkerProcess(stage.environment(batch_size=20), tmp_path / "worker.log").start()
    produce(stage.bootstrap, stage.input_topic, documents(texts, range(60)))
    assert len(read_committed(stage.bootstrap, stage.output_topic, 60, settle=1, timeout=60)) == 60
    delete_topic(stage.bootstrap, stage.output_topic)
    produce(stage.bootstrap, stage.input_topic, documents(texts, range(60, 120)))
    # The commit holding the first batch after the deletion fails naming the topic; the next session makes it again.
    delete_topic(stage.bootstrap, stage.output_topic, present=True)
    check_the_later_verdicts_once(stage, texts)
    assert logged(worker, "ERROR", f"output_topic {stage.output_topic!r} does not exist"), worker.log_path.read_text()
    assert logged(worker, "WARNING", f"output_topic {stage.output_topic!r} was deleted while the stage ran")
    assert worker.running()


def test_a_dead_letter_topic_deleted_under_the_stage_is_named_and_the_bad_record_still_dead_lettered_once(
    stage: Stage, tmp_path: Path
) -> None:
    texts = [text for text, _ in clear_corpus(60, 0)]
    worker = WorkerProcess(stage.environment(batch_size=20), tmp_path / "worker.log").start()
    produce(stage.bootstrap, stage.input_topic, documents(texts, range(30)))
    read_committed(stage.bootstrap, stage.output_topic, 30, settle=1, timeout=60)
    delete_topic(stage.bootstrap, stage.dead_letter_topic)
    bad: Message = (b"bad", b"{not json", 0, int(time.time() * 1000))
    later = [*documents(texts, range(30, 45)), bad, *documents(texts, range(45, 60))]
    produce(stage.bootstrap, stage.input_topic, later)
    delete_topic(stage.bootstrap, stage.dead_letter_topic, present=True)
    letters = read_committed(stage.bootstrap, stage.dead_letter_topic, 1, settle=3, timeout=40)
    assert [letter.value for letter in letters] == [b"{not json"]
    records = read_committed(stage.bootstrap, stage.output_topic, 60, settle=1, timeout=10)
    assert sorted(json.loads(r.value)["id"] for r in records) == sorted(f"doc-{i}" for i in range(60))
    assert logged(worker, "ERROR", f"dead_letter_topic {stage.dead_letter_topic!r} does not exist")
    assert logged(worker, "WARNING", f"dead_letter_topic {stage.dead_letter_topic!r} was deleted while the stage ran")


def test_a_changelog_deleted_under_the_stage_stops_it_and_a_restart_refuses_to_judge_without_it(
    stage: Stage, tmp_path: Path
) -> None:
    texts = [text for text, _ in clear_corpus(60, 60)]
    changelog = stage.settings().changelog_topic
    worker = WorkerProcess(stage.environment(batch_size=20), tmp_path / "worker.log").start()
    produce(stage.bootstrap, stage.input_topic, documents(texts, range(60)))
    read_committed(stage.bootstrap, stage.output_topic, 60, settle=1, timeout=60)
    delete_topic(stage.bootstrap, changelog)
    produce(stage.bootstrap, stage.input_topic, documents(texts, range(60, 120)))
    # Judging on against an index rebuilt from nothing would call every copy unique: the stage stops instead.
    assert worker.wait(40) == 1
    assert logged(worker, "ERROR", f"changelog_topic {changelog!r} does not exist")
    assert f"changelog_topic {changelog!r} does not exist, but group" in worker.log_path.read_text()
    restarted = WorkerProcess(stage.environment(batch_size=20), tmp_path / "restarted.log").start()
    assert restarted.wait(30) == 1
    assert "new group_id" in restarted.log_path.read_text()
    assert len(read_committed(stage.bootstrap, stage.output_topic, 60, settle=2, timeout=10)) == 60


def test_an_output_topic_deleted_under_a_sharded_stage_is_named_created_again_and_no_verdict_lost_or_doubled(
    stage: Stage, caplog: pytest.LogCaptureFixture
) -> None:
    texts = [text for text, _ in clear_corpus(60, 60)]
    roles = dict(batch_size=20, index_slots=6, shards=1)
    with (
        caplog.at_level(logging.WARNING, logger="stream_dedup"),
        role_threads(
            stage.settings("signer-1", role="signer", **roles),
            stage.settings("shard-0", role="shard", shard_index=0, **roles),
            stage.settings("judge-1", role="judge", **roles),
        ),
    ):
        produce(stage.bootstrap, stage.input_topic, documents(texts, range(60)))
        read_committed(stage.bootstrap, stage.output_topic, 60, settle=1, timeout=60)
        delete_topic(stage.bootstrap, stage.output_topic)
        produce(stage.bootstrap, stage.input_topic, documents(texts, range(60, 120)))
        delete_topic(stage.bootstrap, stage.output_topic, present=True)
        check_the_later_verdicts_once(stage, texts)
    messages = [r.getMessage() for r in caplog.records]
    assert any(f"output_topic {stage.output_topic!r} does not exist" in m for m in messages), caplog.text
    assert any(f"output_topic {stage.output_topic!r} was deleted while the stage ran" in m for m in messages)


def test_no_client_of_the_stage_has_the_brokers_create_a_deleted_topic_again(stage: Stage) -> None:
    # kafka-python 3.0 drops allow_auto_create_topics=False; Kafka's auto.create.topics.enable is on by default.
    settings = stage.settings()
    gone = f"{stage.input_topic}-never-created"
    partition = TopicPartition(gone, 0)
    reader = partition_reader(settings.connection(), partition, 0, "earliest")
    offsets = end_offsets_reader(settings.connection())
    producer = transactional_producer(settings.connection(), f"{gone}-producer", 10)
    clients = [reader, offsets, producer]
    try:
        offsets.assign([partition])
        for consumer in (reader, offsets):
            consumer.poll(timeout_ms=1000)
        producer.config["max_block_ms"] = 2000  # its wait for the topic's partitions (60 s)
        with pytest.raises(KafkaError):
            producer.partitions_for(gone)
    finally:
        for client in clients:
            client.close()
    admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap)
    try:
        assert gone not in admin.list_topics()
    finally:
        admin.close()


def active_and_standby(stage: Stage, tmp_path: Path, texts: list[str]) -> tuple[WorkerProcess, WorkerProcess]:
    """Two replicas that judged doc-0..59: (the active one, the standby tailing the changelog)."""
    replicas = [
        WorkerProcess(stage.environment(name, batch_size=20), tmp_path / f"{name}.log").start()
        for name in ("worker-1", "worker-2")
    ]
    produce(stage.bootstrap, stage.input_topic, documents(texts, range(60)))
    read_committed(stage.bootstrap, stage.output_topic, 60, settle=1, timeout=60)
    wait_until(lambda: any("tailing the changelog" in r.log_path.read_text() for r in replicas), 30, "a standby")
    standby = next(r for r in replicas if "tailing the changelog" in r.log_path.read_text())
    return next(r for r in replicas if r is not standby), standby


def test_a_changelog_deleted_under_a_standby_tailing_it_stays_deleted_and_the_stage_stops(
    stage: Stage, tmp_path: Path
) -> None:
    texts = [text for text, _ in clear_corpus(60, 60)]
    changelog = stage.settings().changelog_topic
    replicas = list(active_and_standby(stage, tmp_path, texts))
    delete_topic(stage.bootstrap, changelog)
    # The standby's fetches of the changelog used to have the brokers create it again, empty, within a second.
    time.sleep(3)
    admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap)
    try:
        assert changelog not in admin.list_topics()
    finally:
        admin.close()
    produce(stage.bootstrap, stage.input_topic, documents(texts, range(60, 120)))
    wait_until(lambda: not all(r.running() for r in replicas), 30, "a replica to stop")
    stopped = next(r for r in replicas if not r.running())
    assert stopped.wait(1) == 1
    assert f"changelog_topic {changelog!r} does not exist, but group" in stopped.log_path.read_text()
    assert len(read_committed(stage.bootstrap, stage.output_topic, 60, settle=1, timeout=10)) == 60


def test_a_standby_taking_over_after_its_changelog_was_deleted_stops_within_seconds(
    stage: Stage, tmp_path: Path
) -> None:
    """The takeover's replay asked the deleted changelog's offsets for 30 s before giving up (the stop took 40)."""
    texts = [text for text, _ in clear_corpus(60, 60)]
    changelog = stage.settings().changelog_topic
    active, standby = active_and_standby(stage, tmp_path, texts)
    delete_topic(stage.bootstrap, changelog)
    active.kill()
    produce(stage.bootstrap, stage.input_topic, documents(texts, range(60, 120)))
    assert standby.wait(25) == 1
    assert f"changelog_topic {changelog!r} does not exist, but group" in standby.log_path.read_text()
    assert len(read_committed(stage.bootstrap, stage.output_topic, 60, settle=1, timeout=10)) == 60


def _one_shard_stage_judging_30(
    stage: Stage, tmp_path: Path, duplicates: int
) -> tuple[dict[str, WorkerProcess], list[str]]:
    """A signer, one shard and a judge as processes, once the first 30 of the corpus's texts are judged."""
    texts = [text for text, _ in clear_corpus(30, duplicates)]
    roles = {
        "signer-1": {"role": "signer"},
        "shard-0": {"role": "shard", "shard_index": 0},
        "judge-1": {"role": "judge"},
    }
    processes = role_processes(stage, tmp_path, roles, batch_size=10, shards=1, index_slots=6)
    produce(stage.bootstrap, stage.input_topic, documents(texts, range(30)))
    read_committed(stage.bootstrap, stage.output_topic, 30, settle=1, timeout=60)
    return processes, texts


def test_a_judge_whose_answers_topic_is_deleted_stops_naming_the_lost_history_not_the_shards_setting(
    stage: Stage, tmp_path: Path
) -> None:
    processes, _ = _one_shard_stage_judging_30(stage, tmp_path, 0)
    answers = stage.settings("judge-1", role="judge", shards=1).answers_topic
    delete_topic(stage.bootstrap, answers)
    # The group rebalances at once; the judge used to take over with no answers partitions and exit 2.
    judge = processes["judge-1"]
    assert judge.wait(30) == 1
    assert f"answers_topic {answers!r} does not exist, but group" in judge.log_path.read_text()


def test_a_judge_whose_session_restarted_stops_when_its_answers_topic_is_deleted(stage: Stage, tmp_path: Path) -> None:
    """A judge in its second session (its output topic deleted ended the first) was no longer the member that
    computed the group's assignment: kafka-python rejoins only on metadata changes its own assignment saw, so
    the answers topic deleted under it brought no rebalance, and it logged "not found in cluster metadata"
    twice a second for good, the shards having stopped. It must stop too, naming the lost history."""
    processes, texts = _one_shard_stage_judging_30(stage, tmp_path, 30)
    delete_topic(stage.bootstrap, stage.output_topic)
    produce(stage.bootstrap, stage.input_topic, documents(texts, range(30, 60)))
    delete_topic(stage.bootstrap, stage.output_topic, present=True)
    read_committed(stage.bootstrap, stage.output_topic, 30, settle=1, timeout=60)
    judge = processes["judge-1"]
    assert logged(judge, "WARNING", "was deleted while the stage ran")
    answers = stage.settings("judge-1", role="judge", shards=1).answers_topic
    delete_topic(stage.bootstrap, answers)
    assert judge.wait(40) == 1
    assert f"answers_topic {answers!r} does not exist, but group" in judge.log_path.read_text()
