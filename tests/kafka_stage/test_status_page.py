"""The status page of a live worker, as headless Chromium renders it, against the same worker's ``/metrics``.

A real ``stream-dedup run`` judges a corpus with planted near-copies, then a few exact
copies whose ids are HTML; the page must show what ``/metrics`` says, list those last
duplicates with their ids as text, and show a standby of the same group as one.
A screenshot of each page is kept in the test's tmp_path.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.browser import PageElements, headless_chromium
from tests.corpus import make_clustered_corpus
from tests.deploy.live import free_port

from .stage import Stage, WorkerProcess, document_messages, expected_verdicts, produce, wait_until

pytestmark = pytest.mark.kafka

HOSTILE_IDS = ['<script>alert("id")</script>', '"><img src=x onerror=alert(1)>', "</td></tr></table><h1>x</h1>"]
DOCUMENTS = 600

#: Page figure -> the /metrics samples it adds up.
FIGURES = {
    "documents": ("stream_dedup_documents_total", {}),
    "duplicates": ("stream_dedup_documents_total", {"verdict": "duplicate"}),
    "lag": ("stream_dedup_consumer_lag_records", {}),
    "indexed-documents": ("stream_dedup_indexed_documents", {}),
    "index-bytes": ("stream_dedup_index_bytes", {}),
    "dead-letters": ("stream_dedup_dead_letters_total", {}),
}


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode("utf-8"))


def scrape(port: int) -> dict[str, float]:
    """Each figure's value as ``/metrics`` gives it: the sum of the samples of its name with its labels."""
    samples = [
        sample
        for family in text_string_to_metric_families(fetch(f"http://127.0.0.1:{port}/metrics"))
        for sample in family.samples
    ]
    return {
        figure: sum(s.value for s in samples if s.name == name and labels.items() <= s.labels.items())
        for figure, (name, labels) in FIGURES.items()
    }


def test_the_status_page_of_a_live_worker_shows_what_its_metrics_say(stage: Stage, tmp_path: Path) -> None:
    browser = headless_chromium(tmp_path)
    corpus = make_clustered_corpus(DOCUMENTS, seed=23)
    messages = document_messages(corpus, partitions=3)
    copies = [
        (name.encode(), json.dumps({"id": name, "text": corpus[0][0]}).encode(), i % 3, messages[-1][3] + 1 + i)
        for i, name in enumerate(HOSTILE_IDS)
    ]
    port, standby_port = free_port(), free_port()
    url = f"http://127.0.0.1:{port}/"
    WorkerProcess(stage.environment("worker-1", metrics_port=port), tmp_path / "worker-1.log").start()
    produce(stage.bootstrap, stage.input_topic, messages)
    produce(stage.bootstrap, stage.input_topic, copies)  # judged last: at the top of the list

    def settled() -> bool:
        with_rates = 'id="throughput" data-value=' in fetch(url)  # two samples of the counters at least
        return with_rates and scrape(port)["documents"] == DOCUMENTS + len(HOSTILE_IDS) and scrape(port)["lag"] == 0

    wait_until(lambda: _answers(url) and settled(), 180, "every document judged, lag 0 and two samples taken")
    before = scrape(port)
    shown = PageElements(browser.dom(url))
    after = scrape(port)

    assert shown.text_by_id["role"] == "active"
    for figure, value in before.items():
        if after[figure] == value:  # not moved while the page was read
            assert shown.value(figure) == value, figure
    assert shown.value("documents") == DOCUMENTS + len(HOSTILE_IDS)
    assert shown.value("duplicate-share") == pytest.approx(before["duplicates"] / before["documents"])
    assert "script" not in shown.tags and "img" not in shown.tags and "h1" in shown.tags
    assert shown.tags.count("h1") == 1  # the page's own: the id did not close the table
    expected = expected_verdicts(corpus)  # the copies come after: they change no verdict of the corpus
    rows = shown.tables["last-duplicates"]
    assert [row[1] for row in rows[:3]] == list(reversed(HOSTILE_IDS))
    assert len(rows) == 20
    for row in rows[3:]:
        verdict = expected[row[1]]
        assert (verdict["verdict"], verdict["duplicate_of"], f"{verdict['similarity']:.3f}") == (
            "duplicate",
            row[2],
            row[3],
        )
    assert all(row[2] == "doc-0" and row[3] == "1.000" for row in rows[:3])
    browser.screenshot(url, tmp_path / "status-page-active.png", 1280, 1100)

    standby_url = f"http://127.0.0.1:{standby_port}/"
    WorkerProcess(stage.environment("worker-2", metrics_port=standby_port), tmp_path / "worker-2.log").start()
    wait_until(lambda: _answers(standby_url) and '"role": "standby"' in _readiness(standby_port), 120, "a standby")
    standby = PageElements(browser.dom(standby_url))

    assert standby.text_by_id["role"] == "standby"
    assert standby.value("documents") == 0
    assert standby.text_by_id["lag"] == "- (no partitions)"
    browser.screenshot(standby_url, tmp_path / "status-page-standby.png")


def _answers(url: str) -> bool:
    try:
        fetch(url)
    except OSError:
        return False
    return True


def _readiness(port: int) -> str:
    try:
        return fetch(f"http://127.0.0.1:{port}/readyz")
    except OSError:
        return ""
