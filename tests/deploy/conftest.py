"""Fixtures shared by the deployment tests: the files as their own tools resolve them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .deployfiles import COMPOSE, assert_ok, docker_compose, require_module, run


@pytest.fixture(scope="session")
def compose_model() -> dict[str, Any]:
    """docker-compose.yml as Compose itself resolves it (anchors merged, defaults filled in)."""
    result = run(docker_compose(), "-f", str(COMPOSE), "config", "--format", "json")
    assert_ok(result)
    return json.loads(result.stdout)  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def dashboard() -> dict[str, Any]:
    """deploy/grafana/dashboards/stream-dedup.json."""
    require_module("yaml")  # promql needs it
    from . import promql

    return promql.load_dashboard()
