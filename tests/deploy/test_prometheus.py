"""Prometheus: the alert rules and the scrape config, checked and unit-tested with promtool,
and every query of the dashboard and the alerts held to the metrics the worker exports."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from stream_dedup.ops.metrics import WorkerMetrics

from .deployfiles import (
    COMPOSE,
    METRICS_PORT,
    PROMETHEUS,
    assert_ok,
    compose_workers,
    docker_compose,
    require_module,
    run,
    tool,
)

yaml = require_module("yaml")

from . import promql  # noqa: E402  (after the PyYAML check: promql needs it)

ALERTS_TEST = Path(__file__).with_name("alerts_test.yml")


def alert_rules_without_annotations(directory: Path) -> Path:
    """A copy of alerts.yml without annotations: promtool's unit tests compare them verbatim."""
    rules = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text(encoding="utf-8"))
    for group in rules["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    path = directory / "alerts.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    return path


def test_alert_rules_pass_promtool_check() -> None:
    assert_ok(run(tool("promtool"), "check", "rules", str(PROMETHEUS / "alerts.yml")))


def test_prometheus_config_and_its_rule_files_pass_promtool_check() -> None:
    assert_ok(run(tool("promtool"), "check", "config", str(PROMETHEUS / "prometheus.yml")))


def test_promtool_rejects_a_broken_rule_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text(
        "groups:\n  - name: g\n    rules:\n      - alert: Broken\n        expr: sum(rate(x[5m]) > 0\n",
        encoding="utf-8",
    )
    result = run(tool("promtool"), "check", "rules", str(broken))
    assert result.returncode != 0


def test_alerts_fire_when_and_only_when_their_unit_tests_say(tmp_path: Path) -> None:
    promtool = tool("promtool")
    alert_rules_without_annotations(tmp_path)
    shutil.copy(ALERTS_TEST, tmp_path / ALERTS_TEST.name)
    assert_ok(run(promtool, "test", "rules", ALERTS_TEST.name, cwd=tmp_path))


def test_the_runbook_of_a_hanging_transaction_names_the_alert_its_unit_test_raises() -> None:
    """docs/operating.md said a hanging transaction raises StreamDedupNoProgress; measured, the replica waits
    as ``restoring`` with no lag series, which raises StreamDedupNoActive and leaves NoProgress silent."""
    tests = yaml.safe_load(ALERTS_TEST.read_text(encoding="utf-8"))["tests"]
    (hanging,) = [test for test in tests if test["name"].startswith("a hanging transaction")]
    raised = {check["alertname"] for check in hanging["alert_rule_test"] if check["exp_alerts"]}
    silent = {check["alertname"] for check in hanging["alert_rule_test"] if not check["exp_alerts"]}
    operating = (promql.REPO_ROOT / "docs" / "operating.md").read_text(encoding="utf-8")
    section = " ".join(operating.split("### A hanging transaction")[1].split("\n### ")[0].split())
    said_to_fire = set(re.findall(r"`(StreamDedup\w+)` fires", section))
    assert raised and said_to_fire == raised, f"the section says {said_to_fire} fire, the unit test {raised}"
    runbooks = {rule["alert"]: rule["annotations"]["runbook"] for rule in promql.load_alert_rules()}
    assert all("hanging transaction" in runbooks[alert] for alert in raised)
    assert not said_to_fire & silent


def test_alert_unit_tests_catch_a_changed_threshold(tmp_path: Path) -> None:
    promtool = tool("promtool")
    rules = alert_rules_without_annotations(tmp_path)
    rules.write_text(rules.read_text(encoding="utf-8").replace("> 0.01", "> 0.1"), encoding="utf-8")
    shutil.copy(ALERTS_TEST, tmp_path / ALERTS_TEST.name)
    result = run(promtool, "test", "rules", ALERTS_TEST.name, cwd=tmp_path)
    assert result.returncode != 0
    assert "StreamDedupDeadLetterRate" in result.stdout + result.stderr


def test_every_dashboard_query_and_alert_signal_parses_as_promql(tmp_path: Path) -> None:
    # Each expression becomes a recording rule: promtool parses it with Prometheus' own parser.
    rules = [
        {"record": f"check:query_{number}", "expr": query.expr}
        for number, query in enumerate(promql.all_queries(), start=1)
    ]
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "queries", "rules": rules}]}), encoding="utf-8")
    assert_ok(run(tool("promtool"), "check", "rules", str(path)))


