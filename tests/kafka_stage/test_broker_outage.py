"""The broker away for longer than the group's patience, under an active replica and its standby (or every role
of a sharded stage, a standby shard among them).

Neither replica may stay ready while it cannot reach Kafka: a standby that
says "standby" with no broker is counted by a PodDisruptionBudget and keeps
``StreamDedupNoStandby`` silent, though it could take over nothing. Both stay
alive, and once the broker is back they are an active replica and a ready
standby again, by themselves, and every record has one verdict, an
uninterrupted run's. Nothing a replica measures meanwhile (its lag) waits for
the broker.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartition
from kafka.errors import KafkaTimeoutError
from kafka.structs import OffsetAndMetadata
from prometheus_client.parser import text_string_to_metric_families

from stream_dedup.kafka.bounded_commit import WrittenTopics, send_offsets
from stream_dedup.kafka.clients import KafkaConnection, partition_reader, transactional_producer
from stream_dedup.kafka.processed_lag import ProcessedLag
from tests.corpus import make_clustered_corpus
from tests.deploy.live import free_port

from .broker import JarBroker
from .stage import (
    WorkerProcess,
    check_exactly_once,
    document_messages,
    expected_verdicts,
    produce,
    read_committed,
    role_processes,
    wait_until,
)
from .test_failover import own_stage
from .test_roles import SLOTS, check_one_process_verdicts_once

pytestmark = pytest.mark.kafka

#: 3 x 6 s of silence from the group coordinator ends a session: the outage is noticed within 18 s.
SETTINGS = {"session_timeout_seconds": 6, "transaction_timeout_seconds": 5, "batch_size": 200}
#: What a standby's ``/readyz`` says once the group gave it nothing.
STANDING_BY = "standby: another replica holds the partitions"
#: Longest wait for a replica to say it is not ready, restoring, once the broker is gone: the limit, or the
#: call to the brokers its loop is in as the broker goes (an active's end offsets wait out kafka-python's
#: request timeout, 30 s: seen at 29.9 s under load), plus a poll or two.
NOTICE_SECONDS = 45.0
#: The same for the roles: a standby shard may be asking its group's committed offset as the broker goes, which
#: gives up after transaction_timeout_seconds + 30 s (kafka.group_offsets).
ROLES_NOTICE_SECONDS = SETTINGS["transaction_timeout_seconds"] + 30 + 10.0


def get(port: int, path: str) -> tuple[int, str]:
    """Status and body of ``GET path`` on a replica's ops server."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def readiness(port: int) -> dict[str, Any]:
    """``/readyz`` as JSON, with its HTTP status as ``status``; ``{}`` while the server does not answer."""
    try:
        status, body = get(port, "/readyz")
    except OSError:
        return {}
    return {"status": status, **json.loads(body)}


def role_gauge(port: int) -> dict[str, float]:
    """``stream_dedup_role`` by role, as the dashboards and ``StreamDedupNoStandby`` read it."""
    _, body = get(port, "/metrics")
    return {
        sample.labels["role"]: sample.value
        for family in text_string_to_metric_families(body)
        for sample in family.samples
        if sample.name == "stream_dedup_role"
    }


def stop_and_see_every_replica_wait(own_broker: JarBroker, ports: dict[str, int], seconds: float) -> None:
    """Stop the broker: within ``seconds`` every replica's session ends (not ready, restoring), and it stays alive.

    (A loop held up in a call to the brokers says it is not ready sooner, in the role it had: not enough.)
    """
    own_broker.stop()
    wait_until(
        lambda: (
            all(readiness(port).get("status") == 503 for port in ports.values())
            and all(readiness(port).get("role") == "restoring" for port in ports.values())
        ),
        seconds,
        "every replica to say it is not ready, restoring",
    )
    for name, port in ports.items():
        assert get(port, "/healthz")[0] == 200, f"{name} must stay alive: a restart would find no broker"
        assert role_gauge(port) == {"restoring": 1, "standby": 0, "active": 0, "stopping": 0}, name


def test_a_broker_outage_makes_both_replicas_unready_and_both_come_back_publishing_each_verdict_once(
    own_broker: JarBroker, tmp_path: Path
) -> None:
    stage = own_stage(own_broker, tmp_path)
    corpus = make_clustered_corpus(3000, seed=38)
    messages = document_messages(corpus, partitions=3)
    ports = {"worker-1": free_port(), "worker-2": free_port()}
    replicas = {
        name: WorkerProcess(stage.environment(name, metrics_port=port, **SETTINGS), tmp_path / f"{name}.log")
        for name, port in ports.items()
    }
    replicas["worker-1"].start()
    wait_until(lambda: readiness(ports["worker-1"]).get("role") == "active", 60, "worker-1 to become active")
    replicas["worker-2"].start()
    # Its join completed, the group gave it nothing.
    wait_until(lambda: readiness(ports["worker-2"]).get("reason") == STANDING_BY, 60, "worker-2 to stand by")
    assert readiness(ports["worker-2"])["status"] == 200
    produce(stage.bootstrap, stage.input_topic, messages[:1500])
    read_committed(stage.bootstrap, stage.output_topic, 1500, settle=0)

    stop_and_see_every_replica_wait(own_broker, ports, NOTICE_SECONDS)

    own_broker.start()
    produce(stage.bootstrap, stage.input_topic, messages[1500:])
    records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=120)
    wait_until(
        lambda: (
            sorted(readiness(port).get("role", "") for port in ports.values()) == ["active", "standby"]
            and all(readiness(port)["status"] == 200 for port in ports.values())
        ),
        60,
        "an active replica and a ready standby again",
    )
    gauges = [role_gauge(port) for port in ports.values()]
    assert sum(g["standby"] for g in gauges) == 1 and sum(g["active"] for g in gauges) == 1
    assert all(replica.running() for replica in replicas.values()), "no replica may have exited"
    for replica in replicas.values():
        replica.kill()
    check_exactly_once([json.loads(r.value) for r in records], expected_verdicts(corpus))


