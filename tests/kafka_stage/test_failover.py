"""Failures a Kafka deployment throws at the stage: a dead active replica, SIGTERM, a broker restart,
a corrupt snapshot. After each, every input record has exactly one verdict, the one an uninterrupted
run gives."""

from __future__ import annotations

import json
import logging
import signal
import threading
import time
from pathlib import Path

import pytest

from stream_dedup.errors import ConfigError
from stream_dedup.ops.http import Health, Readiness
from stream_dedup.ops.metrics import WorkerMetrics
from stream_dedup.ops.runtime import MetricsEvents
from stream_dedup.roles.launch import role_runner
from stream_dedup.worker.events import Role, WorkerEvents
from tests.corpus import make_clustered_corpus

from .broker import JarBroker
from .stage import (
    Stage,
    WorkerProcess,
    check_exactly_once,
    document_messages,
    expected_verdicts,
    make_stage,
    produce,
    read_committed,
    role_threads,
    wait_until,
    worker_thread,
)
from .test_roles import a_signer_two_shards_and_a_judge, check_one_process_verdicts_once

pytestmark = pytest.mark.kafka


def logged(worker: WorkerProcess, fragment: str) -> bool:
    return any(fragment in str(line.get("message", "")) for line in worker.log_lines())


def test_standby_takes_over_when_the_active_replica_dies(stage: Stage, tmp_path: Path) -> None:
    corpus = make_clustered_corpus(4000, seed=31)
    messages = document_messages(corpus, partitions=3)
    timeouts = {"session_timeout_seconds": 6, "transaction_timeout_seconds": 5, "batch_size": 200}
    first = WorkerProcess(stage.environment("worker-1", **timeouts), tmp_path / "worker-1.log").start()
    wait_until(lambda: logged(first, "active:"), 60, "worker-1 to become active")
    second = WorkerProcess(stage.environment("worker-2", **timeouts), tmp_path / "worker-2.log").start()
    try:
        wait_until(lambda: logged(second, "standby:"), 60, "worker-2 to stand by")
        produce(stage.bootstrap, stage.input_topic, messages[:2000])
        read_committed(stage.bootstrap, stage.output_topic, 2000, settle=0.5)
        assert logged(first, "active:") and not logged(second, "active:"), "the standby must not split the index"
        first.kill()
        produce(stage.bootstrap, stage.input_topic, messages[2000:])
        wait_until(lambda: logged(second, "active:"), 60, "worker-2 to take over")
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
    finally:
        for worker in (first, second):
            if worker.running():
                worker.kill()
    check_exactly_once([json.loads(r.value) for r in records], expected_verdicts(corpus))


def test_two_processes_under_one_instance_id_stop_one_of_them_naming_the_setting(stage: Stage, tmp_path: Path) -> None:
    """They fenced each other at every commit, for ever, each restart a restore and nothing saying why.

    The one fenced stops (exit 2) naming ``instance_id``, here with nothing to commit (its coordinator falls
    silent); the other judges on, every verdict published once.
    """
    corpus = make_clustered_corpus(3000, seed=33)
    messages = document_messages(corpus, partitions=3)
    timeouts = {"session_timeout_seconds": 6, "transaction_timeout_seconds": 5, "batch_size": 100}
    twins = [
        WorkerProcess(
            stage.environment("twin", snapshot_dir=str(tmp_path / name), **timeouts), tmp_path / f"{name}.log"
        )
        for name in ("first", "second")
    ]
    twins[0].start()
    wait_until(lambda: logged(twins[0], "active:"), 60, "the first to become active")
    twins[1].start()
    try:
        wait_until(lambda: logged(twins[1], "active:"), 60, "the second to take the instance id's partitions")
        wait_until(lambda: not all(twin.running() for twin in twins), 60, "one of the two to stop")
        produce(stage.bootstrap, stage.input_topic, messages)
        stopped, survivor = twins if not twins[0].running() else twins[::-1]
        assert stopped.wait(5) == 2
        said = [line for line in stopped.log_path.read_text().splitlines() if line.startswith("stream-dedup:")]
        assert said and said[-1].startswith("stream-dedup: invalid setting 'instance_id': another process joined")
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
        assert survivor.running()
    finally:
        for twin in twins:
            if twin.running():
                twin.kill()
    check_exactly_once([json.loads(r.value) for r in records], expected_verdicts(corpus))


