"""The S-curve plot and the offline report, opened in headless Chromium: they render and show the run's numbers.

Screenshots are kept in each test's tmp_path.
"""

import re
from pathlib import Path

import pytest

from stream_dedup.cli.main import main
from tests.browser import PageElements, headless_chromium
from tests.cli.test_dedup_command import run_cli, verdict_records
from tests.cli.test_dedup_report import HOSTILE, corpus_with_clusters
from tests.cli.test_params_command import planted_sample


def test_the_s_curve_plot_renders_with_the_theory_the_threshold_and_the_measured_shares(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    browser = headless_chromium(tmp_path)
    planted_sample(tmp_path / "sample.jsonl", originals=30, planted=8)
    plot = tmp_path / "curve.svg"
    assert main(["params", "--sample", str(tmp_path / "sample.jsonl"), "--plot", str(plot)]) == 0
    pairs = re.search(r"\(([\d,]+) pairs by exact Jaccard\)", capsys.readouterr().out)
    assert pairs

    rendered = browser.dom(plot.as_uri())

    assert rendered.lstrip().startswith("<svg")
    assert "P(candidate) = 1 - (1 - s^6)^16, in theory" in rendered
    assert f"measured on sample.jsonl: {pairs[1]} pairs of 38 documents" in rendered
    assert "threshold 0.8" in rendered
    browser.screenshot(plot.as_uri(), tmp_path / "s-curve.png", 760, 420)


def test_the_report_renders_with_the_counts_of_the_verdicts_and_its_texts_escaped(tmp_path: Path) -> None:
    browser = headless_chromium(tmp_path)
    records = corpus_with_clusters(tmp_path / "in.jsonl")
    result = run_cli("in.jsonl", "-o", "out.jsonl", "--report", "report.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    verdicts = verdict_records((tmp_path / "out.jsonl").read_bytes())
    url = (tmp_path / "report.html").as_uri()

    page = PageElements(browser.dom(url))

    duplicates = sum(v["verdict"] == "duplicate" for v in verdicts)
    assert page.value("documents") == len(verdicts) == len(records)
    assert page.value("duplicates") == duplicates
    assert page.value("duplicate-share") == pytest.approx(duplicates / len(verdicts))
    assert page.value("rejected") == 1
    assert "script" not in page.tags and page.tags.count("svg") == 1
    assert any(row[3] == HOSTILE for row in page.tables["clusters"])
    browser.screenshot(url, tmp_path / "report.png", 1280, 1200)
