"""Worker metrics: the fixed names, types and labels the dashboard relies on, and bulk observation."""

import math
import re
import time
from collections import Counter

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from stream_dedup.config import DetectionConfig
from stream_dedup.ops.http import Health
from stream_dedup.ops.metrics import DEAD_LETTER_REASONS, ROLES, WorkerMetrics, observe_many
from stream_dedup.ops.runtime import MetricsEvents
from stream_dedup.worker.events import BatchReport, ProbeCounts, StepReport

# attribute, exposed name, type, label names: the contract with the dashboard and alert rules.
CONTRACT = [
    ("build_info", "stream_dedup_build_info", "gauge",
     ("version", "fingerprint", "method", "threshold", "num_perm", "sketch_bits", "bands", "rows_per_band", "scheme",
      "shingle_unit", "shingle_size", "verification", "max_hamming")),
    ("role", "stream_dedup_role", "gauge", ("role",)),
    ("documents", "stream_dedup_documents_total", "counter", ("verdict",)),
    ("dead_letters", "stream_dedup_dead_letters_total", "counter", ("reason",)),
    ("batch_duration", "stream_dedup_batch_duration_seconds", "histogram", ()),
    ("batch_documents", "stream_dedup_batch_documents", "histogram", ()),
    ("end_to_end_latency", "stream_dedup_end_to_end_latency_seconds", "histogram", ()),
    ("consumer_lag", "stream_dedup_consumer_lag_records", "gauge", ("topic", "partition")),
    ("assigned_partitions", "stream_dedup_assigned_partitions", "gauge", ()),
    ("indexed_documents", "stream_dedup_indexed_documents", "gauge", ()),
    ("index_bytes", "stream_dedup_index_bytes", "gauge", ()),
    ("evicted_documents", "stream_dedup_evicted_documents_total", "counter", ()),
    ("candidates_per_document", "stream_dedup_candidates_per_document", "histogram", ()),
    ("candidates", "stream_dedup_candidates_total", "counter", ()),
    ("verified_candidates", "stream_dedup_verified_candidates_total", "counter", ()),
    ("hot_bucket_skips", "stream_dedup_hot_bucket_skips_total", "counter", ()),
    ("text_verifications", "stream_dedup_text_verifications_total", "counter", ("outcome",)),
    ("text_reads", "stream_dedup_text_reads_total", "counter", ("source",)),
    ("text_kept_bytes", "stream_dedup_text_kept_bytes", "gauge", ("place",)),
    ("snapshot_duration", "stream_dedup_snapshot_duration_seconds", "histogram", ()),
    ("snapshot_pause", "stream_dedup_snapshot_pause_seconds", "histogram", ()),
    ("snapshot_size", "stream_dedup_snapshot_size_bytes", "gauge", ()),
    ("snapshot_last_success", "stream_dedup_snapshot_last_success_timestamp_seconds", "gauge", ()),
    ("snapshot_failures", "stream_dedup_snapshot_failures_total", "counter", ()),
    ("transactions", "stream_dedup_transactions_total", "counter", ("outcome",)),
    ("rebalances", "stream_dedup_rebalances_total", "counter", ()),
    ("replayed_documents", "stream_dedup_replayed_documents_total", "counter", ()),
    ("replay_remaining", "stream_dedup_replay_remaining_records", "gauge", ()),
    ("partition_wait", "stream_dedup_partition_wait_seconds_total", "counter", ()),
    ("buffered_records", "stream_dedup_buffered_records", "gauge", ()),
    ("refetched_records", "stream_dedup_refetched_records_total", "counter", ()),
    ("deleted_input_records", "stream_dedup_deleted_input_records_total", "counter", ()),
    ("isolated_records", "stream_dedup_isolated_records_total", "counter", ()),
    ("signing_wait", "stream_dedup_signing_wait_seconds_total", "counter", ()),
    ("signer_restarts", "stream_dedup_signer_restarts_total", "counter", ()),
    ("last_commit", "stream_dedup_last_commit_timestamp_seconds", "gauge", ()),
    ("stage_role", "stream_dedup_stage_role", "gauge", ("stage_role", "shard")),
    ("role_documents", "stream_dedup_role_documents_total", "counter", ("stage_role",)),
    ("merge_wait", "stream_dedup_merge_wait_seconds", "gauge", ()),
    ("unused_settings", "stream_dedup_unused_settings", "gauge", ("setting",)),
]  # fmt: skip


