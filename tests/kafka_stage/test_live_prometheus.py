"""The dashboard and the alert rules against a live stage: a real Prometheus scrapes two workers,
one active and one standby, while documents (some of them bad) keep flowing, and every panel's
query and every alert's signal must parse and return series. The same against a live sharded
stage: a signer, two shards (one with a standby) and a judge, scraped as the job docker-compose.yml
and the sharded ServiceMonitor give them, so that a rule selecting the single stage's job fails.

A panel or an alert on a metric the worker does not export, or exports only in some states,
shows "No data" or never fires, and no syntax check notices. promtool's checks of the rule
file itself are in tests/deploy/test_prometheus.py.

This deploy test lives with the Kafka stage tests to share their session broker
(tests/kafka_stage/conftest.py): importing those fixtures elsewhere would start a second one.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest
from kafka import KafkaProducer

from tests.corpus import make_clustered_corpus
from tests.deploy.deployfiles import require_module

yaml = require_module("yaml")  # tests.deploy.promql needs it too

from tests.deploy.live import PrometheusServer, free_port, prometheus_binary, running_prometheus  # noqa: E402
from tests.deploy.promql import (  # noqa: E402
    ALERTS,
    JOB,
    SHARDED_JOB,
    Query,
    all_queries,
    dashboard_queries,
    load_alert_rules,
)

from .stage import Stage, WorkerProcess, document_messages, role_processes, wait_until  # noqa: E402
from .test_worker import BAD_MESSAGES  # noqa: E402

pytestmark = pytest.mark.kafka

WORKERS = ("worker-1", "worker-2")
#: Input rate: enough for non-zero rates in every 1 m window, little enough to keep lag near 0.
DOCUMENTS_PER_SECOND = 100
#: "too large" in BAD_MESSAGES is above this; every good document of the corpus is below.
MAX_DOCUMENT_BYTES = 2000


@pytest.fixture
def live_stage(stage: Stage, topic_factory: Callable[..., str]) -> Stage:
    """A stage that forwards unique documents, rejects large ones and snapshots every 2 s."""
    stage.extra = {
        "unique_topic": topic_factory(partitions=3),
        "max_document_bytes": str(MAX_DOCUMENT_BYTES),
        # A snapshot within seconds, so the snapshot panels have something to show.
        "snapshot_interval_seconds": "2",
        "shutdown_grace_seconds": "10",
        "batch_size": "200",
    }
    return stage


@contextlib.contextmanager
def documents_flowing(bootstrap: str, topic: str) -> Iterator[None]:
    """Documents at :data:`DOCUMENTS_PER_SECOND` and a bad record every second, on a thread, until the block ends.

    The bad records go through every dead-letter reason in turn, so ``rate()`` of the dead
    letters is above zero in every window and the dead-letter panels show each reason.
    """
    good = document_messages(make_clustered_corpus(10_000, seed=41), partitions=3)
    bad = [(f"bad-{i}".encode(), value, i % 3) for i, (value, _) in enumerate(BAD_MESSAGES.values())]
    stop = threading.Event()
    failure: list[BaseException] = []

    def feed() -> None:
        producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
        try:
            started = time.monotonic()
            per_tick = DOCUMENTS_PER_SECOND // 10
            # A tenth of a second's worth at a time, until the corpus runs out (100 s at the default rate).
            for tick in range(len(good) // per_tick):
                for key, value, partition, _ in good[tick * per_tick : (tick + 1) * per_tick]:
                    producer.send(topic, key=key, value=value, partition=partition)
                if tick % 10 == 0:
                    bad_key, bad_value, bad_partition = bad[(tick // 10) % len(bad)]
                    producer.send(topic, key=bad_key, value=bad_value, partition=bad_partition)
                producer.flush(10)
                if stop.wait(max(0.0, started + (tick + 1) / 10 - time.monotonic())):
                    break
        except BaseException as error:
            failure.append(error)
        finally:
            producer.close()

    thread = threading.Thread(target=feed, name="documents-flowing", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(30)
    if failure:
        raise failure[0]


#: A setting the stages' method (minhash) does not read, as operators leave one: the panel naming it has a series.
UNREAD_SETTING = {"max_hamming": 5}


@contextlib.contextmanager
def running_workers(stage: Stage, ports: Sequence[int], directory: Path) -> Iterator[list[WorkerProcess]]:
    """``stream-dedup run`` for each of :data:`WORKERS`, one group, metrics on ``ports``; SIGTERM at the end."""
    workers: list[WorkerProcess] = []
    try:
        for instance, port in zip(WORKERS, ports, strict=True):
            environment = stage.environment(instance, metrics_port=port, **UNREAD_SETTING)
            workers.append(WorkerProcess(environment, directory / f"{instance}.log").start())
        yield workers
    finally:
        for worker in workers:
            if worker.running():
                worker.signal(signal.SIGTERM)
        for worker in workers:
            with contextlib.suppress(Exception):
                worker.wait(20)  # the grace period is 10 s
            if worker.running():
                worker.kill()


def roles_by_instance(prometheus: PrometheusServer, job: str = JOB) -> dict[str, str]:
    """Each instance of ``job``'s current role, as Prometheus last scraped it."""
    answer = prometheus.query(f'stream_dedup_role{{job="{job}"}} == 1')
    return {series["metric"]["instance"]: series["metric"]["role"] for series in answer["data"]["result"]}


