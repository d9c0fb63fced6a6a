"""The labels the dashboard's queries and the alert rules rely on, held to the series that carry them.

A label no series carries fails nothing in Prometheus: it groups everything into one series, prints
an empty legend or alert summary, or selects nothing (and a misspelt alternative of a regex
matcher selects less than it should). The queries still parse and still return series, so
promtool and the live tests, which ask only for "some series", pass. Here each label is checked
where it is used (tests/deploy/promql_labels.py works out which labels each part of a query
carries): grouped by, matched on, joined with group_left, selected, shown in a legend or an
alert's annotations; and each label value selected is one a process of the deployments exports.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import Counter, Gauge, Histogram

from stream_dedup.cli.settings_sources import resolve_settings
from stream_dedup.ops import runtime
from stream_dedup.ops.metrics import WorkerMetrics

from .deployfiles import COMPOSE, PROMETHEUS, pod_environment, require_module, statefulsets

yaml = require_module("yaml")

from . import promql  # noqa: E402  (after the PyYAML check: promql needs it)
from .promql_labels import (  # noqa: E402
    TARGET_LABELS,
    Call,
    LabelCatalogue,
    Selector,
    UnsupportedQueryError,
    label_uses,
    nodes,
    parse,
    result_labels,
    selectors,
)

# A regex matcher's value is checked when it is literal alternatives (all|shard); ".*" and the like are not.
_ALTERNATIVES = re.compile(r"[\w-]+(?:\|[\w-]+)*")
# Where the runbooks and docs quote PromQL: an aggregation by labels, a selector with matchers, a metric with the
# names of its labels (the docs' table: stream_dedup_role{role}), a dashboard row named for what to look at.
_QUOTED_AGGREGATION = re.compile(r"\b(?:sum|max|min|avg|count) by \([^)]*\) \(")
_QUOTED_SELECTOR = re.compile(r'\bstream_dedup_\w+\{[^}]*="[^}]*\}')
_QUOTED_LABEL_NAMES = re.compile(r"\b(stream_dedup_\w+)\{([\w,]+)\}")
_QUOTED_ROW = re.compile(r'dashboard row "([^"]+)"')
# Prose that groups a metric: "stream_dedup_consumer_lag_records by stage_role and shard".
_PROSE_GROUPING = re.compile(r"\b(stream_dedup_\w+) by (\w+)(?: and (\w+))?")
PROSE = [promql.REPO_ROOT / "README.md", *sorted((promql.REPO_ROOT / "docs").glob("*.md"))]


def metric_definitions() -> dict[str, tuple[str, set[str]]]:
    """Each series name the worker exposes: ``counter`` if it only grows (a counter's, a histogram's), else
    ``gauge``, and the labels its definition gives it."""
    definitions = {}
    for metric in vars(WorkerMetrics()).values():
        # _name and _labelnames: prometheus_client keeps a metric's definition only there.
        labels = set(getattr(metric, "_labelnames", ()))
        if isinstance(metric, Counter):
            definitions[metric._name + "_total"] = ("counter", labels)
        elif isinstance(metric, Histogram):
            definitions |= {metric._name + suffix: ("counter", labels) for suffix in ("_bucket", "_sum", "_count")}
        elif isinstance(metric, Gauge):
            definitions[metric._name] = ("gauge", labels)
    return definitions


def metric_labels() -> dict[str, set[str]]:
    """Each series name with its labels (``up``: those the scrape config adds to its targets)."""
    labels = {name: names for name, (_, names) in metric_definitions().items()}
    config = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text(encoding="utf-8"))
    labels["up"] = {
        label for job in config["scrape_configs"] for s in job["static_configs"] for label in s.get("labels", {})
    }
    return labels


def deployed_environments() -> Iterator[dict[str, str]]:
    """The ``STREAM_DEDUP_*`` variables of every process the deployment files start: each pod, each compose stage."""
    for directory, statefulset in statefulsets():
        for ordinal in range(statefulset["spec"]["replicas"]):
            yield pod_environment(directory, statefulset, ordinal)
    for service in yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))["services"].values():
        environment = service.get("environment", {})
        if "STREAM_DEDUP_GROUP_ID" in environment:
            yield {name: str(value) for name, value in environment.items()}


@pytest.fixture(scope="module")
def catalogue() -> Iterator[LabelCatalogue]:
    """The metrics' labels, and the values of those every deployed process exports from its start."""
    values: dict[tuple[str, str], set[str]] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runtime, "configure_logging", lambda *args: None)  # the test session's logging stays
        for environment in deployed_environments():
            settings = dataclasses.replace(resolve_settings({}, environment), metrics_port=0)
            with runtime.observed_worker(settings, "test") as events:
                for family in events.metrics.registry.collect():
                    for sample in family.samples:
                        for label, value in sample.labels.items():
                            values.setdefault((sample.name, label), set()).add(value)
    yield LabelCatalogue(metric_labels(), values)