class Roles(WorkerEvents):
    """The roles a runner has taken, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.taken: list[str] = []

    def role_changed(self, role: Role, reason: str) -> None:
        self.taken.append(role)


def test_a_replica_is_no_ready_standby_before_the_group_answers_its_join(stage: Stage) -> None:
    """A standby is ready because it could take over; one not yet in the group could not (the brokers gone
    mid-join left it "ready" until the join check, 30 s on). The sole replica goes from restoring to active."""
    events = [Roles(), Roles()]
    with worker_thread(stage.settings(), events=events[0]):
        wait_until(lambda: "active" in events[0].taken, 60, "the stage to become active")
        with role_threads(stage.settings("signer-1", role="signer"), events=events[1]):
            wait_until(lambda: "active" in events[1].taken, 60, "the signer to become active")
    for taken in (e.taken for e in events):
        assert taken[: taken.index("active")] == ["restoring"] * taken.index("active"), taken


def test_two_role_processes_under_one_instance_id_stop_one_of_them_naming_the_setting(stage: Stage) -> None:
    """The same for a role (two signers here): the one fenced raises the settings error, the other signs on."""
    settings = stage.settings("twin", role="signer", batch_size=20, session_timeout_seconds=6)
    events = [Roles(), Roles()]
    runners = [role_runner(settings, e) for e in events]
    failures: dict[int, BaseException] = {}

    def run(number: int) -> None:
        try:
            runners[number].run()
        except BaseException as error:
            failures[number] = error

    threads = [threading.Thread(target=run, args=(n,), daemon=True) for n in (0, 1)]
    threads[0].start()
    try:
        wait_until(lambda: "active" in events[0].taken, 60, "the first signer to become active")
        threads[1].start()
        wait_until(lambda: "active" in events[1].taken, 60, "the second to take the instance id's partitions")
        messages = document_messages(make_clustered_corpus(600, seed=34), partitions=3)
        for start in range(0, len(messages), 60):
            produce(stage.bootstrap, stage.input_topic, messages[start : start + 60])
            time.sleep(0.3)
        wait_until(lambda: bool(failures), 60, "one of the two to stop")
    finally:
        for runner in runners:
            runner.request_stop()
        for thread in threads:
            thread.join(60)
    assert len(failures) == 1
    (error,) = failures.values()
    assert isinstance(error, ConfigError) and error.setting == "instance_id"
    assert "another process joined group" in str(error) and settings.role_group_id in str(error)


def test_sigterm_during_a_batch_exits_zero_with_a_snapshot_and_loses_nothing(stage: Stage, tmp_path: Path) -> None:
    corpus = make_clustered_corpus(20_000, seed=32)
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    environment = stage.environment(batch_size=500, shutdown_grace_seconds=20)
    worker = WorkerProcess(environment, tmp_path / "worker.log").start()
    read_committed(stage.bootstrap, stage.output_topic, 1000, settle=0)  # mid-stream now
    started = time.monotonic()
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert time.monotonic() - started < 20, "must stop within the grace period"
    assert logged(worker, "final snapshot")
    assert list((stage.snapshot_root / "worker-1").glob("snapshot-*.sds"))
    worker.start()
    try:
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
    finally:
        worker.kill()
    check_exactly_once([json.loads(r.value) for r in records], expected_verdicts(corpus))


def own_stage(broker: JarBroker, tmp_path: Path) -> Stage:
    """A stage whose topics are on ``broker``."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    names = iter(f"t{i}" for i in range(100))

    def create(partitions: int = 1) -> str:
        name = next(names)
        admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}}, wait_for_metadata=True)
        return name

    try:
        return make_stage(broker.bootstrap, create, tmp_path)
    finally:
        admin.close()


