"""The status page at ``/``: the numbers of ``/metrics``, charts of the last minutes, ids escaped, any role.

Served by a real :class:`OpsServer` and read both as served and as a headless Chromium
renders it (tests/browser.py). The same page against a live worker and broker is
tests/kafka_stage/test_status_page.py.
"""

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.verdict import Verdict
from stream_dedup.kafka.messages import Source, source_pointer
from stream_dedup.ops.http import Health, OpsServer
from stream_dedup.ops.metrics import WorkerMetrics
from stream_dedup.ops.runtime import MetricsEvents
from stream_dedup.ops.status import MetricsHistory, RecentDuplicates
from stream_dedup.worker.events import PublishedDuplicate, StepReport
from tests.browser import PageElements, headless_chromium
from tests.ops.test_http import FakeClock, get

HOSTILE_IDS = ['<script>alert("id")</script>', '"><img src=x onerror=alert(1)>', "ad-7 & <b>bold</b>"]


def metrics_values(server: OpsServer) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample ``/metrics`` serves, by name and labels."""
    text = get(server, "/metrics").body.decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scraped(values: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    return values[(name, tuple(sorted(labels.items())))]


class Stage:
    """An ops server over metrics and history fed as a worker would feed them."""

    def __init__(self) -> None:
        self.metrics = WorkerMetrics()
        self.metrics.set_build_info(DetectionConfig(), "9.9.9")
        self.health = Health()
        self.clock = FakeClock()
        self.history = MetricsHistory(self.metrics, interval_seconds=5.0, clock=self.clock)
        self.duplicates = RecentDuplicates(keep=5)
        self.server = OpsServer("127.0.0.1", 0, self.metrics, self.health, self.history, self.duplicates)

    def run_for(self, intervals: int, unique: int, duplicate: int) -> None:
        """``intervals`` sample intervals of 5 s, each judging ``unique`` and ``duplicate`` documents."""
        for _ in range(intervals):
            self.history.sample_if_due()
            self.metrics.documents.labels("unique").inc(unique)
            self.metrics.documents.labels("duplicate").inc(duplicate)
            self.clock.now += 5.0
        self.history.sample_if_due()

    def active(self) -> None:
        self.health.set_role("active")
        self.metrics.set_role("active")
        self.run_for(24, unique=400, duplicate=100)
        self.metrics.consumer_lag.labels("documents", "0").set(12)
        self.metrics.consumer_lag.labels("documents", "1").set(30)
        self.metrics.indexed_documents.set(9600)
        self.metrics.index_bytes.set(3 * 2**20)
        self.metrics.dead_letters.labels("invalid_json").inc(7)
        self.metrics.snapshot_last_success.set(time.time() - 30)
        original = Source("documents", 1, 41, 0)
        self.duplicates.add(
            [
                PublishedDuplicate(Verdict(each, "duplicate", "ad-1", 0.875, source_pointer(original)), source)
                for each, source in zip(HOSTILE_IDS, [Source("documents", 0, n, 0) for n in (7, 8, 9)], strict=True)
            ],
            committed_at=time.time(),
        )


@pytest.fixture
def stage() -> Iterator[Stage]:
    running = Stage()
    with running.server:
        yield running


def page(stage: Stage) -> PageElements:
    response = get(stage.server, "/")
    assert response.status == 200
    assert response.content_type == "text/html; charset=utf-8"
    return PageElements(response.body.decode())


def test_the_page_shows_the_numbers_metrics_exposes(stage: Stage) -> None:
    stage.active()

    shown, values = page(stage), metrics_values(stage.server)

    documents = sum(scraped(values, "stream_dedup_documents_total", verdict=v) for v in ("unique", "duplicate"))
    duplicates = scraped(values, "stream_dedup_documents_total", verdict="duplicate")
    assert shown.value("documents") == documents == 12_000
    assert shown.value("duplicates") == duplicates == 2_400
    assert shown.value("duplicate-share") == pytest.approx(duplicates / documents)
    assert shown.text_by_id["duplicate-share"] == "20.0%"
    assert shown.value("lag") == sum(
        scraped(values, "stream_dedup_consumer_lag_records", topic="documents", partition=p) for p in "01"
    )
    assert shown.value("indexed-documents") == scraped(values, "stream_dedup_indexed_documents") == 9600
    assert shown.value("index-bytes") == scraped(values, "stream_dedup_index_bytes")
    assert shown.value("dead-letters") == scraped(values, "stream_dedup_dead_letters_total", reason="invalid_json")
    assert 29 <= (shown.value("snapshot-age") or 0) <= 60
    # 500 documents every 5 s.
    assert shown.value("throughput") == pytest.approx(100.0)
    assert shown.text_by_id["role"] == "active"
    assert shown.tables["lag-table"] == [["documents", "0", "12"], ["documents", "1", "30"]]


def test_containment_verdicts_count_as_documents_judged_as_on_metrics(stage: Stage) -> None:
    stage.health.set_role("active")
    for _ in range(12):  # a minute: 100 documents every 5 s, of them 40 contained, 20 contains, 10 duplicates
        stage.history.sample_if_due()
        for verdict, count in (("unique", 30), ("duplicate", 10), ("contained", 40), ("contains", 20)):
            stage.metrics.documents.labels(verdict).inc(count)
        stage.clock.now += 5.0
    stage.history.sample_if_due()

    shown, values = page(stage), metrics_values(stage.server)

    judged = sum(
        scraped(values, "stream_dedup_documents_total", verdict=v)
        for v in ("unique", "duplicate", "contained", "contains")
    )
    assert shown.value("documents") == judged == 1_200
    assert shown.value("duplicate-share") == pytest.approx(0.1)
    assert shown.value("throughput") == pytest.approx(20.0)


def test_the_charts_draw_one_point_per_sample_interval(stage: Stage) -> None:
    stage.active()

    response = get(stage.server, "/").body.decode()

    assert response.count('data-label="documents judged per second" data-points="24"') == 1
    assert response.count('data-label="duplicates among the documents judged" data-points="24"') == 1


def test_the_last_duplicates_are_listed_newest_first_with_ids_escaped(stage: Stage) -> None:
    stage.active()

    shown = page(stage)

    assert "script" not in shown.tags and "img" not in shown.tags and "b" not in shown.tags
    rows = shown.tables["last-duplicates"]
    assert [row[1:] for row in rows] == [
        [each, "ad-1", "0.875", f"documents:0:{offset}", "documents:1:41"]
        for each, offset in reversed(list(zip(HOSTILE_IDS, (7, 8, 9), strict=True)))
    ]


@pytest.mark.parametrize(
    ("stage_role", "shard", "heading", "documents_label"),
    [
        ("signer", "", "stream-dedup signer", "documents signed"),
        ("shard", "1", "stream-dedup shard 1", "documents answered for"),
    ],
)
def test_a_signer_or_a_shard_shows_the_documents_it_handled_not_the_judges_verdicts(
    stage: Stage, stage_role: str, shard: str, heading: str, documents_label: str
) -> None:
    # A signer or shard committing 200 documents every 5 s, as the roles report their steps.
    stage.metrics.stage_role.labels(stage_role, shard).set(1)
    events = MetricsEvents(stage.metrics, stage.health)
    events.history = stage.history
    events.role_changed("active", f"{stage_role}: 1 partitions")
    for _ in range(12):
        stage.history.sample_if_due()
        events.step_committed(StepReport(stage_role, 200), seconds=0.1)
        stage.clock.now += 5.0
    stage.history.sample_if_due()

    shown, values = page(stage), metrics_values(stage.server)

    # Measured before: "0 documents judged, throughput 0.0 documents/s" on a role signing 40 a second.
    assert shown.value("documents") == scraped(values, "stream_dedup_role_documents_total", stage_role=stage_role)
    assert shown.value("documents") == 2_400
    assert shown.value("throughput") == pytest.approx(40.0)
    assert shown.text_by_id["duplicates"] == shown.text_by_id["duplicate-share"] == "- (the judge's)"
    text = " ".join(shown.text)
    assert heading in text and f"{documents_label} per second" in text and "documents judged per second" not in text
    assert "no verdicts here: the judge gives them" in text


@pytest.mark.parametrize("role", ["restoring", "standby"])
def test_a_replica_without_data_says_so_instead_of_showing_zeros_as_facts(stage: Stage, role: str) -> None:
    if role == "standby":
        stage.health.set_role("standby")

    shown = page(stage)

    assert shown.text_by_id["role"] == role
    assert shown.value("documents") == 0
    assert shown.value("throughput") is None and shown.text_by_id["throughput"] == "-"
    assert shown.value("duplicate-share") is None
    assert shown.text_by_id["lag"] == "- (no partitions)"
    assert shown.text_by_id["snapshot-age"] == "none yet"
    assert "no-duplicates" in shown.attributes
    assert "no samples yet" in "".join(shown.text)


@pytest.mark.parametrize(
    ("method", "shown", "not_shown"),
    [
        ("minhash", "threshold 0.8, 16 bands x 6 rows, parameters", "SimHash"),
        ("simhash", "method simhash, within 3 bits of SimHash, parameters", "threshold"),
        ("combined", "method combined: threshold 0.8, 16 bands x 6 rows, within 3 bits of SimHash, parameters", "?"),
    ],
)
def test_the_heading_shows_the_settings_the_method_reads(stage: Stage, method: str, shown: str, not_shown: str) -> None:
    """A simhash stage's page showed a threshold and bands, which simhash never reads."""
    stage.metrics.set_build_info(DetectionConfig(method=method), "9.9.9")  # type: ignore[arg-type]
    text = "".join(page(stage).text)
    assert shown in text and not_shown not in text.split("parameters")[0]


def test_the_page_names_the_settings_given_that_have_no_effect(stage: Stage) -> None:
    assert "unused-settings" not in page(stage).text_by_id
    stage.metrics.unused_settings.labels("bands").set(1)
    stage.metrics.unused_settings.labels("<b>ssl_cafile</b>").set(1)
    shown = page(stage).text_by_id["unused-settings"]
    assert shown.startswith("Given but not read by this configuration: <b>ssl_cafile</b>, bands (")


def test_chromium_renders_the_page_with_the_same_numbers(stage: Stage, tmp_path: Path) -> None:
    browser = headless_chromium(tmp_path)
    stage.active()
    url = f"http://127.0.0.1:{stage.server.port}/"

    rendered = PageElements(browser.dom(url))
    served = page(stage)

    for key in ("documents", "duplicates", "duplicate-share", "lag", "indexed-documents", "dead-letters"):
        assert rendered.value(key) == served.value(key), key
    assert "script" not in rendered.tags and "img" not in rendered.tags
    assert rendered.tables["last-duplicates"] == served.tables["last-duplicates"]
    assert rendered.tags.count("svg") == 2
    browser.screenshot(url, tmp_path / "status-page.png")