def expressions() -> list[tuple[str, str]]:
    """(where, PromQL) of every dashboard query and every alert rule (whole, its terms joined)."""
    queries = [(query.name, query.expr) for query in promql.dashboard_queries()]
    return queries + [(f"alert {rule['alert']}", " ".join(rule["expr"].split())) for rule in promql.load_alert_rules()]


def dashboard_targets() -> Iterator[tuple[str, dict[str, Any], str]]:
    """(panel title, target, expression with Grafana's variables substituted) of every shown target."""
    dashboard = promql.load_dashboard()
    variables = promql.template_variable_names(dashboard)
    for panel in promql.iter_panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            if not target.get("hide"):
                yield panel["title"], target, promql.substitute_grafana_variables(target["expr"], variables)


def quoted_queries(text: str) -> list[str]:
    """The PromQL quoted in ``text``: each aggregation by labels (to its closing parenthesis), and each selector."""
    text = " ".join(text.split())
    queries = []
    for match in _QUOTED_AGGREGATION.finditer(text):
        depth = 0
        for end in range(match.end() - 1, len(text)):
            depth += {"(": 1, ")": -1}.get(text[end], 0)
            if depth == 0:
                queries.append(text[match.start() : end + 1])
                break
    return queries + [
        selector for selector in _QUOTED_SELECTOR.findall(text) if not any(selector in q for q in queries)
    ]


def runbooks_and_docs() -> list[tuple[str, str]]:
    """(where, text) of every alert's annotations and of each page of the docs."""
    annotations = [
        (f"alert {rule['alert']}", " ".join(rule["annotations"].values())) for rule in promql.load_alert_rules()
    ]
    return annotations + [(path.name, path.read_text(encoding="utf-8")) for path in PROSE]


def missing_labels(expr: str, catalogue: LabelCatalogue) -> list[str]:
    return [
        f"{use.label} ({use.where})" for use in label_uses(parse(expr), catalogue) if use.label not in use.available
    ]


def unexported_values(expr: str, catalogue: LabelCatalogue) -> list[str]:
    """The label values ``expr`` selects that no deployed process exports (labels whose values are known)."""
    unknown = []
    for selector in selectors(parse(expr)):
        for label, operator, value in selector.matchers:
            exported = catalogue.values.get((selector.metric, label))
            if exported is None or (operator in ("=~", "!~") and not _ALTERNATIVES.fullmatch(value)):
                continue
            alternatives = value.split("|") if operator in ("=~", "!~") else [value]
            unknown += [f'{selector.metric}{{{label}="{each}"}}' for each in alternatives if each not in exported]
    return unknown


@pytest.mark.parametrize(("where", "expr"), expressions(), ids=[where for where, _ in expressions()])
def test_every_label_a_query_groups_joins_or_selects_by_is_on_its_series(
    where: str, expr: str, catalogue: LabelCatalogue
) -> None:
    assert not missing_labels(expr, catalogue), f"{where}: labels its series do not carry: {expr}"


