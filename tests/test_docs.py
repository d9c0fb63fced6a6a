"""The docs say what the code does: settings, defaults, metrics, alerts, panels, modules, examples; links resolve.

Each of these drifts, since it comes from code; a reader who copies an
example or looks a name up must find what the page says.
"""

import contextlib
import json
import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest

from stream_dedup.cli.settings_sources import setting_types
from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector, snapshot
from stream_dedup.engine.snapshot import load_snapshot, save_snapshot
from stream_dedup.errors import IncompatibleSnapshotError
from stream_dedup.kafka import answers, changelog
from stream_dedup.ops.metrics import WorkerMetrics
from stream_dedup.worker.settings import WorkerSettings

ROOT = Path(__file__).resolve().parents[1]
SETTINGS_PAGE = (ROOT / "docs" / "kafka-stage.md").read_text()
OPERATING_PAGE = (ROOT / "docs" / "operating.md").read_text()
CODE_MAP_PAGE = (ROOT / "docs" / "how-it-works.md").read_text()
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SAMPLE = ROOT / "stream_dedup" / "samples" / "listings.jsonl"
#: How a settings table writes a default that is no literal of the setting's value.
_WORDS = {"on": True, "off": None, "none": None, "—": None, "chosen": None}


def test_every_setting_is_documented() -> None:
    missing = [name for name in setting_types() if f"`{name}`" not in SETTINGS_PAGE]
    assert not missing, f"settings missing from docs/kafka-stage.md: {missing}"


def _table_rows(page: str, header: str) -> list[list[str]]:
    """The cells of each row of the table whose header row starts with ``header``."""
    lines = page.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def _code_defaults() -> dict[str, Any]:
    defaults = {f.name: f.default for f in fields(DetectionConfig)}
    defaults.update({f.name: f.default for f in fields(WorkerSettings) if f.name != "detection"})
    return defaults


def _documented_default(cell: str) -> tuple[bool, Any]:
    """(True, the value) for a cell holding one literal (`32`, 0.8, `oph` (why), off); (False, None) for prose."""
    cell = re.sub(r" \([^)]*\)$", "", cell)  # "`33554432` (32 MiB)"
    if cell in _WORDS:
        return True, _WORDS[cell]
    literal = re.fullmatch(r"`([^`]*)`|([0-9.]+)", cell)
    if not literal:
        return False, None
    text = literal.group(1) if literal.group(1) is not None else literal.group(2)
    if "GROUP_ID" in text:  # made from group_id at start-up: checked below
        return False, None
    with contextlib.suppress(ValueError):
        return True, float(text)
    return True, text


def test_every_documented_default_is_the_codes() -> None:
    defaults = _code_defaults()
    rows = _table_rows(SETTINGS_PAGE, "| setting | default |") + _table_rows(SETTINGS_PAGE, "| setting (flag) |")
    wrong = []
    for cells in rows:
        literal, documented = _documented_default(cells[1])
        for name in re.findall(r"`([a-z_]+)`", cells[0].split("(")[0]):
            actual = defaults[name]
            if documented is None and actual is False:  # "off" for a switch
                actual = None
            if literal and documented != actual:
                wrong.append(f"{name}: docs {cells[1]!r}, code {actual!r}")
    settings = WorkerSettings(group_id="G")
    for topic in ("changelog", "sequenced", "answers"):
        if f"| `{topic}_topic` | `GROUP_ID.{topic}` |" not in SETTINGS_PAGE:
            wrong.append(f"{topic}_topic: docs do not say GROUP_ID.{topic}")
        assert getattr(settings, f"{topic}_topic") == f"G.{topic}"
    assert not wrong, f"defaults in docs/kafka-stage.md that are not the code's: {wrong}"


def test_every_metric_is_documented() -> None:
    names = {metric.name for metric in WorkerMetrics().registry.collect()}
    # prometheus_client names counters without their _total suffix: a prefix match covers both.
    missing = [name for name in names if f"`{name}" not in OPERATING_PAGE]
    assert not missing, f"metrics missing from docs/operating.md: {missing}"


def test_every_metric_the_docs_name_exists() -> None:
    names = {metric.name for metric in WorkerMetrics().registry.collect()}
    named = {name for page in PAGES for name in re.findall(r"\bstream_dedup_[a-z_]+", page.read_text())}
    unknown = sorted(name for name in named if name.removesuffix("_total") not in names)
    assert not unknown, f"metrics the docs name that the code does not export: {unknown}"


def test_every_alert_is_in_the_runbook_and_every_runbook_row_is_an_alert() -> None:
    rules = set(re.findall(r"- alert: (\w+)", (ROOT / "deploy" / "prometheus" / "alerts.yml").read_text()))
    runbook = {re.sub(r"`", "", cells[0]) for cells in _table_rows(OPERATING_PAGE, "| alert | means |")}
    assert rules == runbook, f"only in alerts.yml: {rules - runbook}; only in the runbook: {runbook - rules}"


def test_every_dashboard_panel_the_docs_name_exists() -> None:
    dashboard = (ROOT / "deploy" / "grafana" / "dashboards" / "stream-dedup.json").read_text()
    titles = set(re.findall(r'"title": "([^"]*)"', dashboard))
    named = {
        title
        for page in PAGES
        for title in re.findall(r'(?:panel|row) "([^"]+)"', re.sub(r"\s+", " ", page.read_text()))
    }
    missing = sorted(named - titles)
    assert not missing, f"dashboard panels or rows the docs name that the dashboard lacks: {missing}"


