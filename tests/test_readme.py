"""The README documents every setting and every metric (they are generated from code, so they drift)."""

from pathlib import Path

from stream_dedup.cli.settings_sources import setting_types
from stream_dedup.ops.metrics import WorkerMetrics

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_every_setting_is_documented() -> None:
    missing = [name for name in setting_types() if f"`{name}`" not in README]
    assert not missing, f"settings missing from README.md: {missing}"


def test_every_metric_is_documented() -> None:
    names = {metric.name for metric in WorkerMetrics().registry.collect()}
    # prometheus_client names counters without their _total suffix: a prefix match covers both.
    missing = [name for name in names if f"`{name}" not in README]
    assert not missing, f"metrics missing from README.md: {missing}"