@pytest.mark.parametrize(("where", "expr"), expressions(), ids=[where for where, _ in expressions()])
def test_every_label_value_a_query_selects_is_one_a_deployed_process_exports(
    where: str, expr: str, catalogue: LabelCatalogue
) -> None:
    # verdict="duplicate", role="active", stage_role=~"all|shard": a misspelt value selects nothing, or less.
    assert not unexported_values(expr, catalogue), where


#: Functions of a counter's increase (rate() of a gauge is meaningless, and reads a drop as a reset), and of a gauge's.
_OF_COUNTERS = frozenset({"rate", "irate", "increase"})
_OF_GAUGES = frozenset({"deriv", "delta", "idelta"})


def misapplied_functions(expr: str) -> list[str]:
    """Each rate()/increase() of a gauge and deriv()/delta() of a counter in ``expr``."""
    kinds, wrong = {name: kind for name, (kind, _) in metric_definitions().items()}, []
    for call in (node for node in nodes(parse(expr)) if isinstance(node, Call)):
        wanted = "counter" if call.function in _OF_COUNTERS else "gauge" if call.function in _OF_GAUGES else None
        (argument,) = call.arguments if wanted else (None,)
        if wanted and not (isinstance(argument, Selector) and kinds.get(argument.metric) == wanted):
            wrong.append(f"{call.function}() of {getattr(argument, 'metric', argument)}, not of a {wanted}")
    return wrong


@pytest.mark.parametrize(("where", "expr"), expressions(), ids=[where for where, _ in expressions()])
def test_rates_are_of_counters_and_derivatives_of_gauges(where: str, expr: str) -> None:
    assert not misapplied_functions(expr), where


def test_a_rate_of_a_gauge_and_a_derivative_of_a_counter_are_named() -> None:
    expr = "rate(stream_dedup_consumer_lag_records[5m]) + deriv(stream_dedup_documents_total[5m])"
    assert misapplied_functions(expr) == [
        "rate() of stream_dedup_consumer_lag_records, not of a counter",
        "deriv() of stream_dedup_documents_total, not of a gauge",
    ]


def test_every_legend_names_a_label_its_query_returns(catalogue: LabelCatalogue) -> None:
    for title, target, expr in dashboard_targets():
        shown = set(re.findall(r"\{\{\s*(\w+)\s*\}\}", target.get("legendFormat", "")))
        assert shown <= result_labels(parse(expr), catalogue), f"{title!r} {target['refId']}: {target['legendFormat']}"


@pytest.mark.parametrize("rule", promql.load_alert_rules(), ids=lambda rule: rule["alert"])
def test_every_alert_annotation_names_a_label_its_expression_returns(
    rule: dict[str, Any], catalogue: LabelCatalogue
) -> None:
    returned = result_labels(parse(" ".join(rule["expr"].split())), catalogue)
    for name, text in rule["annotations"].items():
        assert set(re.findall(r"\$labels\.(\w+)", text)) <= returned, f"{name} names labels the alert has not"


@pytest.mark.parametrize(("where", "text"), runbooks_and_docs(), ids=[where for where, _ in runbooks_and_docs()])
def test_what_the_runbooks_and_docs_tell_an_operator_to_query_is_there(
    where: str, text: str, catalogue: LabelCatalogue
) -> None:
    # "stream_dedup_consumer_lag_records by stage_role and shard" sent the operator to a label the lag has not.
    for query in quoted_queries(text):
        assert not missing_labels(query, catalogue) and not unexported_values(query, catalogue), f"{where}: {query}"
    for metric, *grouping in _PROSE_GROUPING.findall(text.replace("`", "")):
        assert set(filter(None, grouping)) <= catalogue.of(metric), f"{where}: {metric} has no label {grouping}"
    for metric, names in _QUOTED_LABEL_NAMES.findall(text):
        assert set(names.split(",")) == catalogue.of(metric) - TARGET_LABELS, f"{where}: {metric}{{{names}}}"
    rows = {panel["title"] for panel in promql.iter_panels(promql.load_dashboard()["panels"]) if panel["type"] == "row"}
    assert set(_QUOTED_ROW.findall(" ".join(text.split()))) <= rows, f"{where} names a dashboard row there is not"


