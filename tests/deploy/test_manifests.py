"""Kubernetes: every manifest against the Kubernetes schemas (kubernetes-validate, strict),
the kustomization as kustomize renders it, and the promises the manifests make to each
other, to the image and to the worker."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from stream_dedup.cli.settings_sources import layered_settings
from stream_dedup.cli.unused_settings import unused_settings

from .deployfiles import (
    IMAGE_UID,
    KUBERNETES,
    METRICS_PORT,
    SNAPSHOT_DIR,
    assert_ok,
    dockerfile_uid,
    load_yaml_documents,
    manifest,
    require_module,
    run,
    tool,
)

yaml = require_module("yaml")

from . import promql  # noqa: E402  (after the PyYAML check: promql needs it)

# Kubernetes versions the manifests must be valid for: an old supported one and the newest
# that kubernetes-validate knows.
KUBERNETES_VERSIONS = ("1.30.0", "latest")
# Files in deploy/kubernetes that are not applied through kustomization.yaml.
OPTIONAL_MANIFESTS = {"servicemonitor.yaml", "secret-sasl.example.yaml"}


def validate_resource(document: dict[str, Any], version: str) -> None:
    module = require_module("kubernetes_validate")
    if version == "latest":
        version = module.latest_version()
    module.validate(document, version, strict=True)


# Every manifest but kustomization.yaml (not an API object) and the ServiceMonitor (a CRD,
# whose schema kubernetes-validate does not bundle).
VALIDATED_MANIFESTS = sorted(
    p.name for p in KUBERNETES.glob("*.yaml") if p.name not in {"kustomization.yaml", "servicemonitor.yaml"}
)


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("name", VALIDATED_MANIFESTS)
def test_manifest_matches_the_kubernetes_schema(name: str, version: str) -> None:
    for document in load_yaml_documents(KUBERNETES / name):
        validate_resource(document, version)


def test_schema_validation_rejects_a_misspelt_field() -> None:
    module = require_module("kubernetes_validate")
    statefulset = manifest("statefulset.yaml")
    statefulset["spec"]["template"]["spec"]["terminationGracePeriodSecond"] = 60
    with pytest.raises(module.ValidationError):
        validate_resource(statefulset, "latest")


def render_kustomization() -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl:
        result = run(kubectl, "kustomize", str(KUBERNETES))
    else:
        result = run(tool("kustomize"), "build", str(KUBERNETES))
    assert_ok(result)
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def test_kustomization_renders_valid_resources() -> None:
    rendered = render_kustomization()
    assert {doc["kind"] for doc in rendered} == {
        "ServiceAccount",
        "ConfigMap",
        "Service",
        "StatefulSet",
        "PodDisruptionBudget",
    }
    for document in rendered:
        validate_resource(document, "latest")
        assert "namespace" not in document["metadata"], "manifests stay namespace-agnostic"


def test_kustomization_lists_every_manifest_but_the_optional_ones() -> None:
    kustomization = yaml.safe_load((KUBERNETES / "kustomization.yaml").read_text(encoding="utf-8"))
    on_disk = {p.name for p in KUBERNETES.glob("*.yaml")} - {"kustomization.yaml"} - OPTIONAL_MANIFESTS
    assert set(kustomization["resources"]) == on_disk


def worker_container(statefulset: dict[str, Any]) -> dict[str, Any]:
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    return container


def test_statefulset_runs_an_active_and_a_standby_replica() -> None:
    spec = manifest("statefulset.yaml")["spec"]
    assert spec["replicas"] == 2
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["serviceName"] == manifest("service-headless.yaml")["metadata"]["name"]
    env = {e["name"]: e for e in worker_container(manifest("statefulset.yaml"))["env"]}
    # The pod name is the stable instance id (static membership, transactional id).
    assert env["STREAM_DEDUP_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def test_termination_grace_period_outlasts_the_worker_shutdown() -> None:
    settings = manifest("configmap.yaml")["data"]
    pod = manifest("statefulset.yaml")["spec"]["template"]["spec"]
    # The worker needs shutdown_grace_seconds to finish its transaction and snapshot; the
    # kubelet's SIGKILL must come later, with room for the final fsync.
    assert pod["terminationGracePeriodSeconds"] >= int(settings["STREAM_DEDUP_SHUTDOWN_GRACE_SECONDS"]) + 10


def test_pod_runs_as_the_image_user_without_privileges() -> None:
    pod = manifest("statefulset.yaml")["spec"]["template"]["spec"]
    container = worker_container(manifest("statefulset.yaml"))
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == IMAGE_UID == dockerfile_uid()
    assert pod["securityContext"]["fsGroup"] == IMAGE_UID, "the snapshot volume must be writable"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["securityContext"]["allowPrivilegeEscalation"] is False
    assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
    assert pod["automountServiceAccountToken"] is False
    assert "memory" in container["resources"]["limits"] and container["resources"]["requests"]


def test_probes_and_ports_match_the_worker_settings() -> None:
    settings = manifest("configmap.yaml")["data"]
    container = worker_container(manifest("statefulset.yaml"))
    (port,) = container["ports"]
    assert port == {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}
    assert int(settings["STREAM_DEDUP_METRICS_PORT"]) == METRICS_PORT
    assert settings["STREAM_DEDUP_METRICS_HOST"] == "0.0.0.0"
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    startup = container["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= 600, "a restore may take minutes"
    for name in ("service-headless.yaml", "service-metrics.yaml"):
        (service_port,) = manifest(name)["spec"]["ports"]
        assert service_port["name"] == "metrics" and service_port["port"] == METRICS_PORT
        assert service_port["targetPort"] == "metrics"


def test_snapshots_live_on_the_claimed_volume() -> None:
    settings = manifest("configmap.yaml")["data"]
    statefulset = manifest("statefulset.yaml")
    mounts = {m["mountPath"]: m["name"] for m in worker_container(statefulset)["volumeMounts"]}
    claims = {claim["metadata"]["name"] for claim in statefulset["spec"]["volumeClaimTemplates"]}
    assert settings["STREAM_DEDUP_SNAPSHOT_DIR"] == SNAPSHOT_DIR
    assert mounts[SNAPSHOT_DIR] in claims
    assert "/tmp" in mounts, "a read-only root filesystem needs a writable /tmp"


def test_services_and_budget_select_the_worker_pods() -> None:
    pod_labels = manifest("statefulset.yaml")["spec"]["template"]["metadata"]["labels"]
    selectors = [
        manifest("statefulset.yaml")["spec"]["selector"]["matchLabels"],
        manifest("service-headless.yaml")["spec"]["selector"],
        manifest("service-metrics.yaml")["spec"]["selector"],
        manifest("poddisruptionbudget.yaml")["spec"]["selector"]["matchLabels"],
    ]
    for selector in selectors:
        assert selector.items() <= pod_labels.items()
    assert manifest("poddisruptionbudget.yaml")["spec"]["maxUnavailable"] == 1
    assert manifest("service-headless.yaml")["spec"]["clusterIP"] == "None"


def test_service_monitor_selects_the_metrics_service() -> None:
    monitor = manifest("servicemonitor.yaml")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1" and monitor["kind"] == "ServiceMonitor"
    service = manifest("service-metrics.yaml")
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert (
        not monitor["spec"]["selector"]["matchLabels"].items()
        <= manifest("service-headless.yaml")["metadata"]["labels"].items()
    ), "only the metrics Service, or each pod is scraped twice"
    (endpoint,) = monitor["spec"]["endpoints"]
    assert endpoint["port"] == "metrics" and endpoint["path"] == "/metrics"
    # The job label comes from this Service label: the single-process stage's job, one StreamDedupDown watches.
    assert service["metadata"]["labels"][monitor["spec"]["jobLabel"]] == promql.JOB


def test_sasl_secret_example_holds_only_placeholders() -> None:
    secret = manifest("secret-sasl.example.yaml")
    statefulset = manifest("statefulset.yaml")
    assert secret["stringData"]["STREAM_DEDUP_SASL_USERNAME"] == "REPLACE-ME"
    assert secret["stringData"]["STREAM_DEDUP_SASL_PASSWORD"] == "REPLACE-ME"
    assert "EXAMPLE ONLY" in (KUBERNETES / "secret-sasl.example.yaml").read_text(encoding="utf-8")
    refs = [source["secretRef"] for source in worker_container(statefulset)["envFrom"] if "secretRef" in source]
    assert refs == [{"name": secret["metadata"]["name"], "optional": True}]


@pytest.mark.parametrize("with_credentials", [False, True])
def test_the_worker_is_given_no_setting_it_does_not_read(with_credentials: bool) -> None:
    environ = dict(manifest("configmap.yaml")["data"]) | {"STREAM_DEDUP_INSTANCE_ID": "stream-dedup-0"}
    if with_credentials:
        environ |= manifest("secret-sasl.example.yaml")["stringData"]
    assert unused_settings(*layered_settings({}, environ)) == []