#: A sharded stage with a standby for its stateful role: one signer, shard 0 of 1 twice, one judge.
ROLES = {
    "signer-1": {"role": "signer"},
    "shard-a": {"role": "shard", "shard_index": 0},
    "shard-b": {"role": "shard", "shard_index": 0},
    "judge-1": {"role": "judge"},
}


def test_a_broker_outage_makes_every_role_unready_and_each_comes_back_publishing_each_verdict_once(
    own_broker: JarBroker, tmp_path: Path
) -> None:
    stage = own_stage(own_broker, tmp_path)
    corpus = make_clustered_corpus(1500, seed=39)
    messages = document_messages(corpus, partitions=3)
    common = {**SETTINGS, "batch_size": 50, "shards": 1, "index_slots": SLOTS, "signing_processes": 0}
    ports = {name: free_port() for name in ROLES}
    for name, own in ROLES.items():  # one after the other: shard-a is active, shard-b its standby
        role_processes(stage, tmp_path, {name: {**own, "metrics_port": ports[name]}}, **common)
        wait_until(lambda p=ports[name]: readiness(p).get("status") == 200, 60, f"{name} to be ready")
    wait_until(lambda: readiness(ports["shard-b"]).get("reason") == STANDING_BY, 60, "shard-b to stand by")
    produce(stage.bootstrap, stage.input_topic, messages[:750])
    read_committed(stage.bootstrap, stage.output_topic, 750, settle=0)

    stop_and_see_every_replica_wait(own_broker, ports, ROLES_NOTICE_SECONDS)

    own_broker.start()
    produce(stage.bootstrap, stage.input_topic, messages[750:])
    records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=120)
    wait_until(
        lambda: (
            sorted(readiness(ports[name]).get("role", "") for name in ("shard-a", "shard-b")) == ["active", "standby"]
            and all(readiness(port)["status"] == 200 for port in ports.values())
        ),
        60,
        "an active shard, a ready standby shard, and every role ready again",
    )
    check_one_process_verdicts_once(stage, records, f"{stage.group_id}.sequenced", len(corpus))


def test_measuring_the_lag_waits_for_no_broker(own_broker: JarBroker, tmp_path: Path) -> None:
    """kafka-python's ``position()`` settles a position being reset or validated (KIP-320, which it starts by
    itself once a connection to a leader breaks) with the brokers, for as long as they stay away when given no
    timeout: a signer hung there through a broker outage, "active" and ready, its loop stopped. An unsettled
    position counts nothing past the last commit instead."""
    stage = own_stage(own_broker, tmp_path)
    partition = TopicPartition(stage.input_topic, 0)
    produce(stage.bootstrap, stage.input_topic, [(None, b"record", 0)] * 10)
    consumer = partition_reader(KafkaConnection(stage.bootstrap), partition, 0, "earliest")
    lag = ProcessedLag()
    lag.start({partition: 0})
    polled: list[object] = []
    wait_until(lambda: polled.extend(consumer.poll(200).get(partition, [])) or len(polled) == 10, 30, "a fetch")
    lag.given({partition: polled})
    lag.committed({partition: 10})
    assert lag.measure(consumer) == {(stage.input_topic, 0): 0}  # the position has passed the feeder's marker
    own_broker.stop()
    consumer.seek_to_beginning(partition)  # a position only the brokers can settle
    measured: list[dict[tuple[str, int], int]] = []
    measuring = threading.Thread(target=lambda: measured.append(lag.measure(consumer)), daemon=True)
    measuring.start()
    measuring.join(10)
    # (If it hangs, the consumer is left to the daemon thread: closing it under the call could hang too.)
    assert not measuring.is_alive(), "measuring the lag waits for the brokers"
    assert measured == [{(stage.input_topic, 0): 1}]  # the marker: nothing is known past the commit
    consumer.close(timeout_ms=1000)


def test_offsets_sent_to_a_transaction_as_the_broker_goes_give_up_after_a_commits_bound(
    own_broker: JarBroker, tmp_path: Path
) -> None:
    """kafka-python's ``send_offsets_to_transaction()`` waits for the group coordinator for ever: a role that
    began a transaction as the broker went hung there for good, its loop stopped (the broker back did not end
    the wait). It gives up after the bound a commit has, and the session ends like after any Kafka error."""
    stage = own_stage(own_broker, tmp_path)
    connection = KafkaConnection(stage.bootstrap)
    producer = transactional_producer(connection, f"offsets-{stage.group_id}", 10)
    producer.init_transactions()
    producer.begin_transaction()
    own_broker.stop()
    offsets = {TopicPartition(stage.input_topic, 0): OffsetAndMetadata(1, "", -1)}
    sending: list[BaseException] = []

    def send() -> None:
        try:
            send_offsets(producer, offsets, stage.group_id, WrittenTopics(connection, {}, timeout_seconds=3))
        except BaseException as error:
            sending.append(error)

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    thread.join(30)
    # (If it hangs, the producer is left to the daemon thread: closing it under the call could hang too.)
    assert not thread.is_alive(), "sending offsets waits for the brokers"
    assert len(sending) == 1 and isinstance(sending[0], KafkaTimeoutError), sending
    producer.close(timeout=1)
