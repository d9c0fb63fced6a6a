"""The stage on brokers that enforce ACLs: the documented set works, and each ACL missing stops it naming that ACL.

One jar broker for the module with ``StandardAuthorizer``: its PLAINTEXT
listener's anonymous user is a super user (the broker's own, the test's
producer and admin); the stage connects over SASL_PLAINTEXT as a user with
only the ACLs of docs/operating.md#acls.
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
from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

from tests.corpus import make_clustered_corpus

from .broker import JarBroker, jar_broker
from .stage import REPO, WorkerProcess, document_messages, produce, read_committed

pytestmark = pytest.mark.kafka

USER, PASSWORD = "dedup", "acl-horse-battery"

#: The documented ACLs (docs/operating.md#acls): name -> (resource type, which name, operation).
DOCUMENTED = {
    "Read on the input": (ResourceType.TOPIC, "input", ACLOperation.READ),
    "Write on the output": (ResourceType.TOPIC, "output", ACLOperation.WRITE),
    "DescribeConfigs on the output": (ResourceType.TOPIC, "output", ACLOperation.DESCRIBE_CONFIGS),
    "Write on the dead letters": (ResourceType.TOPIC, "dead", ACLOperation.WRITE),
    "DescribeConfigs on the dead letters": (ResourceType.TOPIC, "dead", ACLOperation.DESCRIBE_CONFIGS),
    "Read on the changelog": (ResourceType.TOPIC, "changelog", ACLOperation.READ),
    "Write on the changelog": (ResourceType.TOPIC, "changelog", ACLOperation.WRITE),
    "DescribeConfigs on the changelog": (ResourceType.TOPIC, "changelog", ACLOperation.DESCRIBE_CONFIGS),
    "Create on the cluster": (ResourceType.CLUSTER, "cluster", ACLOperation.CREATE),
    "Read on the group": (ResourceType.GROUP, "group", ACLOperation.READ),
    "Write on the transactional id": (ResourceType.TRANSACTIONAL_ID, "transactional_id", ACLOperation.WRITE),
}


@pytest.fixture(scope="module")
def acl_broker() -> Iterator[JarBroker]:
    overrides = {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",
    }
    with jar_broker(sasl_users={USER: PASSWORD}, overrides=overrides) as broker:
        yield broker


class AclStage:
    """One stage's names, its input produced, and the ACLs of its user granted or taken back."""

    def __init__(self, broker: JarBroker, tmp_path: Path, documents: int = 20) -> None:
        self.broker = broker
        self.tmp_path = tmp_path
        suffix = uuid.uuid4().hex[:8]
        group = f"acl-{suffix}"
        self.names = {
            "input": f"acl-input-{suffix}",
            "output": f"acl-output-{suffix}",
            "dead": f"acl-dead-{suffix}",
            "changelog": f"{group}.changelog",
            "group": group,
            "transactional_id": f"{group}-worker-0",
            "cluster": "kafka-cluster",
        }
        self.documents = documents
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            # None left by an earlier test: Create on the cluster is one resource for every stage.
            everything = ResourcePatternFilter(ResourceType.ANY, None, ACLResourcePatternType.ANY)
            admin.delete_acls([ACLFilter(f"User:{USER}", "*", ACLOperation.ANY, ACLPermissionType.ANY, everything)])
            # The changelog is left to the stage (Create): the test reads the output from the start.
            topics = [self.names[name] for name in ("input", "output", "dead")]
            admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1} for topic in topics})
        finally:
            admin.close()
        produce(broker.bootstrap, self.names["input"], document_messages(make_clustered_corpus(documents, 5), 1))

    def _acls(self, which: list[str]) -> list[ACL]:
        return [
            ACL(
                f"User:{USER}",
                "*",
                DOCUMENTED[name][2],
                ACLPermissionType.ALLOW,
                ResourcePattern(DOCUMENTED[name][0], self.names[DOCUMENTED[name][1]], ACLResourcePatternType.LITERAL),
            )
            for name in which
        ]

    def grant(self, which: list[str]) -> None:
        admin = KafkaAdminClient(bootstrap_servers=self.broker.bootstrap)
        try:
            assert not admin.create_acls(self._acls(which))["failed"]
        finally:
            admin.close()

    def revoke(self, which: list[str]) -> None:
        filters = [
            ACLFilter(
                acl.principal,
                acl.host,
                acl.operation,
                acl.permission_type,
                ResourcePatternFilter(
                    acl.resource_pattern.resource_type,
                    acl.resource_pattern.resource_name,
                    ACLResourcePatternType.LITERAL,
                ),
            )
            for acl in self._acls(which)
        ]
        admin = KafkaAdminClient(bootstrap_servers=self.broker.bootstrap)
        try:
            admin.delete_acls(filters)
        finally:
            admin.close()

    def environment(self) -> dict[str, str]:
        assert self.broker.sasl_bootstrap is not None
        values = {
            "bootstrap_servers": self.broker.sasl_bootstrap,
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_username": USER,
            "sasl_password": PASSWORD,
            "input_topic": self.names["input"],
            "output_topic": self.names["output"],
            "dead_letter_topic": self.names["dead"],
            "group_id": self.names["group"],
            "instance_id": "worker-0",
            "snapshot_dir": str(self.tmp_path / "snapshots"),
            "signing_processes": "0",
            "metrics_port": "0",
            "log_format": "json",
        }
        return {f"STREAM_DEDUP_{name.upper()}": value for name, value in values.items()}

    def refused_run(self) -> str:
        """``stream-dedup run`` expected to stop by itself: its one ``stream-dedup:`` line (exit 4, no traceback)."""
        run = subprocess.run(
            [sys.executable, "-m", "stream_dedup.cli.main", "run"],
            env={**os.environ, **self.environment()},
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
        ours = [line for line in run.stderr.splitlines() if line.startswith("stream-dedup:")]
        assert run.returncode == 4 and len(ours) == 1, run.stderr[-3000:]
        assert "Traceback" not in run.stderr and "restarting the session" not in run.stdout + run.stderr
        return ours[0]


def test_the_documented_acls_give_every_verdict_and_a_changelog_whose_acls_are_lost_is_not_said_deleted(
    acl_broker: JarBroker, tmp_path: Path
) -> None:
    stage = AclStage(acl_broker, tmp_path)
    stage.grant(list(DOCUMENTED))
    worker = WorkerProcess(stage.environment(), tmp_path / "worker.log").start()
    try:
        records = read_committed(acl_broker.bootstrap, stage.names["output"], stage.documents, timeout=120)
    finally:
        worker.signal(signal.SIGTERM)
        assert worker.wait(60) == 0
    assert sorted(json.loads(r.value)["id"] for r in records) == sorted(f"doc-{i}" for i in range(stage.documents))

    # Its group has committed offsets: a changelog it may not describe was taken for one deleted (exit 1,
    # "does not exist ... To start over") while only its ACLs were gone.
    stage.revoke(["Read on the changelog", "Write on the changelog", "DescribeConfigs on the changelog"])
    line = stage.refused_run()
    assert f"Refused: Describe on topic {stage.names['changelog']}" in line
    assert "does not exist" not in line


@pytest.mark.parametrize(
    ("missing", "refused"),
    [
        ("Read on the input", "Refused: Describe on topic {input}"),
        ("DescribeConfigs on the changelog", "Refused: DescribeConfigs on topic {changelog}"),
        ("Create on the cluster", "Refused: Create on topic"),
        ("Read on the group", "GroupAuthorizationFailedError"),
        ("Write on the transactional id", "TransactionalIdAuthorizationFailedError"),
    ],
)
def test_each_acl_missing_stops_the_stage_at_once_naming_it(
    acl_broker: JarBroker, tmp_path: Path, missing: str, refused: str
) -> None:
    """Not a session restarted every 1-30 s for ever, alive and judging nothing, nor a traceback."""
    stage = AclStage(acl_broker, tmp_path, documents=5)
    stage.grant([name for name in DOCUMENTED if name != missing])
    line = stage.refused_run()
    assert refused.format(**stage.names) in line
    assert f"sasl_username='{USER}'" in line and f"Read on group {stage.names['group']}" in line
