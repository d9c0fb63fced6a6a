"""Kubernetes, sharded stage (deploy/kubernetes/sharded): the schemas, the kustomization, and the promises
the roles' StatefulSets make to each other and to the settings (docs/scale-out.md)."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from stream_dedup.cli.settings_sources import layered_settings, resolve_settings
from stream_dedup.cli.unused_settings import unused_settings
from stream_dedup.worker.settings import WorkerSettings

from .deployfiles import (
    KUBERNETES,
    PROMETHEUS,
    assert_ok,
    load_yaml_documents,
    pod_environment,
    require_module,
    run,
    tool,
)

yaml = require_module("yaml")

from . import promql  # noqa: E402  (after the PyYAML check: promql needs it)

SHARDED = KUBERNETES / "sharded"
#: Not applied through kustomization.yaml: a CRD of the Prometheus Operator, which kubernetes-validate does not know.
OPTIONAL_MANIFESTS = {"servicemonitor.yaml"}
KUBERNETES_VERSIONS = ("1.30.0", "latest")
ROLE_SETS = {"signer.yaml": "signer", "shard.yaml": "shard", "shard-standby.yaml": "shard", "judge.yaml": "judge"}


def load(name: str) -> dict[str, Any]:
    (document,) = load_yaml_documents(SHARDED / name)
    return document


def validate(document: dict[str, Any], version: str) -> None:
    module = require_module("kubernetes_validate")
    module.validate(document, module.latest_version() if version == "latest" else version, strict=True)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize(
    "name", sorted(p.name for p in SHARDED.glob("*.yaml") if p.name not in {"kustomization.yaml", *OPTIONAL_MANIFESTS})
)
def test_sharded_manifest_matches_the_kubernetes_schema(name: str, version: str) -> None:
    for document in load_yaml_documents(SHARDED / name):
        validate(document, version)


def test_sharded_kustomization_renders_every_manifest_and_nothing_of_the_single_stage() -> None:
    kubectl = shutil.which("kubectl")
    result = run(kubectl, "kustomize", str(SHARDED)) if kubectl else run(tool("kustomize"), "build", str(SHARDED))
    assert_ok(result)
    rendered = [doc for doc in yaml.safe_load_all(result.stdout) if doc]
    kustomization = yaml.safe_load((SHARDED / "kustomization.yaml").read_text(encoding="utf-8"))
    assert set(kustomization["resources"]) == {p.name for p in SHARDED.glob("*.yaml")} - {
        "kustomization.yaml",
        *OPTIONAL_MANIFESTS,
    }
    names = {(doc["kind"], doc["metadata"]["name"]) for doc in rendered}
    assert {name for kind, name in names if kind == "StatefulSet"} == {load(f)["metadata"]["name"] for f in ROLE_SETS}
    assert all(name.startswith("stream-dedup-") and "sharded" in name for kind, name in names if kind != "StatefulSet")


def settings_of(statefulset: dict[str, Any], ordinal: int) -> WorkerSettings:
    """The settings a pod of ``statefulset`` starts with: the ConfigMap, then its own variables."""
    return resolve_settings({}, pod_environment(SHARDED, statefulset, ordinal))


@pytest.mark.parametrize("name", sorted(ROLE_SETS))
def test_every_pod_of_every_role_starts_with_valid_settings_of_its_role(name: str) -> None:
    statefulset = load(name)
    for ordinal in range(statefulset["spec"]["replicas"]):
        settings = settings_of(statefulset, ordinal)
        assert settings.role == ROLE_SETS[name]
        assert settings.instance_id == f"{statefulset['metadata']['name']}-{ordinal}"
        if settings.role == "shard":
            assert settings.shard_index == ordinal  # shard K is the pod of ordinal K


@pytest.mark.parametrize("with_credentials", [False, True])
@pytest.mark.parametrize("name", sorted(ROLE_SETS))
def test_no_pod_is_given_a_setting_its_role_does_not_read(name: str, with_credentials: bool) -> None:
    # Every role reads the one ConfigMap (and the optional credentials' Secret): none may log an unused setting.
    secret = load_yaml_documents(KUBERNETES / "secret-sasl.example.yaml")[0]["stringData"] if with_credentials else {}
    statefulset = load(name)
    for ordinal in range(statefulset["spec"]["replicas"]):
        assert unused_settings(*layered_settings({}, pod_environment(SHARDED, statefulset, ordinal) | secret)) == []


def test_each_shard_has_a_standby_in_its_group_and_the_count_is_the_settings() -> None:
    shards, standbys = load("shard.yaml"), load("shard-standby.yaml")
    count = int(load("configmap.yaml")["data"]["STREAM_DEDUP_SHARDS"])
    assert shards["spec"]["replicas"] == standbys["spec"]["replicas"] == count
    for ordinal in range(count):
        active, standby = settings_of(shards, ordinal), settings_of(standbys, ordinal)
        assert active.role_group_id == standby.role_group_id == f"{active.group_id}.shard-{ordinal}"
        assert active.transactional_id != standby.transactional_id
    # The single-active assignor prefers the lower instance id: the shard pod, not its standby.
    assert settings_of(shards, 0).instance_id < settings_of(standbys, 0).instance_id


def test_pods_are_scraped_on_the_metrics_port_and_get_time_to_stop() -> None:
    for name in ROLE_SETS:
        spec = load(name)["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        settings = settings_of(load(name), 0)
        assert container["ports"][0]["containerPort"] == settings.metrics_port
        assert spec["terminationGracePeriodSeconds"] > settings.shutdown_grace_seconds
        assert load(name)["spec"]["serviceName"] == load("service-headless.yaml")["metadata"]["name"]


def test_the_service_monitor_scrapes_every_role_once_as_the_job_the_alerts_watch() -> None:
    monitor, service = load("servicemonitor.yaml"), load("service-metrics.yaml")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1" and monitor["kind"] == "ServiceMonitor"
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert not selector.items() <= load("service-headless.yaml")["metadata"]["labels"].items(), (
        "only the metrics Service, or each pod is scraped twice"
    )
    single_stage = load_yaml_documents(KUBERNETES / "servicemonitor.yaml")[0]["spec"]["selector"]["matchLabels"]
    assert not single_stage.items() <= service["metadata"]["labels"].items(), "the single stage's monitor takes it too"
    for name in ROLE_SETS:
        assert service["spec"]["selector"].items() <= load(name)["spec"]["template"]["metadata"]["labels"].items()
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
    assert service["spec"]["publishNotReadyAddresses"], "standbys and restoring pods are what some alerts watch"
    # The job label comes from this Service label: the name docker-compose.yml's profile "sharded" is scraped
    # under, so that alerts.yml and the dashboard see one sharded stage by one job name wherever it runs.
    job = service["metadata"]["labels"][monitor["spec"]["jobLabel"]]
    compose = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text(encoding="utf-8"))
    assert job in {scrape["job_name"] for scrape in compose["scrape_configs"]}
    assert job == promql.SHARDED_JOB