def test_every_module_is_in_the_code_map() -> None:
    rows = {cells[0].strip("`"): cells[2] for cells in _table_rows(CODE_MAP_PAGE, "| layer |")}
    package = ROOT / "stream_dedup"
    layers = {path.name for path in package.iterdir() if (path / "__init__.py").exists()}
    assert layers == set(rows), f"layers: in the package {sorted(layers)}, in the code map {sorted(rows)}"
    missing = [
        f"{layer}/{module.stem}"
        for layer in sorted(layers)
        for module in sorted((package / layer).glob("*.py"))
        if module.stem != "__init__" and f"`{module.stem}`" not in rows[layer]
    ]
    code_map = CODE_MAP_PAGE.split("## Code map")[1].split("\n## ")[0]
    missing += [
        module.name
        for module in sorted(package.glob("*.py"))
        if module.stem != "__init__" and f"`{module.stem}`" not in code_map
    ]
    assert not missing, f"modules missing from the code map in docs/how-it-works.md: {missing}"


def _python_blocks(page: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", page.read_text(), re.S)


@pytest.mark.parametrize("page", ["README.md", "docs/kafka-stage.md"])
def test_the_library_examples_run(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the snapshot example writes a file
    for block in _python_blocks(ROOT / page):
        exec(compile(block, page, "exec"), {})


def test_the_readme_example_gives_the_verdicts_it_says_the_sketch_then_the_texts() -> None:
    block = _python_blocks(ROOT / "README.md")[0]
    by_sketch = block.split("# Pairs too near the threshold")[0]
    said = [float(number) for number in re.findall(r"# b: duplicate of a, similarity ([0-9.]+)", block)]
    found = []
    for code in (by_sketch, block):
        scope: dict[str, Any] = {}
        exec(compile(code, "README.md", "exec"), scope)
        found.append(scope["verdicts"][1])
    assert [(v.verdict, v.duplicate_of) for v in found] == [("duplicate", "a")] * 2
    assert said == [v.similarity for v in found], f"the README says {said}, the detector gives {found}"
    assert found[1].match_source == 1, "the pair is settled by the texts the spool holds"


def _dedup_sample(*flags: str) -> set[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "stream_dedup.cli.main", "dedup", str(SAMPLE), *flags]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=True)
    return set(done.stdout.splitlines())


def test_the_offline_output_examples_are_lines_dedup_writes_for_the_sample() -> None:
    shown = [
        line
        for page in ("kafka-stage.md", "verdicts.md")
        for block in re.findall(r"```json\n(.*?)```", (ROOT / "docs" / page).read_text(), re.S)
        for line in block.splitlines()
        if '"line":' in line
    ]
    assert len(shown) == 3
    written = _dedup_sample() | _dedup_sample("--containment-threshold", "0.8")
    for line in shown:
        json.loads(line)
        assert line in written, f"no line of dedup over the sample corpus reads {line}"


def _anchors(page: Path) -> set[str]:
    """GitHub's anchor of each heading of ``page`` (lower case, punctuation dropped, spaces to hyphens)."""
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    headings = re.findall(r"^#+ (.*)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_every_link_between_the_readme_and_the_docs_resolves() -> None:
    broken = []
    for page in [*PAGES, ROOT / "benchmarks" / "README.md"]:
        for target, anchor in re.findall(r"\]\(([^)#:]*)(?:#([^)]*))?\)", page.read_text()):
            destination = page.parent / target if target else page
            if not destination.exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
            elif anchor and destination.suffix == ".md" and anchor not in _anchors(destination):
                broken.append(f"{page.relative_to(ROOT)} -> {target}#{anchor}")
    assert not broken, f"links to missing files or headings: {broken}"


def _upgrading_section() -> str:
    """operating.md's section on upgrades, its lines joined (a phrase may wrap anywhere)."""
    section = OPERATING_PAGE.split("## Upgrading and rolling back", 1)[1].split("\n## ", 1)[0]
    return " ".join(section.split())


def test_the_upgrading_section_names_the_formats_this_release_reads_and_writes() -> None:
    section = _upgrading_section()
    for magic, version in [
        (snapshot.MAGIC, snapshot.FORMAT_VERSION),
        (changelog.MAGIC, changelog.FORMAT_VERSION),
        (answers.MAGIC, answers.FORMAT_VERSION),
    ]:
        assert re.search(rf"`{magic.decode()}`( format)? {version}\b", section), (magic, version)
    assert f"this release reads format {snapshot.FORMAT_VERSION} only" in section


def test_the_upgrading_section_quotes_the_refusal_a_release_whose_default_changed_meets(tmp_path: Path) -> None:
    """A snapshot of the default settings before ignore_invisible existed (it was off), read under today's."""
    made_before = make_detector(DetectionConfig(ignore_invisible=False))
    made_before.process(["a"], ["a text indexed by the release before"])
    path = tmp_path / "snapshot-000000000001.sds"
    save_snapshot(made_before, path)
    with pytest.raises(IncompatibleSnapshotError) as refused:
        load_snapshot(path, DetectionConfig())
    quoted = re.search(r'"snapshot-\.\.\.\.sds (was made with [^"]*)"', _upgrading_section())
    assert quoted is not None and quoted.group(1) in str(refused.value)
    assert DetectionConfig().ignore_invisible and "`ignore_invisible = false`" in _upgrading_section()
