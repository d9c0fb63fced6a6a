"""The status page's memory: a bounded history of the document counters, and the last duplicates found."""

from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.engine.verdict import Verdict
from stream_dedup.kafka.messages import Source
from stream_dedup.ops.http import Health
from stream_dedup.ops.metrics import WorkerMetrics
from stream_dedup.ops.runtime import MetricsEvents
from stream_dedup.ops.status import MetricsHistory, RecentDuplicates, Sample, rates, recent_rate
from stream_dedup.worker.events import BatchReport, PublishedDuplicate
from tests.ops.test_http import FakeClock


def judged(metrics: WorkerMetrics, unique: int, duplicate: int) -> None:
    metrics.documents.labels("unique").inc(unique)
    metrics.documents.labels("duplicate").inc(duplicate)


def duplicate(number: int) -> PublishedDuplicate:
    return PublishedDuplicate(Verdict(f"d{number}", "duplicate", "o", 0.9, 5), Source("documents", 0, number, 0))


def test_samples_read_the_document_counters_at_most_once_per_interval() -> None:
    metrics, clock = WorkerMetrics(), FakeClock()
    history = MetricsHistory(metrics, interval_seconds=5.0, clock=clock)

    history.sample_if_due()
    judged(metrics, 8, 2)
    clock.now += 4.9
    history.sample_if_due()  # too early: not taken
    clock.now += 0.1
    history.sample_if_due()

    assert history.samples() == [Sample(1000.0, 0.0, 0.0), Sample(1005.0, 10.0, 2.0)]


def test_only_the_newest_samples_are_kept() -> None:
    clock = FakeClock()
    history = MetricsHistory(WorkerMetrics(), interval_seconds=1.0, keep=3, clock=clock)

    for _ in range(10):
        history.sample_if_due()
        clock.now += 1.0

    assert [s.at for s in history.samples()] == [1007.0, 1008.0, 1009.0]


def test_rates_are_documents_per_second_and_duplicate_share_of_each_interval() -> None:
    samples = [Sample(0.0, 0.0, 0.0), Sample(5.0, 50.0, 10.0), Sample(10.0, 50.0, 10.0)]

    (first, idle) = rates(samples)

    assert (first.at, first.documents_per_second, first.duplicate_share) == (5.0, 10.0, 0.2)
    assert (idle.documents_per_second, idle.duplicate_share) == (0.0, None)  # no document: no share


def test_the_recent_rate_spans_the_last_minute_or_the_whole_history_if_shorter() -> None:
    samples = [Sample(float(t), 10.0 * t, float(t)) for t in range(0, 101, 5)]

    last_minute = recent_rate(samples)
    short = recent_rate(samples[:4])

    assert last_minute is not None and last_minute.documents_per_second == pytest.approx(10.0)
    assert short is not None and short.at == 15.0
    assert recent_rate(samples[:1]) is None and recent_rate([]) is None


@settings(deadline=None)  # a registry per example: slow on a loaded machine, and time is not the point
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 500)), min_size=2, max_size=40))
def test_the_rates_add_up_to_the_documents_judged(increments: list[tuple[int, int]]) -> None:
    metrics, clock = WorkerMetrics(), FakeClock()
    history = MetricsHistory(metrics, interval_seconds=5.0, clock=clock)
    for unique, duplicates in increments:
        judged(metrics, unique, duplicates)
        history.sample_if_due()
        clock.now += 5.0

    samples = history.samples()
    counted = sum(r.documents_per_second * 5.0 for r in rates(samples))
    assert counted == pytest.approx(samples[-1].documents - samples[0].documents)
    flagged = sum((r.duplicate_share or 0.0) * r.documents_per_second * 5.0 for r in rates(samples))
    assert flagged == pytest.approx(samples[-1].duplicates - samples[0].duplicates)


def test_recent_duplicates_keep_the_last_ones_newest_first_even_from_one_large_batch() -> None:
    found = RecentDuplicates(keep=3)

    found.add([duplicate(1), duplicate(2)], committed_at=10.0)
    found.add([duplicate(n) for n in range(3, 50)], committed_at=11.0)

    listed = found.newest_first()
    assert [f.published.verdict.id for f in listed] == ["d49", "d48", "d47"]
    assert {f.committed_at for f in listed} == {11.0}


def test_the_worker_events_feed_the_history_and_the_duplicates() -> None:
    events = MetricsEvents(WorkerMetrics(), Health())
    none = np.zeros(0, dtype=np.int64)

    events.heartbeat()
    events.batch_committed(
        BatchReport(
            Counter(duplicate=2), Counter(), 0.1, 50.0, none, none, 0, 0, 2, 0, 0, 0, [duplicate(1), duplicate(2)]
        )
    )

    assert [f.published.verdict.id for f in events.duplicates.newest_first()] == ["d2", "d1"]
    assert len(events.history.samples()) == 1
