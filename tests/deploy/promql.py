"""The PromQL of the Grafana dashboard and of the alert rules, ready to send to a Prometheus.

A dashboard panel or an alert on a metric that the worker does not export never shows
anything and never fires, and no syntax check notices. This module lists every expression
so that a test can evaluate them against a Prometheus scraping a real worker and require
series back:

- :func:`dashboard_queries`: every panel target's ``expr``, with Grafana's variables
  substituted (``$__rate_interval`` → ``1m``, ``$job``/``$instance`` → ``.*``).
- :func:`alert_signal_queries`: every alert's signals. Alert expressions are written as
  ``<signal> <comparison> <number>`` or such terms joined by ``and``; a signal is one term
  with its comparison stripped, so it returns series whether or not the alert would fire.
- :func:`prometheus_config`: a Prometheus configuration that scrapes given targets as job
  ``stream-dedup`` (or another) and loads ``deploy/prometheus/alerts.yml``, for a local Prometheus.

Example::

    from tests.deploy.promql import all_queries, prometheus_config

    (tmp / "prometheus.yml").write_text(prometheus_config(["127.0.0.1:9400"]))
    for query in all_queries():
        result = prometheus_instant_query(query.expr)   # your HTTP call
        assert result, f"{query.name} returned no series: {query.expr}"

Needs PyYAML (installed by ``scripts/validate-deploy.sh``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "dashboards" / "stream-dedup.json"
ALERTS = REPO_ROOT / "deploy" / "prometheus" / "alerts.yml"
PROMETHEUS_CONFIG = REPO_ROOT / "deploy" / "prometheus" / "prometheus.yml"

#: The job of the single-process stage (docker-compose.yml, deploy/kubernetes/servicemonitor.yaml).
JOB = "stream-dedup"
#: The job of a sharded stage's roles (docker-compose.yml's profile "sharded",
#: deploy/kubernetes/sharded/servicemonitor.yaml). The alert rules select neither but add up by job;
#: StreamDedupDown, on ``up``, watches these two.
SHARDED_JOB = "stream-dedup-sharded"

#: Grafana's built-in interval variables and the value each gets outside Grafana.
#: 1m holds at least 4 scrapes at the 10-15 s intervals used here, enough for rate().
INTERVAL_VARIABLES: Mapping[str, str] = {
    "__rate_interval": "1m",
    "__interval": "1m",
    "__range": "5m",
    "__range_s": "300",
    "__range_ms": "300000",
    "__interval_ms": "60000",
}

# $name, ${name}, ${name:format} and the deprecated [[name]] / [[name:format]].
_VARIABLE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)(?::[^\]]*)?\]\]")

_COMPARISONS = ("==", "!=", ">=", "<=", ">", "<")
# A trailing `<comparison> [bool] <number>` at the very end of a term.
_TRAILING_COMPARISON = re.compile(
    r"\s*(==|!=|>=|<=|>|<)\s*(?:bool\s+)?([-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*\Z"
)
_MODIFIER = re.compile(r"\s*(?:on|ignoring)\s*\([^)]*\)", re.IGNORECASE)
_IDENTIFIER_CHAR = re.compile(r"[A-Za-z0-9_:]")


@dataclass(frozen=True)
class Query:
    """One PromQL expression to evaluate.

    origin: ``"dashboard"`` or ``"alert"``.
    name: where it comes from, e.g. ``panel 12 "Consumer lag" B`` or
        ``alert StreamDedupLagRising signal 2/2``.
    expr: the expression, variables substituted, comparisons stripped for alert signals.
    """

    origin: str
    name: str
    expr: str


@dataclass(frozen=True)
class AlertTerm:
    """One ``<signal> <comparison> <threshold>`` term of an alert expression."""

    signal: str
    comparison: str
    threshold: float


def substitute_grafana_variables(expr: str, variables: Iterable[str] = ()) -> str:
    """Replace Grafana variables in ``expr`` by values Prometheus accepts.

    Interval variables (``$__rate_interval``...) get :data:`INTERVAL_VARIABLES`; each
    template variable named in ``variables`` becomes ``.*``, i.e. "All" (template variables
    are used only inside ``=~"..."`` matchers). Any other variable raises ``ValueError``
    naming it, so an undefined variable in a panel is caught rather than sent as is.
    """
    known = set(variables)

    def replace(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2) or match.group(3)
        if name in INTERVAL_VARIABLES:
            return INTERVAL_VARIABLES[name]
        if name in known:
            return ".*"
        raise ValueError(f"unknown Grafana variable ${name} in expression: {expr}")

    return _VARIABLE.sub(replace, expr)


def load_dashboard(path: Path = DASHBOARD) -> dict[str, Any]:
    """The dashboard JSON as a dict."""
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def iter_panels(panels: Iterable[dict[str, Any]]) -> Iterable[dict[str, Any]]:
    """Every panel, including those nested in collapsed rows, rows themselves included."""
    for panel in panels:
        yield panel
        yield from iter_panels(panel.get("panels", []))


def template_variable_names(dashboard: Mapping[str, Any]) -> list[str]:
    """Names of the dashboard's template variables (``datasource``, ``job``, ``instance``)."""
    return [variable["name"] for variable in dashboard.get("templating", {}).get("list", [])]


