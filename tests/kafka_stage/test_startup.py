"""Start-up against a real SASL_PLAINTEXT listener: a wrong password is one line and exit 4; the right one works.

One jar broker for the module, with a PLAINTEXT listener (the test's own
producer and reader) and a SASL_PLAINTEXT one (PLAIN) for the worker, and
for ``watch`` and ``produce-sample``, which take the same connection settings.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from stream_dedup.cli.main import main
from stream_dedup.cli.produce_sample_command import sample_documents
from stream_dedup.kafka.record_lookup import RecordLookup
from stream_dedup.worker.settings import ConnectionSettings
from tests.corpus import make_clustered_corpus

from .broker import JarBroker, jar_broker
from .stage import REPO, WorkerProcess, document_messages, produce, read_committed

pytestmark = pytest.mark.kafka

USER, PASSWORD = "dedup", "right-horse-battery"


@pytest.fixture(scope="module")
def sasl_broker() -> Iterator[JarBroker]:
    with jar_broker(sasl_users={USER: PASSWORD}) as broker:
        yield broker


def sasl_environment(broker: JarBroker, password: str, **settings: str) -> dict[str, str]:
    assert broker.sasl_bootstrap is not None
    values = {
        "bootstrap_servers": broker.sasl_bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "PLAIN",
        "sasl_username": USER,
        "sasl_password": password,
        "metrics_port": "0",
        "log_format": "json",
        **settings,
    }
    return {f"STREAM_DEDUP_{name.upper()}": value for name, value in values.items()}


def test_a_wrong_password_is_one_line_naming_the_broker_and_the_user(sasl_broker: JarBroker, tmp_path: Path) -> None:
    wrong = "wrong-staple-" + uuid.uuid4().hex[:6]
    run = subprocess.run(
        [sys.executable, "-m", "stream_dedup.cli.main", "run"],
        env={**os.environ, **sasl_environment(sasl_broker, wrong, snapshot_dir=str(tmp_path))},
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
    )
    assert run.returncode == 4, run.stderr
    ours = [line for line in run.stderr.splitlines() if line.startswith("stream-dedup:")]
    assert len(ours) == 1, run.stderr
    assert f"{sasl_broker.sasl_bootstrap}: authentication failed" in ours[0]
    assert f"sasl_username='{USER}'" in ours[0] and "security_protocol=SASL_PLAINTEXT" in ours[0]
    assert "Traceback" not in run.stderr and "Unable to bootstrap" not in run.stderr
    assert wrong not in run.stderr + run.stdout


def test_the_right_password_gets_verdicts_through_sasl(sasl_broker: JarBroker, tmp_path: Path) -> None:
    topics = {name: f"sasl-{name}-{uuid.uuid4().hex[:8]}" for name in ("input", "output", "dead")}
    admin = KafkaAdminClient(bootstrap_servers=sasl_broker.bootstrap)
    try:
        admin.create_topics(
            {topic: {"num_partitions": 1, "replication_factor": 1} for topic in topics.values()},
            wait_for_metadata=True,
        )
    finally:
        admin.close()
    corpus = make_clustered_corpus(30, seed=5)
    produce(sasl_broker.bootstrap, topics["input"], document_messages(corpus, partitions=1))
    settings = {
        "input_topic": topics["input"],
        "output_topic": topics["output"],
        "dead_letter_topic": topics["dead"],
        "group_id": f"sasl-{uuid.uuid4().hex[:8]}",
        "instance_id": "sasl-worker",
        "snapshot_dir": str(tmp_path / "snapshots"),
    }
    worker = WorkerProcess(sasl_environment(sasl_broker, PASSWORD, **settings), tmp_path / "worker.log").start()
    try:
        records = read_committed(sasl_broker.bootstrap, topics["output"], len(corpus), timeout=120)
    finally:
        worker.signal(signal.SIGTERM)
        exit_code = worker.wait(60)
    assert sorted(json.loads(r.value)["id"] for r in records) == sorted(f"doc-{i}" for i in range(len(corpus)))
    assert exit_code == 0
    assert PASSWORD not in (tmp_path / "worker.log").read_text()


def _sasl_flags(broker: JarBroker) -> list[str]:
    assert broker.sasl_bootstrap is not None
    security = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN", "--sasl-username", USER]
    return ["--bootstrap-servers", broker.sasl_bootstrap, *security]


def test_produce_sample_and_watch_work_through_sasl(
    sasl_broker: JarBroker, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = f"sasl-sample-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("STREAM_DEDUP_SASL_PASSWORD", PASSWORD)  # the secret from the environment, the rest flags
    assert main(["produce-sample", *_sasl_flags(sasl_broker), "--topic", topic, "--count", "25"]) == 0
    watch = ["watch", *_sasl_flags(sasl_broker), "--topic", topic, "--format", "json", "--count", "25"]
    assert main([*watch, "--idle-seconds", "20"]) == 0
    out, err = capsys.readouterr()
    assert sorted(json.loads(line)["id"] for line in out.splitlines()) == [d["id"] for d in sample_documents()[:25]]
    assert PASSWORD not in out + err
    assert sasl_broker.sasl_bootstrap is not None
    connection = ConnectionSettings(
        bootstrap_servers=sasl_broker.sasl_bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username=USER,
        sasl_password=PASSWORD,
    ).connection("tests-lookup")
    with RecordLookup(connection, timeout_seconds=20) as lookup:  # what watch --texts fetches with
        assert json.loads(lookup.fetch(topic, 0, 0).value)["id"].startswith("ad-")


@pytest.mark.parametrize("command", ["produce-sample", "watch"])
def test_a_wrong_password_stops_produce_sample_and_watch_with_exit_4(
    command: str, sasl_broker: JarBroker, capsys: pytest.CaptureFixture[str]
) -> None:
    wrong = "wrong-staple-" + uuid.uuid4().hex[:6]
    assert main([command, *_sasl_flags(sasl_broker), "--sasl-password", wrong, "--count", "1"]) == 4
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and f"{sasl_broker.sasl_bootstrap}: authentication failed" in err
    assert wrong not in out + err
