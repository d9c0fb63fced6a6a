"""Grafana: the dashboard's structure, variables and layout, and its provisioning as mounted
by docker-compose.yml. (Its queries are checked in test_prometheus.py.)"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .deployfiles import GRAFANA, require_module

yaml = require_module("yaml")

from . import promql  # noqa: E402  (after the PyYAML check: promql needs it)


def test_dashboard_panels_have_unique_ids_and_queries(dashboard: dict[str, Any]) -> None:
    panels = list(promql.iter_panels(dashboard["panels"]))
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in panels:
        if panel["type"] == "row":
            continue
        targets = panel.get("targets", [])
        assert targets, f"panel {panel['title']!r} has no query"
        assert all(target.get("expr", "").strip() for target in targets), f"panel {panel['title']!r}: empty expr"
        ref_ids = [target["refId"] for target in targets]
        assert len(ref_ids) == len(set(ref_ids)), f"panel {panel['title']!r}: duplicate refId"


def test_dashboard_datasources_resolve_to_its_prometheus_variable(dashboard: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    expected = {"type": "prometheus", "uid": "${datasource}"}
    for panel in promql.iter_panels(dashboard["panels"]):
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == expected, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == expected, panel["title"]
    for name in ("job", "instance"):
        assert variables[name]["datasource"] == expected
        assert variables[name]["allValue"] == ".*"


def test_dashboard_queries_use_only_defined_variables(dashboard: dict[str, Any]) -> None:
    for query in promql.dashboard_queries():  # raises on an undefined variable
        assert "$" not in query.expr, query.name
    for panel in promql.iter_panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            # Template variables hold regexes ("All" is .*): they belong in =~ matchers only.
            for match in re.finditer(r"\$\{?(job|instance)\b", target["expr"]):
                assert target["expr"][: match.start()].endswith('=~"'), f"{panel['title']}: ${match.group(1)}"


def test_dashboard_joins_match_series_of_one_job(dashboard: dict[str, Any]) -> None:
    # With "All" jobs picked, an instance can be in two jobs: a pod scraped by its ServiceMonitor and by
    # the prometheus.io/scrape annotations, or two stages sharing host names. Matched on the instance
    # alone, one side finds two series: Prometheus refuses (many-to-many), and the panel shows nothing.
    for query in promql.dashboard_queries():
        for labels in re.findall(r"\bon\s*\(([^)]*)\)", query.expr):
            names = {label.strip() for label in labels.split(",")}
            if "instance" in names:
                assert "job" in names, f"{query.name}: ({labels}) without job"


def test_dashboard_layout_has_no_overlapping_panels(dashboard: dict[str, Any]) -> None:
    occupied: dict[tuple[int, int], str] = {}
    for panel in dashboard["panels"]:
        pos = panel["gridPos"]
        assert pos["x"] >= 0 and pos["x"] + pos["w"] <= 24, panel["title"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in occupied, f"{panel['title']!r} overlaps {occupied[(x, y)]!r}"
                occupied[(x, y)] = panel["title"]


def test_dashboard_metadata(dashboard: dict[str, Any]) -> None:
    assert dashboard["uid"] == "stream-dedup"
    assert dashboard["schemaVersion"] >= 36
    assert dashboard["id"] is None, "a provisioned dashboard must not carry a database id"


def test_grafana_provisioning_matches_compose(compose_model: dict[str, Any]) -> None:
    datasources = yaml.safe_load((GRAFANA / "provisioning/datasources/prometheus.yml").read_text(encoding="utf-8"))
    providers = yaml.safe_load((GRAFANA / "provisioning/dashboards/dashboards.yml").read_text(encoding="utf-8"))
    assert datasources["apiVersion"] == 1 and providers["apiVersion"] == 1
    (datasource,) = datasources["datasources"]
    assert datasource["type"] == "prometheus"
    assert datasource["url"] == "http://prometheus:9090"
    assert "prometheus" in compose_model["services"]

    grafana = compose_model["services"]["grafana"]
    mounts = {
        Path(volume["source"]).resolve(): volume["target"] for volume in grafana["volumes"] if volume["type"] == "bind"
    }
    (provider,) = providers["providers"]
    assert mounts[(GRAFANA / "dashboards").resolve()] == provider["options"]["path"]
    assert mounts[(GRAFANA / "provisioning").resolve()] == "/etc/grafana/provisioning"
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/{promql.DASHBOARD.name}"
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ENABLED"] == "true"
    assert grafana["environment"]["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