# ------------------------------------------------------------------- Prometheus: contents


@pytest.mark.parametrize("rule", promql.load_alert_rules(), ids=lambda rule: rule["alert"])
def test_alert_has_duration_severity_and_a_runbook(rule: dict[str, Any]) -> None:
    assert re.fullmatch(r"\d+[smh]", str(rule.get("for", ""))), "every alert waits a `for` duration"
    assert rule["labels"]["severity"] in {"critical", "warning"}
    for annotation in ("summary", "description", "runbook"):
        assert str(rule["annotations"].get(annotation, "")).strip(), f"missing annotation {annotation}"


@pytest.mark.parametrize("rule", promql.load_alert_rules(), ids=lambda rule: rule["alert"])
def test_alert_expression_is_signals_compared_with_numbers(rule: dict[str, Any]) -> None:
    terms = promql.split_alert_expression(" ".join(str(rule["expr"]).split()))
    assert terms
    for term in terms:
        assert "stream_dedup_" in term.signal or term.signal.startswith("up{")


def test_required_alerts_exist() -> None:
    names = {rule["alert"] for rule in promql.load_alert_rules()}
    assert {
        "StreamDedupDown",
        "StreamDedupLagRising",
        "StreamDedupDeadLetterRate",
        "StreamDedupSnapshotStale",
        "StreamDedupNoProgress",
        "StreamDedupNoStandby",
        "StreamDedupNoActive",
        "StreamDedupTransactionAborts",
        "StreamDedupShardLagging",
    } <= names


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        ('up{job="x"} == 0', [('up{job="x"}', "==", 0.0)]),
        ("(sum(a) or vector(0)) < 1", [("sum(a) or vector(0)", "<", 1.0)]),
        (
            'time() - a{b="and"} > 3600 and on (instance) c{role="active"} == 1',
            [('time() - a{b="and"}', ">", 3600.0), ('c{role="active"}', "==", 1.0)],
        ),
        (
            "sum(band_x) > 1e4 and sum(deriv(band_x[10m])) > 0",
            [("sum(band_x)", ">", 1e4), ("sum(deriv(band_x[10m]))", ">", 0.0)],
        ),
        ("a / (b + c) > 0.01", [("a / (b + c)", ">", 0.01)]),
    ],
)
def test_alert_expressions_split_into_signals(expr: str, expected: list[tuple[str, str, float]]) -> None:
    terms = promql.split_alert_expression(expr)
    assert [(t.signal, t.comparison, t.threshold) for t in terms] == expected


@pytest.mark.parametrize("expr", ["rate(x[5m])", "a > b", "sum(a > 1)"])
def test_alert_expression_without_a_final_numeric_comparison_is_refused(expr: str) -> None:
    with pytest.raises(ValueError, match="signal"):
        promql.split_alert_expression(expr)


def exported_metric_names() -> set[str]:
    """Every series name the worker's metrics registry can expose, whether set yet or not."""
    names = set()
    for family in WorkerMetrics().registry.collect():
        if family.type == "counter":
            names.add(family.name + "_total")
        elif family.type == "histogram":
            names.update(family.name + suffix for suffix in ("_bucket", "_sum", "_count"))
        else:
            names.add(family.name)
    return names


def referenced_metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\bstream_dedup_[a-z_]+\b", expr))