def has_series(prometheus: PrometheusServer, expr: str) -> bool:
    answer = prometheus.query(expr)
    return answer["status"] == "success" and bool(answer["data"]["result"])


def stage_observed(prometheus: PrometheusServer, targets: Sequence[str]) -> bool:
    """Prometheus has seen what every panel shows: one active and one standby replica, documents
    and dead letters flowing, and a snapshot written by each replica."""
    roles = roles_by_instance(prometheus)
    return (
        set(roles) == set(targets)
        and sorted(roles.values()) == ["active", "standby"]
        and has_series(prometheus, 'sum(rate(stream_dedup_documents_total{job="stream-dedup"}[1m])) > 0')
        and has_series(prometheus, 'sum(rate(stream_dedup_dead_letters_total{job="stream-dedup"}[1m])) > 0')
        and has_series(
            prometheus,
            f'count(stream_dedup_snapshot_duration_seconds_count{{job="stream-dedup"}} > 0) == {len(targets)}',
        )
    )


def why_empty(prometheus: PrometheusServer, query: Query) -> str | None:
    """Why ``query`` shows nothing useful now (an error, no series, only NaN), or None if it does."""
    answer = prometheus.query(query.expr)
    if answer["status"] != "success":
        return f"{answer.get('errorType', 'error')}: {answer.get('error', '')}"
    series = answer["data"]["result"]
    if not series:
        return "no series"
    values = [float(s["value"][1]) for s in series] if answer["data"]["resultType"] == "vector" else []
    if values and all(math.isnan(v) for v in values):
        return f"only NaN ({len(series)} series)"
    return None


@contextlib.contextmanager
def prometheus_watching(
    stage: Stage,
    targets: Sequence[str],
    directory: Path,
    binary: str,
    observed: Callable[[PrometheusServer, Sequence[str]], bool],
    what: str,
    job: str = JOB,
) -> Iterator[PrometheusServer]:
    """Documents flowing into ``stage`` and a Prometheus scraping ``targets`` as ``job``, once it has ``observed``
    them."""
    with (
        documents_flowing(stage.bootstrap, stage.input_topic),
        running_prometheus(targets, directory, binary=binary, job=job) as prometheus,
    ):
        prometheus.wait_for_targets_up(len(targets), timeout=60)
        wait_until(lambda: observed(prometheus, targets), 90, f"Prometheus to see {what}")
        yield prometheus


def check_every_query_shows_something(prometheus: PrometheusServer, other_stages_alerts: Sequence[str] = ()) -> None:
    """Every panel's query and alert's signal shows something, asked again for a few seconds if not: a rate
    can still be 0/0 while scrapes catch up with the stage. The signals of ``other_stages_alerts`` are left
    out: those alerts watch only another kind of stage."""
    queries = [q for q in all_queries() if not any(q.name.startswith(f"alert {name} ") for name in other_stages_alerts)]
    failures = {q: "not evaluated" for q in queries}
    deadline = time.monotonic() + 10
    while failures and time.monotonic() <= deadline:
        failures = {q: why for q in failures if (why := why_empty(prometheus, q)) is not None}
        time.sleep(0 if not failures else 1)
    assert not failures, f"{len(failures)} of {len(queries)} queries show nothing:\n" + "\n".join(
        f"- {q.name}: {why}\n    {q.expr}" for q, why in failures.items()
    )


