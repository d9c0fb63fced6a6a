"""Every pod of both Kubernetes stages (deploy/kubernetes, deploy/kubernetes/sharded) against the worker it runs.

Its command is one the CLI accepts; its probes and its ``prometheus.io`` scrape annotations reach
what the worker serves, on the port its own settings give; and everything it names (ConfigMap,
ServiceAccount, governing Service, volumes) is an object of its stage. A probe on a path the worker
does not serve answers 404, which the kubelet takes for a failure: a liveness probe restarts a
healthy pod over and over, a readiness probe keeps it out of service for good. kustomize and the
schemas accept either mistake.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stream_dedup.cli.main import build_parser
from stream_dedup.cli.settings_sources import resolve_settings
from stream_dedup.ops.http import Health, OpsServer
from stream_dedup.ops.metrics import WorkerMetrics

from .deployfiles import REPO_ROOT, kubernetes_objects, pod_environment, statefulsets

PROBES = ("startupProbe", "livenessProbe", "readinessProbe")
STATEFULSETS = statefulsets()


def statefulset_id(item: tuple[Path, dict[str, Any]]) -> str:
    directory, statefulset = item
    return f"{directory.relative_to(REPO_ROOT)}/{statefulset['metadata']['name']}"


@pytest.fixture(scope="module")
def worker_url() -> Iterator[str]:
    """The address of the HTTP server a worker runs, with nothing behind it yet."""
    with OpsServer("127.0.0.1", 0, WorkerMetrics(), Health()) as server:
        yield f"http://127.0.0.1:{server.port}"


def status_of(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return error.code


def container_of(statefulset: dict[str, Any]) -> dict[str, Any]:
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    return dict(container)


def test_the_stages_have_the_statefulsets_the_docs_describe() -> None:
    assert len(STATEFULSETS) == 5  # the single stage's; the signers, shards, shards' standbys and judge


@pytest.mark.parametrize("item", STATEFULSETS, ids=statefulset_id)
def test_the_container_command_is_one_the_cli_accepts(item: tuple[Path, dict[str, Any]]) -> None:
    container = container_of(item[1])
    assert "command" not in container, "the image's ENTRYPOINT (stream-dedup) runs the arguments"
    assert build_parser().parse_args(container["args"]).command == "run"


@pytest.mark.parametrize("item", STATEFULSETS, ids=statefulset_id)
def test_probes_and_scrape_annotations_reach_what_the_worker_serves_on_its_port(
    item: tuple[Path, dict[str, Any]], worker_url: str
) -> None:
    directory, statefulset = item
    settings = resolve_settings({}, pod_environment(directory, statefulset, 0))
    container = container_of(statefulset)
    ports = {port["name"]: port["containerPort"] for port in container["ports"]}
    assert list(ports.values()) == [settings.metrics_port], "the container's port is the worker's metrics_port"
    assert settings.metrics_host in ("0.0.0.0", "::"), "the kubelet and Prometheus reach the pod's address"
    for probe in PROBES:
        request = container[probe]["httpGet"]
        assert ports.get(request["port"], request["port"]) == settings.metrics_port, f"{probe} port"
        assert status_of(worker_url + request["path"]) != 404, f"{probe}: the worker serves no {request['path']}"
    annotations = statefulset["spec"]["template"]["metadata"]["annotations"]
    assert annotations["prometheus.io/scrape"] == "true"
    assert int(annotations["prometheus.io/port"]) == settings.metrics_port
    assert status_of(worker_url + annotations["prometheus.io/path"]) == 200


def test_the_worker_answers_404_to_a_path_it_does_not_serve(worker_url: str) -> None:
    assert status_of(worker_url + "/ready") == 404


@pytest.mark.parametrize("item", STATEFULSETS, ids=statefulset_id)
def test_what_the_pod_names_is_an_object_of_its_stage(item: tuple[Path, dict[str, Any]]) -> None:
    directory, statefulset = item
    objects = kubernetes_objects(directory)
    pod = statefulset["spec"]["template"]["spec"]
    assert ("ServiceAccount", pod["serviceAccountName"]) in objects
    governing = objects[("Service", statefulset["spec"]["serviceName"])]
    assert governing["spec"]["clusterIP"] == "None", "the governing Service of a StatefulSet is headless"
    for source in container_of(statefulset)["envFrom"]:
        reference = source.get("configMapRef") or source["secretRef"]
        kind = "ConfigMap" if "configMapRef" in source else "Secret"
        assert reference.get("optional") or (kind, reference["name"]) in objects, f"{kind} {reference['name']}"
    volumes = {volume["name"] for volume in pod.get("volumes", [])}
    volumes |= {claim["metadata"]["name"] for claim in statefulset["spec"].get("volumeClaimTemplates", [])}
    for mount in container_of(statefulset)["volumeMounts"]:
        assert mount["name"] in volumes, f"{mount['mountPath']} mounts {mount['name']}, which the pod does not have"