def exposition(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode("utf-8")


def sample(metrics: WorkerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def without_created(text: str) -> list[str]:
    """Exposition lines, minus the ``_created`` timestamps that differ between two metrics."""
    return [line for line in text.splitlines() if "_created" not in line]


@pytest.mark.parametrize(("attribute", "name", "kind", "labels"), CONTRACT, ids=[row[0] for row in CONTRACT])
def test_metric_has_the_agreed_name_type_and_labels(
    attribute: str, name: str, kind: str, labels: tuple[str, ...]
) -> None:
    metrics = WorkerMetrics()
    metric = getattr(metrics, attribute)
    if labels:
        metric.labels(**dict.fromkeys(labels, "x"))  # raises unless the label names are exactly these
    else:
        with pytest.raises(ValueError, match="No label names"):
            metric.labels("x")
    assert f"# TYPE {name} {kind}\n" in exposition(metrics.registry)


def test_contract_lists_every_metric_of_the_registry() -> None:
    types = re.findall(r"^# TYPE (\S+) \S+$", exposition(WorkerMetrics().registry), re.MULTILINE)
    exposed = {name for name in types if not name.endswith("_created")}
    assert exposed == {row[1] for row in CONTRACT}


def test_labelled_series_exist_at_zero_from_construction() -> None:
    metrics = WorkerMetrics()
    for verdict in ("unique", "duplicate"):
        assert sample(metrics, "stream_dedup_documents_total", verdict=verdict) == 0.0
    for reason in DEAD_LETTER_REASONS:
        assert sample(metrics, "stream_dedup_dead_letters_total", reason=reason) == 0.0
    for outcome in ("committed", "aborted"):
        assert sample(metrics, "stream_dedup_transactions_total", outcome=outcome) == 0.0
    assert set(DEAD_LETTER_REASONS) == {
        "invalid_utf8", "invalid_json", "not_an_object", "missing_text", "invalid_text", "empty_text", "invalid_id",
        "too_large", "too_deep", "id_too_long", "internal_error", "verdict_too_large", "unique_too_large",
        "unique_record_gone", "processing_failed", "batch_too_large",
    }  # fmt: skip


def test_role_starts_restoring_with_all_four_series() -> None:
    metrics = WorkerMetrics()
    assert {role: sample(metrics, "stream_dedup_role", role=role) for role in ROLES} == {
        "restoring": 1.0,
        "standby": 0.0,
        "active": 0.0,
        "stopping": 0.0,
    }


@pytest.mark.parametrize("role", ROLES)
def test_set_role_raises_exactly_one_role(role: str) -> None:
    metrics = WorkerMetrics()
    metrics.set_role("active")
    metrics.set_role(role)  # type: ignore[arg-type]
    values = {each: sample(metrics, "stream_dedup_role", role=each) for each in ROLES}
    assert values == {each: 1.0 if each == role else 0.0 for each in ROLES}


def test_set_role_refuses_an_unknown_role() -> None:
    with pytest.raises(ValueError, match="leader"):
        WorkerMetrics().set_role("leader")  # type: ignore[arg-type]


def test_build_info_labels_are_the_detection_parameters() -> None:
    metrics = WorkerMetrics()
    config = DetectionConfig(threshold=0.7, num_perm=64, shingle_unit="word", shingle_size=3, verification="exact")
    metrics.set_build_info(config, "1.2.3")
    banding = config.banding()
    labels = {
        "version": "1.2.3",
        "fingerprint": config.fingerprint(),
        "method": "minhash",
        "threshold": "0.7",
        "num_perm": "64",
        "sketch_bits": "1024",
        "bands": str(banding.bands),
        "rows_per_band": str(banding.rows_per_band),
        "scheme": "oph",
        "shingle_unit": "word",
        "shingle_size": "3",
        "verification": "exact",
        "max_hamming": "3",
    }
    assert sample(metrics, "stream_dedup_build_info", **labels) == 1.0


def test_build_info_set_twice_keeps_one_series() -> None:
    metrics = WorkerMetrics()
    metrics.set_build_info(DetectionConfig(), "1.0.0")
    metrics.set_build_info(DetectionConfig(threshold=0.9), "1.0.1")
    series = [line for line in exposition(metrics.registry).splitlines() if line.startswith("stream_dedup_build_info{")]
    assert len(series) == 1
    assert 'version="1.0.1"' in series[0]
    assert 'threshold="0.9"' in series[0]


def test_two_instances_do_not_share_series() -> None:
    first, second = WorkerMetrics(), WorkerMetrics()
    first.documents.labels("duplicate").inc(5)
    assert sample(first, "stream_dedup_documents_total", verdict="duplicate") == 5.0
    assert sample(second, "stream_dedup_documents_total", verdict="duplicate") == 0.0


def test_histogram_buckets_span_the_agreed_ranges() -> None:
    metrics = WorkerMetrics()

    def bounds(histogram: Histogram) -> list[float]:
        return [float(s.labels["le"]) for s in next(iter(histogram.collect())).samples if s.name.endswith("_bucket")]

    assert bounds(metrics.candidates_per_document) == [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, math.inf]
    assert (bounds(metrics.batch_duration)[0], bounds(metrics.batch_duration)[-2]) == (0.001, 10.0)
    assert (bounds(metrics.batch_documents)[0], bounds(metrics.batch_documents)[-2]) == (1, 10000)
    assert (bounds(metrics.end_to_end_latency)[0], bounds(metrics.end_to_end_latency)[-2]) == (0.005, 300.0)


# Bounds of the histograms below, drawn often as values to test the edge of a bucket. Powers of two,
# so that they too add up exactly.
BOUNDS = (1 / 1024, 1 / 128, 0.5, 1.0, 2.0, 64.0, 256.0)


def twin_histograms() -> tuple[CollectorRegistry, Histogram, CollectorRegistry, Histogram]:
    one, bulk = CollectorRegistry(), CollectorRegistry()
    return (
        one,
        Histogram("h_seconds", "test", buckets=BOUNDS, registry=one),
        bulk,
        Histogram("h_seconds", "test", buckets=BOUNDS, registry=bulk),
    )


# Multiples of 1/1024 below 2**20 add up exactly in float64 in any order, so the sums agree to the last digit.
exact_values = st.one_of(
    st.integers(-(2**10), 2**20).map(lambda k: k / 1024),
    st.sampled_from(BOUNDS),
)


@given(batches=st.lists(st.lists(exact_values, max_size=50), max_size=4))
def test_observe_many_exposes_the_same_text_as_observe_each(batches: list[list[float]]) -> None:
    one, one_by_one, bulk, in_bulk = twin_histograms()
    for batch in batches:
        for value in batch:
            one_by_one.observe(value)
        observe_many(in_bulk, np.array(batch, dtype=np.float64))
    assert without_created(exposition(bulk)) == without_created(exposition(one))


any_values = st.one_of(
    st.floats(min_value=-1e12, max_value=1e12),
    st.sampled_from(BOUNDS),
    st.sampled_from([math.inf, -math.inf, math.nan]),
)


@given(values=st.lists(any_values, max_size=100))
def test_observe_many_counts_any_floats_like_observe(values: list[float]) -> None:
    """Infinities and NaN included: buckets and count exact, the sum equal up to the order of additions."""
    one, one_by_one, bulk, in_bulk = twin_histograms()
    for value in values:
        one_by_one.observe(value)
    observe_many(in_bulk, values)
    assert [line for line in without_created(exposition(bulk)) if "_sum" not in line] == [
        line for line in without_created(exposition(one)) if "_sum" not in line
    ]
    expected, actual = one.get_sample_value("h_seconds_sum"), bulk.get_sample_value("h_seconds_sum")
    assert expected is not None and actual is not None
    if all(math.isfinite(value) for value in values):
        # Reordering n additions moves the result by at most about n * epsilon * sum(|x|).
        assert abs(actual - expected) <= 1e-13 * math.fsum(abs(value) for value in values)
    else:
        assert str(actual) == str(expected)  # the same inf, -inf or nan


def test_observe_many_on_a_labelled_child() -> None:
    registry = CollectorRegistry()
    histogram = Histogram("h", "test", ["shard"], buckets=(1.0, 2.0), registry=registry)
    observe_many(histogram.labels("a"), [0.5, 1.5, 1.5, 3.0])
    assert registry.get_sample_value("h_bucket", {"shard": "a", "le": "1.0"}) == 1.0
    assert registry.get_sample_value("h_bucket", {"shard": "a", "le": "2.0"}) == 3.0
    assert registry.get_sample_value("h_count", {"shard": "a"}) == 4.0
    assert registry.get_sample_value("h_sum", {"shard": "a"}) == 6.5


def test_observe_many_refuses_a_labelled_parent() -> None:
    histogram = Histogram("h", "test", ["shard"], registry=CollectorRegistry())
    with pytest.raises(ValueError, match="labels"):
        observe_many(histogram, [1.0])


def test_containment_verdict_series_exist_at_zero_from_construction() -> None:
    metrics = WorkerMetrics()
    for verdict in ("contained", "contains"):
        assert sample(metrics, "stream_dedup_documents_total", verdict=verdict) == 0.0


def test_signer_events_count_restarts_and_add_up_the_wait() -> None:
    metrics = WorkerMetrics()
    events = MetricsEvents(metrics, Health())
    events.signer_restarted()
    events.signing_waited(0.25)
    events.signing_waited(0.5)
    assert sample(metrics, "stream_dedup_signer_restarts_total") == 1
    assert sample(metrics, "stream_dedup_signing_wait_seconds_total") == 0.75


def test_buffered_records_are_what_the_last_poll_left_and_none_after_a_rebalance() -> None:
    metrics = WorkerMetrics()
    events = MetricsEvents(metrics, Health())
    events.records_buffered(120, 0)
    events.records_buffered(180, 40)
    events.records_buffered(150, 25)
    assert sample(metrics, "stream_dedup_buffered_records") == 150
    assert sample(metrics, "stream_dedup_refetched_records_total") == 65
    events.partitions_assigned(0)
    assert sample(metrics, "stream_dedup_buffered_records") == 0


def test_a_replica_restoring_after_a_kafka_error_holds_no_partition_and_has_no_lag() -> None:
    metrics = WorkerMetrics()
    events = MetricsEvents(metrics, Health())
    events.role_changed("standby", "joining the group")
    events.partitions_assigned(3)
    events.role_changed("active", "processing 3 partitions")
    events.lag_measured({("documents", 0): 40_000, ("documents", 1): 12, ("documents", 2): 0})
    events.records_buffered(900, 0)

    events.role_changed("restoring", "restarting after a Kafka error")

    assert sample(metrics, "stream_dedup_assigned_partitions") == 0
    assert sample(metrics, "stream_dedup_buffered_records") == 0
    text = generate_latest(metrics.registry).decode()
    assert "stream_dedup_consumer_lag_records{" not in text


@pytest.mark.parametrize("held_nothing", ["restoring", "standby"])
def test_a_judge_that_no_longer_holds_the_topics_waits_for_no_shard(held_nothing: str) -> None:
    # A judge waiting for a stuck shard, whose session ends (a Kafka error) while a second judge takes over:
    # it restores, then stands by, and its wait no longer moves. Kept, StreamDedupShardLagging (max by instance)
    # fired on it for ever, the shard long back and the active judge's wait at 0.
    metrics = WorkerMetrics()
    events = MetricsEvents(metrics, Health())
    events.partitions_assigned(3)
    events.role_changed("active", "judge: 3 partitions")
    events.merge_waited(420.0)

    if held_nothing == "restoring":
        events.role_changed("restoring", "restarting after a Kafka error")
    else:
        events.partitions_assigned(0)
        events.role_changed("standby", "standby: another replica holds the partitions")

    assert sample(metrics, "stream_dedup_merge_wait_seconds") == 0


def test_evictions_replayed_after_a_session_restarts_are_not_counted_again() -> None:
    # A shard's session ends on a Kafka error and rebuilds its index from the sequenced topic, reporting its size
    # as it goes: the evictions of the rebuild are those the process counted before. Measured on the broker, a
    # shard's counter went from 151 to 302 across such a restart, its index unchanged.
    metrics = WorkerMetrics()
    events = MetricsEvents(metrics, Health())
    events.index_changed(0, 0, 0)
    events.index_changed(47, 1_000, 151)
    events.role_changed("restoring", "restarting after a Kafka error")
    events.index_changed(0, 0, 0)  # no snapshot: an empty index, rebuilt from the topic
    events.index_changed(47, 1_000, 151)
    assert sample(metrics, "stream_dedup_evicted_documents_total") == 151
    events.index_changed(55, 1_100, 169)  # new documents push older ones out
    assert sample(metrics, "stream_dedup_evicted_documents_total") == 169


def test_role_steps_fill_the_latency_batch_and_candidate_series_as_one_process_batches_do() -> None:
    metrics = WorkerMetrics()
    events = MetricsEvents(metrics, Health())
    now_ms = int(time.time() * 1000)
    events.step_committed(StepReport("signer", 40), 0.1)
    events.step_committed(
        StepReport(
            "shard",
            3,
            indexed_documents=2,
            index_bytes=700,
            probes=ProbeCounts(
                np.array([0, 2, 1]),
                3,
                verified_pairs=2,
                settled_by_text=1,
                unsettled=0,
                text_reads=Counter(disk=2),
                text_kept_bytes={"memory": 5000, "disk": 1 << 20},
            ),
        ),
        0.1,
    )
    events.step_committed(StepReport("judge", 2, timestamps_ms=np.array([now_ms - 2000, -1])), 0.1)
    assert sample(metrics, "stream_dedup_batch_documents_count") == 3
    assert sample(metrics, "stream_dedup_batch_documents_sum") == 45
    assert sample(metrics, "stream_dedup_candidates_per_document_count") == 3
    assert sample(metrics, "stream_dedup_candidates_per_document_sum") == 3
    assert sample(metrics, "stream_dedup_candidates_total") == 3
    assert sample(metrics, "stream_dedup_verified_candidates_total") == 2
    assert sample(metrics, "stream_dedup_text_verifications_total", outcome="settled") == 1
    assert sample(metrics, "stream_dedup_text_reads_total", source="disk") == 2
    assert sample(metrics, "stream_dedup_text_reads_total", source="kafka") == 0
    assert sample(metrics, "stream_dedup_text_kept_bytes", place="memory") == 5000
    assert sample(metrics, "stream_dedup_text_kept_bytes", place="disk") == 1 << 20
    # The record without a timestamp is left out; the other waited about 2 s.
    assert sample(metrics, "stream_dedup_end_to_end_latency_seconds_count") == 1
    assert 2.0 <= (sample(metrics, "stream_dedup_end_to_end_latency_seconds_sum") or 0) < 10.0


def test_a_batch_sets_what_the_kept_texts_take_and_one_without_texts_leaves_it() -> None:
    metrics = WorkerMetrics()
    events = MetricsEvents(metrics, Health())
    none = np.zeros(0, dtype=np.int64)
    kept = {"memory": 33 << 20, "disk": 7 << 20}
    report = BatchReport(Counter(unique=1), Counter(), 0.1, 50.0, none, none, 0, 0, 1, 0, 0, 0, text_kept_bytes=kept)
    events.batch_committed(report)
    assert sample(metrics, "stream_dedup_text_kept_bytes", place="memory") == 33 << 20
    assert sample(metrics, "stream_dedup_text_kept_bytes", place="disk") == 7 << 20
    events.batch_committed(BatchReport(Counter(unique=1), Counter(), 0.1, 50.0, none, none, 0, 0, 1, 0, 0, 0))
    assert sample(metrics, "stream_dedup_text_kept_bytes", place="disk") == 7 << 20