def test_every_dashboard_query_and_alert_signal_returns_series_from_a_live_stage(
    live_stage: Stage, tmp_path: Path
) -> None:
    binary = prometheus_binary()  # before starting anything: skips, or fails under CI, if missing
    ports = [free_port() for _ in WORKERS]
    targets = [f"127.0.0.1:{port}" for port in ports]
    observed = "one active and one standby replica, documents, dead letters and snapshots"
    with (
        running_workers(live_stage, ports, tmp_path),
        prometheus_watching(live_stage, targets, tmp_path, binary, stage_observed, observed) as prometheus,
    ):
        check_every_query_shows_something(prometheus)
        groups = prometheus.rule_groups()

    # Loaded as written, and every rule evaluated without error (once a second since the start).
    expected_groups = {group["name"] for group in yaml.safe_load(ALERTS.read_text(encoding="utf-8"))["groups"]}
    assert {group["name"] for group in groups} == expected_groups
    assert {rule["name"] for group in groups for rule in group["rules"]} == {r["alert"] for r in load_alert_rules()}
    rule_problems = [
        f"{rule['name']}: health {rule['health']} {rule.get('lastError', '')}".rstrip()
        for group in groups
        for rule in group["rules"]
        if rule["health"] != "ok"
    ]
    assert not rule_problems, f"alert rules failing in Prometheus: {rule_problems}"


#: The sharded stage's processes and their roles: shard 1 has a standby.
ROLES: dict[str, dict[str, object]] = {
    "signer-1": {"role": "signer"},
    "shard-0": {"role": "shard", "shard_index": 0},
    "shard-1": {"role": "shard", "shard_index": 1},
    "shard-1b": {"role": "shard", "shard_index": 1},
    "judge-1": {"role": "judge"},
}


def sharded_stage_observed(prometheus: PrometheusServer, targets: Sequence[str]) -> bool:
    """Every role scraped, shard 1's standby standing by, verdicts and dead letters flowing, each shard snapshotted."""
    roles = roles_by_instance(prometheus, SHARDED_JOB)
    return (
        set(roles) == set(targets)
        and sorted(roles.values()) == ["active"] * 4 + ["standby"]
        and has_series(prometheus, f'sum(rate(stream_dedup_documents_total{{job="{SHARDED_JOB}"}}[1m])) > 0')
        and has_series(prometheus, f'sum(rate(stream_dedup_dead_letters_total{{job="{SHARDED_JOB}"}}[1m])) > 0')
        and has_series(
            prometheus, f'count(stream_dedup_snapshot_duration_seconds_count{{job="{SHARDED_JOB}"}} > 0) >= 2'
        )
    )


def test_every_dashboard_query_and_alert_signal_returns_series_from_a_live_sharded_stage(
    live_stage: Stage, tmp_path: Path
) -> None:
    binary = prometheus_binary()
    ports = {name: free_port() for name in ROLES}
    targets = [f"127.0.0.1:{port}" for port in ports.values()]
    own = {name: {**settings, "metrics_port": ports[name]} for name, settings in ROLES.items()}
    role_processes(live_stage, tmp_path, own, shards=2, index_slots=6, **UNREAD_SETTING)
    observed = "every role, a standby, verdicts, dead letters and the shards' snapshots"
    with prometheus_watching(
        live_stage, targets, tmp_path, binary, sharded_stage_observed, observed, SHARDED_JOB
    ) as prometheus:
        # The roles' standbys are optional (docker-compose.yml's profile runs none).
        check_every_query_shows_something(prometheus, other_stages_alerts=["StreamDedupNoStandby"])
        check_snapshot_ages_show_the_shards_only(prometheus)


def check_snapshot_ages_show_the_shards_only(prometheus: PrometheusServer) -> None:
    """The snapshot age panels show the shards only: a signer and a judge write no snapshot, and their timestamp
    of 0 showed as an age of 56 years beside the shards'."""
    keeping = prometheus.query(f'stream_dedup_stage_role{{job="{SHARDED_JOB}", stage_role="shard"}}')
    shards = {series["metric"]["instance"] for series in keeping["data"]["result"]}
    for query in dashboard_queries():
        if "snapshot_last_success_timestamp_seconds" in query.expr:
            shown = {series["metric"]["instance"] for series in prometheus.query(query.expr)["data"]["result"]}
            assert shown == shards, f"{query.name} shows {sorted(shown)}, not the shards {sorted(shards)}"