def test_dashboard_and_alerts_use_only_metrics_the_worker_exports() -> None:
    exported = exported_metric_names()
    for query in promql.all_queries():
        unknown = referenced_metric_names(query.expr) - exported
        assert not unknown, f"{query.name} uses {sorted(unknown)}, which the worker does not export"


def test_dashboard_shows_every_metric_the_worker_exports() -> None:
    shown = set().union(*(referenced_metric_names(q.expr) for q in promql.dashboard_queries()))
    # A histogram is shown through its _bucket or its _sum/_count series.
    shown_families = {re.sub(r"_(bucket|sum|count)$", "", name) for name in shown}
    exported_families = {re.sub(r"_(bucket|sum|count)$", "", name) for name in exported_metric_names()}
    assert not exported_families - shown_families, "metrics without a dashboard panel"


def test_prometheus_config_scrapes_both_compose_workers(compose_model: dict[str, Any]) -> None:
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text(encoding="utf-8"))
    (job,) = [job for job in config["scrape_configs"] if job["job_name"] == promql.JOB]
    targets = {target for static in job["static_configs"] for target in static["targets"]}
    workers = compose_workers(compose_model).values()
    assert len(workers) == 2
    assert targets == {f"{worker['hostname']}:{METRICS_PORT}" for worker in workers}
    assert config["rule_files"] == ["alerts.yml"]


def test_prometheus_config_scrapes_every_role_of_the_sharded_profile_as_the_sharded_job() -> None:
    result = run(docker_compose(), "-f", str(COMPOSE), "--profile", "sharded", "config", "--format", "json")
    assert_ok(result)
    services = json.loads(result.stdout)["services"]
    roles = [service for service in services.values() if "sharded" in service.get("profiles", [])]
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text(encoding="utf-8"))
    (job,) = [job for job in config["scrape_configs"] if job["job_name"] == promql.SHARDED_JOB]
    targets = {target for static in job["static_configs"] for target in static["targets"]}
    assert len(roles) == 4
    assert targets == {f"{role['hostname']}:{METRICS_PORT}" for role in roles}
    # Down whenever the profile is off: StreamDedupDown skips the targets so labelled.
    assert all(static["labels"] == {"compose_profile": "sharded"} for static in job["static_configs"])


def test_only_the_down_alert_selects_a_job_and_it_watches_both_stages() -> None:
    # A job selector is a deployment's name: a rule with one watches nothing of a stage scraped under
    # another (the sharded stage's roles, under docker-compose's job or the ServiceMonitor's).
    for rule in promql.load_alert_rules():
        selectors = re.findall(r"\bjob\s*(=~|=|!=|!~)\s*\"([^\"]*)\"", str(rule["expr"]))
        if rule["alert"] == "StreamDedupDown":
            assert selectors == [("=~", f"{promql.JOB}|{promql.SHARDED_JOB}")]
            assert 'compose_profile=""' in rule["expr"]
        else:
            assert not selectors, f"{rule['alert']} selects {selectors}"


@pytest.mark.parametrize("rule", promql.load_alert_rules(), ids=lambda rule: rule["alert"])
def test_alerts_that_add_up_series_keep_each_stage_apart(rule: dict[str, Any]) -> None:
    # sum() over every job would let the single stage's progress hide a stuck sharded one (and the reverse).
    for grouping in re.findall(r"\b(?:sum|max|min|avg|count)\b\s*(by\s*\([^)]*\))?\s*\(", str(rule["expr"])):
        assert re.fullmatch(r"by\s*\((?:.*,\s*)?job(?:\s*,.*)?\)", grouping), f"{rule['alert']}: {grouping or 'no by'}"


def test_prometheus_config_helper_loads_the_alert_rules(tmp_path: Path) -> None:
    path = tmp_path / "prometheus.yml"
    path.write_text(promql.prometheus_config(["127.0.0.1:9400"]), encoding="utf-8")
    assert_ok(run(tool("promtool"), "check", "config", str(path)))