def dashboard_queries(path: Path = DASHBOARD) -> list[Query]:
    """Every panel target's expression, with Grafana variables substituted."""
    dashboard = load_dashboard(path)
    variables = template_variable_names(dashboard)
    queries = []
    for panel in iter_panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            if target.get("hide"):
                continue
            queries.append(
                Query(
                    origin="dashboard",
                    name=f'panel {panel["id"]} "{panel.get("title", "")}" {target.get("refId", "")}'.rstrip(),
                    expr=substitute_grafana_variables(target["expr"], variables),
                )
            )
    return queries


def load_alert_rules(path: Path = ALERTS) -> list[dict[str, Any]]:
    """Every alerting rule (dicts as in the YAML: alert, expr, for, labels, annotations)."""
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    return [rule for group in document["groups"] for rule in group["rules"] if "alert" in rule]


def _top_level_and_positions(expr: str) -> list[tuple[int, int]]:
    """(start, end) of each ``and`` operator outside parentheses, braces, brackets and strings."""
    positions = []
    depth = 0
    quote: str | None = None
    i = 0
    while i < len(expr):
        char = expr[i]
        if quote:
            if char == "\\":
                i += 2
                continue
            if char == quote:
                quote = None
        elif char in "\"'`":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        elif (
            depth == 0
            and expr[i : i + 3].lower() == "and"
            and (i == 0 or not _IDENTIFIER_CHAR.match(expr[i - 1]))
            and (i + 3 == len(expr) or not _IDENTIFIER_CHAR.match(expr[i + 3]))
        ):
            end = i + 3
            modifier = _MODIFIER.match(expr, end)
            if modifier:
                end = modifier.end()
            positions.append((i, end))
            i = end
            continue
        i += 1
    if depth != 0 or quote:
        raise ValueError(f"unbalanced brackets or quotes in expression: {expr}")
    return positions


def split_alert_expression(expr: str) -> list[AlertTerm]:
    """Split an alert expression into its ``<signal> <comparison> <number>`` terms.

    Terms are joined by top-level ``and`` (with or without ``on (...)``/``ignoring (...)``).
    Raises ``ValueError`` if a term does not end with a comparison against a number: such
    an expression cannot be checked signal by signal.
    """
    terms = []
    start = 0
    bounds = [*_top_level_and_positions(expr), (len(expr), len(expr))]
    for and_start, and_end in bounds:
        text = expr[start:and_start].strip()
        start = and_end
        match = _TRAILING_COMPARISON.search(text)
        if not match:
            raise ValueError(f"alert term is not '<signal> <comparison> <number>': {text!r} in {expr!r}")
        signal = _strip_outer_parentheses(text[: match.start()].strip())
        if not signal:
            raise ValueError(f"alert term has an empty signal: {text!r} in {expr!r}")
        terms.append(AlertTerm(signal=signal, comparison=match.group(1), threshold=float(match.group(2))))
    return terms


def _strip_outer_parentheses(text: str) -> str:
    """``(a or b)`` → ``a or b``, only when the outer parentheses enclose the whole text."""
    while text.startswith("(") and text.endswith(")"):
        depth = 0
        for i, char in enumerate(text):
            depth += char == "("
            depth -= char == ")"
            if depth == 0 and i < len(text) - 1:
                return text
        text = text[1:-1].strip()
    return text


def alert_signal_queries(path: Path = ALERTS) -> list[Query]:
    """Every alert's signals: its terms with the comparisons stripped."""
    queries = []
    for rule in load_alert_rules(path):
        terms = split_alert_expression(" ".join(str(rule["expr"]).split()))
        for number, term in enumerate(terms, start=1):
            queries.append(
                Query(origin="alert", name=f"alert {rule['alert']} signal {number}/{len(terms)}", expr=term.signal)
            )
    return queries


def all_queries() -> list[Query]:
    """:func:`dashboard_queries` followed by :func:`alert_signal_queries`."""
    return dashboard_queries() + alert_signal_queries()


def prometheus_config(
    targets: Iterable[str],
    scrape_interval: str = "1s",
    evaluation_interval: str | None = None,
    rule_file: Path = ALERTS,
    job: str = JOB,
) -> str:
    """A Prometheus configuration (YAML text) scraping ``targets`` as ``job`` (default ``stream-dedup``).

    The alert rules are loaded from ``rule_file`` by absolute path, so the file can be
    written anywhere. Scrape and evaluation intervals default to 1 s: a short test gets
    enough samples for the 1 m rate() windows within seconds.
    """
    config = {
        "global": {
            "scrape_interval": scrape_interval,
            "evaluation_interval": evaluation_interval or scrape_interval,
        },
        "rule_files": [str(Path(rule_file).resolve())],
        "scrape_configs": [
            {"job_name": job, "metrics_path": "/metrics", "static_configs": [{"targets": list(targets)}]}
        ],
    }
    return yaml.safe_dump(config, sort_keys=False)