class ReadinessLog(threading.Thread):
    """What ``/readyz`` says, every 0.2 s, with when (``time.monotonic()``)."""

    def __init__(self, health: Health) -> None:
        super().__init__(daemon=True)
        self.health = health
        self.said: list[tuple[float, Readiness]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            self.said.append((time.monotonic(), self.health.readiness))

    def between(self, start: float, end: float) -> list[Readiness]:
        return [readiness for at, readiness in self.said if start <= at <= end]


@pytest.mark.parametrize("halt", ["stop", "kill"])
def test_broker_restart_mid_stream_loses_and_duplicates_nothing(
    own_broker: JarBroker, tmp_path: Path, halt: str
) -> None:
    """The broker stopped (a rolling restart) or killed -9 (a crash) while batches are in flight.

    While it is away (12 s, and its start) the stage says it is not ready, whether its session ended
    or a call to the brokers holds its loop up (for more than 10 s: ``READY_STALL_SECONDS``); it is
    ready again once they are back. (Stopped for 3 s and quick to start, as in two runs of five, the
    broker was back before anything held the loop 10 s: the stage's calls were retried across the gap
    and it stayed ready, rightly, and the test failed.)
    """
    stage = own_stage(own_broker, tmp_path)
    corpus = make_clustered_corpus(6000, seed=33)
    messages = document_messages(corpus, partitions=3)
    produce(stage.bootstrap, stage.input_topic, messages[:4000])
    health = Health()
    readiness = ReadinessLog(health)
    readiness.start()
    # Small batches: the broker goes while a backlog is being committed, batch after batch.
    with worker_thread(stage.settings(batch_size=50), events=MetricsEvents(WorkerMetrics(), health)):
        read_committed(stage.bootstrap, stage.output_topic, 500, settle=0)
        halted = time.monotonic()
        getattr(own_broker, halt)()  # mid-stream: batches in flight fail, the worker must come back by itself
        time.sleep(12)
        own_broker.start()
        back = time.monotonic()
        produce(stage.bootstrap, stage.input_topic, messages[4000:])
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=180)
        readiness.done.set()
        readiness.join()
    check_exactly_once([json.loads(r.value) for r in records], expected_verdicts(corpus))
    away = readiness.between(halted, back)
    assert any(not r.ready for r in away), f"ready all along while the broker was away: {away[-1]}"
    assert readiness.said[-1][1].ready, f"not ready after the broker came back: {readiness.said[-1][1]}"


def test_broker_crash_mid_stream_leaves_every_role_publishing_each_verdict_once_as_one_process_would(
    own_broker: JarBroker, tmp_path: Path
) -> None:
    stage = own_stage(own_broker, tmp_path)
    corpus = make_clustered_corpus(4000, seed=35)
    messages = document_messages(corpus, partitions=3)
    produce(stage.bootstrap, stage.input_topic, messages[:2000])
    with a_signer_two_shards_and_a_judge(stage) as runners:
        read_committed(stage.bootstrap, stage.output_topic, 600, settle=0)
        own_broker.kill()  # a crash, every hop with a transaction in flight: each must come back by itself
        time.sleep(3)
        own_broker.start()
        produce(stage.bootstrap, stage.input_topic, messages[2000:])
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=180)
        sequenced = runners[0].settings.sequenced_topic
    check_one_process_verdicts_once(stage, records, sequenced, len(corpus))


def test_a_corrupt_newest_snapshot_is_skipped_for_the_one_before(
    stage: Stage, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = make_clustered_corpus(900, seed=34)
    messages = document_messages(corpus, partitions=3)
    snapshots = stage.snapshot_root / "worker-1"
    for done, part in ((300, messages[:300]), (600, messages[300:600])):
        produce(stage.bootstrap, stage.input_topic, part)
        with worker_thread(stage.settings(batch_size=100)):
            read_committed(stage.bootstrap, stage.output_topic, done, settle=0.5)
    newest, previous = sorted(snapshots.glob("snapshot-*.sds"), reverse=True)
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0x40
    newest.write_bytes(bytes(data))
    produce(stage.bootstrap, stage.input_topic, messages[600:])
    with caplog.at_level(logging.INFO, logger="stream_dedup"), worker_thread(stage.settings(batch_size=100)):
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
    assert any(newest.name in r.message and "checksum" in r.message for r in caplog.records)
    assert any(f"loaded snapshot {previous}" in r.message for r in caplog.records)
    check_exactly_once([json.loads(r.value) for r in records], expected_verdicts(corpus))
