"""Dockerfile: hadolint, the image's promises (non-root, slim, entrypoint, health check), and
what the builder stage installs: the wheel built from the same build context."""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from .deployfiles import (
    DOCKERFILE,
    METRICS_PORT,
    REPO_ROOT,
    SNAPSHOT_DIR,
    assert_ok,
    dockerfile_instructions,
    dockerfile_uid,
    require_module,
    run,
    tool,
)


def test_dockerfile_passes_hadolint() -> None:
    assert_ok(run(tool("hadolint"), str(DOCKERFILE)))


def test_hadolint_rejects_a_careless_dockerfile(tmp_path: Path) -> None:
    careless = tmp_path / "Dockerfile"
    careless.write_text(
        "FROM python:latest\nRUN apt-get update && apt-get install -y curl\nRUN pip install .\n", encoding="utf-8"
    )
    result = run(tool("hadolint"), str(careless))
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # "latest" tag


def test_dockerfile_builds_a_slim_non_root_worker_image() -> None:
    instructions = dockerfile_instructions()
    arguments = {
        name: [args for instruction, args in instructions if instruction == name]
        for name in {instruction for instruction, _ in instructions}
    }
    base = dict(arg.split("=", 1) for arg in arguments["ARG"] if "=" in arg)["PYTHON_IMAGE"]
    assert re.fullmatch(r"python:3\.11[\w.-]*-slim[\w.-]*", base), "a pinned python:3.11 slim tag"
    assert len(arguments["FROM"]) >= 2, "multi-stage: build in one stage, copy into a slim one"
    assert dockerfile_uid() != 0
    assert arguments["ENTRYPOINT"] == ['["stream-dedup"]'] and arguments["CMD"] == ['["run"]']
    assert arguments["EXPOSE"] == [str(METRICS_PORT)]
    assert arguments["VOLUME"] == [f'["{SNAPSHOT_DIR}"]']
    environment = " ".join(arguments["ENV"])
    assert "STREAM_DEDUP_METRICS_HOST=0.0.0.0" in environment
    assert f"STREAM_DEDUP_SNAPSHOT_DIR={SNAPSHOT_DIR}" in environment
    installs = [args for args in arguments["RUN"] if "pip install" in args]
    assert installs and all(" -e " not in args and "--editable" not in args for args in installs)
    assert len(arguments["HEALTHCHECK"]) == 1 and "/healthz" in arguments["HEALTHCHECK"][0]


class _StatusHandler(http.server.BaseHTTPRequestHandler):
    """Answers every GET with ``status`` and records the paths asked (set per test)."""

    status: ClassVar[int] = 200
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        type(self).paths.append(self.path)
        self.send_response(type(self).status)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def health_server() -> Iterator[tuple[int, type[_StatusHandler]]]:
    handler = type("Handler", (_StatusHandler,), {"status": 200, "paths": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler
    finally:
        server.shutdown()
        server.server_close()


def healthcheck_command() -> list[str]:
    (healthcheck,) = [args for instruction, args in dockerfile_instructions() if instruction == "HEALTHCHECK"]
    command = json.loads(healthcheck.split(" CMD ", 1)[1])
    assert command[0] == "python"
    return [sys.executable, *command[1:]]


def test_healthcheck_passes_only_while_healthz_answers_200(health_server: tuple[int, Any]) -> None:
    port, handler = health_server
    environment = {**os.environ, "STREAM_DEDUP_METRICS_PORT": str(port)}
    healthy = subprocess.run(healthcheck_command(), env=environment, capture_output=True, timeout=30, check=False)
    assert healthy.returncode == 0, healthy.stderr
    assert handler.paths == ["/healthz"]
    handler.status = 503
    failing = subprocess.run(healthcheck_command(), env=environment, capture_output=True, timeout=30, check=False)
    assert failing.returncode != 0


def test_healthcheck_fails_when_nothing_listens() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago, closed again
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = {**os.environ, "STREAM_DEDUP_METRICS_PORT": str(port)}
    result = subprocess.run(healthcheck_command(), env=environment, capture_output=True, timeout=30, check=False)
    assert result.returncode != 0


def docker_build_context() -> list[str]:
    """Files Docker sends as the build context, after .dockerignore."""
    # The Docker SDK (a testcontainers dependency) implements .dockerignore's rules.
    require_module("docker")
    from docker.utils import build

    patterns = [
        line.strip()
        for line in (REPO_ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return sorted(path for path in build.exclude_paths(str(REPO_ROOT), patterns) if (REPO_ROOT / path).is_file())


def test_build_context_holds_the_package_and_no_local_state() -> None:
    context = docker_build_context()
    assert {"pyproject.toml", "README.md", "stream_dedup/__init__.py"} <= set(context)
    for prefix in (".venv/", ".cache/", ".git/", "tests/", "benchmarks/"):
        assert not [path for path in context if path.startswith(prefix)], f"{prefix} must not be sent to Docker"
    assert not [path for path in context if "__pycache__" in path]


@pytest.fixture(scope="module")
def image_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel the Dockerfile's builder stage installs, built from the same build context."""
    context = tmp_path_factory.mktemp("context")
    for path in docker_build_context():
        (context / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / path, context / path)
    wheels = tmp_path_factory.mktemp("wheels")
    assert_ok(
        run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(context))
    )
    (wheel,) = wheels.glob("*.whl")
    return wheel


def test_image_wheel_contains_every_package_file(image_wheel: Path) -> None:
    # Data files (e.g. the sample corpus of produce-sample) reach the image only if the
    # package declares them: a file left out works from the source tree and fails in Docker.
    with zipfile.ZipFile(image_wheel) as wheel:
        packaged = set(wheel.namelist())
        entry_points = wheel.read(next(n for n in packaged if n.endswith("entry_points.txt"))).decode()
    in_tree = {
        str(p.relative_to(REPO_ROOT))
        for p in (REPO_ROOT / "stream_dedup").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert not in_tree - packaged, "package files missing from the wheel"
    assert re.search(r"^stream-dedup = stream_dedup\.cli\.main:main$", entry_points, re.MULTILINE)


def test_image_entrypoint_offers_run_and_produce_sample(image_wheel: Path, tmp_path: Path) -> None:
    # ENTRYPOINT ["stream-dedup"] with CMD ["run"], and compose's producer runs
    # `stream-dedup produce-sample`: both commands must exist in the installed package.
    site = tmp_path / "site"
    assert_ok(
        run(sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site), str(image_wheel))
    )
    probe = (
        "import sys; sys.path.insert(0, sys.argv[1]); import stream_dedup; "
        "assert stream_dedup.__file__.startswith(sys.argv[1]), stream_dedup.__file__; "
        "from stream_dedup.cli.main import main; sys.exit(main(sys.argv[2:]))"
    )
    for command in ("run", "produce-sample"):
        result = run(sys.executable, "-c", probe, str(site), command, "--help")
        assert result.returncode == 0, f"stream-dedup {command} --help failed:\n{result.stderr}"
        assert "--bootstrap-servers" in result.stdout, f"stream-dedup {command} has no --bootstrap-servers"
