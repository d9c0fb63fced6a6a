"""docker-compose.yml: valid for Compose itself (`docker compose config`), and a pipeline
whose services agree with each other and with the worker's settings."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .deployfiles import (
    COMPOSE,
    REPO_ROOT,
    SNAPSHOT_DIR,
    assert_ok,
    compose_workers,
    docker_compose,
    require_module,
    run,
)

yaml = require_module("yaml")


def test_compose_file_passes_docker_compose_config() -> None:
    assert_ok(run(docker_compose(), "-f", str(COMPOSE), "config", "--quiet"))


def test_docker_compose_config_rejects_an_unknown_key(tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(
        COMPOSE.read_text(encoding="utf-8").replace("stop_grace_period:", "stop_grace_periods:"), encoding="utf-8"
    )
    result = run(docker_compose(), "-f", str(broken), "config", "--quiet", cwd=tmp_path)
    assert result.returncode != 0
    assert "stop_grace_periods" in result.stderr


def test_compose_publishes_ports_on_localhost_only(compose_model: dict[str, Any]) -> None:
    for name, service in compose_model["services"].items():
        for port in service.get("ports", []):
            assert port.get("host_ip") == "127.0.0.1", f"{name} publishes {port} beyond 127.0.0.1"


def test_compose_runs_two_distinct_workers(compose_model: dict[str, Any]) -> None:
    workers = compose_workers(compose_model)
    assert len(workers) == 2
    instance_ids = {w["environment"]["STREAM_DEDUP_INSTANCE_ID"] for w in workers.values()}
    volumes = {v["source"] for w in workers.values() for v in w["volumes"] if v["target"] == SNAPSHOT_DIR}
    assert len(instance_ids) == 2 and len(volumes) == 2, "each replica needs its own id and snapshot volume"
    for worker in workers.values():
        environment = worker["environment"]
        assert environment["STREAM_DEDUP_METRICS_HOST"] == "0.0.0.0"
        assert environment["STREAM_DEDUP_BOOTSTRAP_SERVERS"] == "kafka:19092"
        assert {environment["STREAM_DEDUP_GROUP_ID"]} == {"stream-dedup"}
        assert worker["depends_on"]["topics"]["condition"] == "service_completed_successfully"
        assert worker["build"]["context"] == str(REPO_ROOT)


def test_compose_stop_grace_outlasts_the_worker_shutdown(compose_model: dict[str, Any]) -> None:
    for name, worker in compose_workers(compose_model).items():
        grace = int(re.fullmatch(r"(\d+)s", worker["stop_grace_period"]).group(1))  # type: ignore[union-attr]
        assert grace > int(worker["environment"]["STREAM_DEDUP_SHUTDOWN_GRACE_SECONDS"]), name


def test_compose_topics_match_the_worker_settings(compose_model: dict[str, Any]) -> None:
    script = compose_model["services"]["topics"]["command"][0]
    created = dict(re.findall(r"([\w-]+):(\d+)", script.split("for spec in", 1)[1].split(";", 1)[0]))
    worker = next(iter(compose_workers(compose_model).values()))["environment"]
    for setting in ("INPUT_TOPIC", "OUTPUT_TOPIC", "DEAD_LETTER_TOPIC", "UNIQUE_TOPIC"):
        assert worker[f"STREAM_DEDUP_{setting}"] in created
    assert created["documents"] == "3"
    producer = compose_model["services"]["sample-data"]
    assert producer["command"][:1] == ["produce-sample"]
    assert producer["command"][producer["command"].index("--topic") + 1] == worker["STREAM_DEDUP_INPUT_TOPIC"]
    assert producer["healthcheck"]["disable"] is True


def test_compose_kafka_is_a_single_node_kraft_broker(compose_model: dict[str, Any]) -> None:
    kafka = compose_model["services"]["kafka"]
    assert re.fullmatch(r"apache/kafka:4\.\d+\.\d+", kafka["image"])
    env = kafka["environment"]
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == f"{env['KAFKA_NODE_ID']}@kafka:9093"
    for setting in (
        "OFFSETS_TOPIC_REPLICATION_FACTOR",
        "TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        "TRANSACTION_STATE_LOG_MIN_ISR",
    ):
        assert env[f"KAFKA_{setting}"] == "1", setting
    assert env["KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS"] == "0"
    assert "PLAINTEXT://kafka:19092" in env["KAFKA_ADVERTISED_LISTENERS"]
    assert kafka["healthcheck"]["test"][0] == "CMD-SHELL"
    assert compose_model["services"]["topics"]["depends_on"]["kafka"]["condition"] == "service_healthy"


def test_compose_prometheus_mounts_the_rules() -> None:
    service = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]["prometheus"]
    assert "./deploy/prometheus:/etc/prometheus:ro" in service["volumes"]
    assert "--config.file=/etc/prometheus/prometheus.yml" in service["command"]


def test_compose_sharded_profile_runs_each_role_with_valid_settings_of_its_own() -> None:
    import json

    from stream_dedup.cli.settings_sources import resolve_settings

    result = run(docker_compose(), "-f", str(COMPOSE), "--profile", "sharded", "config", "--format", "json")
    assert_ok(result)
    model = json.loads(result.stdout)
    roles = {name: s for name, s in model["services"].items() if "sharded" in s.get("profiles", [])}
    settings = {name: resolve_settings({}, service["environment"]) for name, service in roles.items()}
    assert sorted(s.role for s in settings.values()) == ["judge", "shard", "shard", "signer"]
    shards = [s for s in settings.values() if s.role == "shard"]
    assert sorted(s.shard_index for s in shards) == list(range(shards[0].shards))
    assert len({s.instance_id for s in settings.values()}) == len(settings)
    single = model["services"]["stream-dedup-1"]["environment"]
    for name, service in roles.items():
        # Its own deployment beside the single-process one: other groups, topics and verdicts.
        assert settings[name].group_id != single["STREAM_DEDUP_GROUP_ID"]
        assert settings[name].output_topic != single["STREAM_DEDUP_OUTPUT_TOPIC"]
        assert all(port.get("host_ip") == "127.0.0.1" for port in service.get("ports", []))
        grace = int(re.fullmatch(r"(\d+)s", service["stop_grace_period"]).group(1))  # type: ignore[union-attr]
        assert grace > settings[name].shutdown_grace_seconds


def test_no_stage_service_is_given_a_setting_it_does_not_read() -> None:
    # Read as YAML (anchors and merge keys resolved) so that it runs without Compose too.
    from stream_dedup.cli.settings_sources import layered_settings
    from stream_dedup.cli.unused_settings import unused_settings

    services = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]
    stages = {
        name: s["environment"] for name, s in services.items() if "STREAM_DEDUP_GROUP_ID" in s.get("environment", {})
    }
    assert len(stages) == 6  # two workers; a signer, two shards and a judge
    for name, environment in stages.items():
        assert unused_settings(*layered_settings({}, {k: str(v) for k, v in environment.items()})) == [], name


def test_the_sample_producer_runs_a_command_the_cli_accepts() -> None:
    # Read as YAML so that it runs without Compose too; a misspelt flag would end the container with usage.
    from stream_dedup.cli.main import build_parser

    producer = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"]["sample-data"]
    assert producer["entrypoint"] == ["stream-dedup"]
    args = build_parser().parse_args(producer["command"])
    assert args.command == "produce-sample" and args.topic and args.count and args.rate
