"""The docs document every setting and every metric (both drift: they come from code); their links resolve."""

import re
from pathlib import Path

from stream_dedup.cli.settings_sources import setting_types
from stream_dedup.ops.metrics import WorkerMetrics

ROOT = Path(__file__).resolve().parents[1]
SETTINGS_PAGE = (ROOT / "docs" / "kafka-stage.md").read_text()
OPERATING_PAGE = (ROOT / "docs" / "operating.md").read_text()


def test_every_setting_is_documented() -> None:
    missing = [name for name in setting_types() if f"`{name}`" not in SETTINGS_PAGE]
    assert not missing, f"settings missing from docs/kafka-stage.md: {missing}"


def test_every_metric_is_documented() -> None:
    names = {metric.name for metric in WorkerMetrics().registry.collect()}
    # prometheus_client names counters without their _total suffix: a prefix match covers both.
    missing = [name for name in names if f"`{name}" not in OPERATING_PAGE]
    assert not missing, f"metrics missing from docs/operating.md: {missing}"


def test_every_link_between_the_readme_and_the_docs_resolves() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    broken = []
    for page in pages:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, f"links to missing files: {broken}"