def test_queries_are_found_where_the_prose_quotes_them() -> None:
    text = """see which reason grows: sum by (reason) (rate(stream_dedup_dead_letters_total[5m])).
    Check stream_dedup_transactions_total{outcome="aborted"}; stream_dedup_role{role} is a table row."""
    assert quoted_queries(text) == [
        "sum by (reason) (rate(stream_dedup_dead_letters_total[5m]))",
        'stream_dedup_transactions_total{outcome="aborted"}',
    ]


@pytest.mark.parametrize(
    ("expr", "missing"),
    [
        # The lag has no stage_role: grouped by it, every role's lag is one series.
        ("sum by (stage_role) (stream_dedup_consumer_lag_records)", ["stage_role (sum by)"]),
        (
            'stream_dedup_consumer_lag_records{stage_role="shard"}',
            ["stage_role (matcher of stream_dedup_consumer_lag_records)"],
        ),
        (
            "stream_dedup_merge_wait_seconds * on (job, instance) group_left (shard) stream_dedup_role",
            ["shard (* group_left)"],
        ),
        (
            "sum(stream_dedup_role) and on (role) stream_dedup_stage_role",
            ["role (and on (left side))", "role (and on (right side))"],
        ),
        # Through a join, a histogram's le, and sum's grouping: all there.
        (
            "sum by (stage_role, shard) (stream_dedup_consumer_lag_records"
            " * on (job, instance) group_left (stage_role, shard) stream_dedup_stage_role)",
            [],
        ),
        ("histogram_quantile(0.9, sum by (le) (rate(stream_dedup_batch_duration_seconds_bucket[1m])))", []),
    ],
)
def test_a_label_the_series_do_not_carry_is_named(expr: str, missing: list[str], catalogue: LabelCatalogue) -> None:
    assert missing_labels(expr, catalogue) == missing


def test_a_value_no_process_exports_is_named_in_plain_and_regex_matchers(catalogue: LabelCatalogue) -> None:
    expr = 'stream_dedup_stage_role{stage_role=~"all|shards"} and stream_dedup_role{role="activ", job=~".*"}'
    assert unexported_values(expr, catalogue) == [
        'stream_dedup_stage_role{stage_role="shards"}',
        'stream_dedup_role{role="activ"}',
    ]


@pytest.mark.parametrize(
    ("expr", "labels"),
    [
        ("sum(stream_dedup_role)", set()),
        ("time() - stream_dedup_last_commit_timestamp_seconds > 60", {"job", "instance"}),
        ("sum by (job) (stream_dedup_role) + on (job) sum by (job, instance) (stream_dedup_role)", {"job"}),
        ("(sum by (job) (stream_dedup_role) or on () vector(0)) < 1", {"job"}),
        (
            "histogram_quantile(0.5, sum by (le, instance) (rate(stream_dedup_batch_documents_bucket[1m])))",
            {"instance"},
        ),
    ],
)
def test_the_labels_a_query_returns_follow_prometheus_rules(
    expr: str, labels: set[str], catalogue: LabelCatalogue
) -> None:
    assert result_labels(parse(expr), catalogue) == labels


@pytest.mark.parametrize(
    "expr", ["sum(stream_dedup_role) by (job)", 'label_replace(stream_dedup_role, "a", "$1", "role", "(.*)")', "2 ^ 3"]
)
def test_promql_outside_the_modelled_subset_is_refused_not_passed(expr: str) -> None:
    with pytest.raises(UnsupportedQueryError):
        result_labels(parse(expr), LabelCatalogue(metric_labels()))
