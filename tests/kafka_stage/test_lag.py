"""Consumer lag on the real broker: the records a stage has not processed yet, fetched or not.

A stage that has read records and is stuck before committing them (a hung commit, a judge
waiting for the shards' answers) must show them as lag, or StreamDedupNoProgress, which
needs lag, never fires. And a stage that has committed everything it was given lags by
nothing, though the topics it reads hold transaction markers past its last record: in its
own metrics, and in its groups' committed offsets, which monitors outside it read.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from stream_dedup.ops.http import Health
from stream_dedup.ops.metrics import WorkerMetrics
from stream_dedup.ops.runtime import MetricsEvents
from stream_dedup.worker import committer
from stream_dedup.worker.events import Role, WorkerEvents
from tests.corpus import make_clustered_corpus

from .stage import (
    Stage,
    document_messages,
    produce,
    read_committed,
    role_threads,
    verdicts_by_source,
    wait_until,
    worker_thread,
)

pytestmark = pytest.mark.kafka


class LagReports(WorkerEvents):
    """The lag last reported for each (topic, partition)."""

    def __init__(self) -> None:
        self._lag: dict[tuple[str, int], int] = {}
        self._lock = threading.Lock()

    def lag_measured(self, lag: dict[tuple[str, int], int]) -> None:
        with self._lock:
            self._lag.update(lag)

    def of(self, topic: str) -> dict[int, int]:
        with self._lock:
            return {partition: records for (name, partition), records in self._lag.items() if name == topic}


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        partition = TopicPartition(topic, 0)
        return int(consumer.end_offsets([partition])[partition])
    finally:
        consumer.close()


def lag_seen_from_outside(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """What Burrow or ``kafka-consumer-groups.sh --describe`` show: each partition's end less the group's commit."""
    # A client of the group that never joins it: it only asks for the group's committed offsets.
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        ends = consumer.end_offsets(partitions)
        return {tp.partition: ends[tp] - (consumer.committed(tp) or 0) for tp in partitions}
    finally:
        consumer.close()


def test_a_stage_whose_commit_hangs_lags_by_every_record_it_has_read_and_not_committed(
    stage: Stage, topic_factory: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # One partition, written without transactions: its end offset is the number of records.
    stage.input_topic = topic_factory(partitions=1)
    corpus = make_clustered_corpus(30, seed=5)
    producer = KafkaProducer(bootstrap_servers=stage.bootstrap)
    for _, value, _, timestamp in document_messages(corpus, partitions=1):
        producer.send(stage.input_topic, value=value, partition=0, timestamp_ms=timestamp)
    producer.flush(30)
    producer.close()

    hanging, release = threading.Event(), threading.Event()
    commit_batch = committer.commit_batch

    def hung_commit(*args: Any) -> Any:
        hanging.set()
        release.wait(120)
        return commit_batch(*args)

    monkeypatch.setattr(committer, "commit_batch", hung_commit)
    reports = LagReports()
    # One batch takes every record: the loop goes on polling and reporting while its commit hangs.
    with worker_thread(stage.settings(batch_size=100, signing_processes=0), events=reports):
        wait_until(hanging.is_set, 60, "the first batch's commit")
        # Every record was fetched (and judged): only the commit is missing.
        wait_until(lambda: reports.of(stage.input_topic) == {0: len(corpus)}, 30, f"a lag of {len(corpus)}")
        release.set()
        wait_until(lambda: reports.of(stage.input_topic) == {0: 0}, 30, "no lag once committed")
    assert len(read_committed(stage.bootstrap, stage.output_topic, len(corpus))) == len(corpus)


def test_a_judge_waiting_for_the_shards_lags_by_the_batches_it_holds_and_no_role_lags_once_all_is_judged(
    stage: Stage,
) -> None:
    corpus = make_clustered_corpus(300, seed=9)
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    roles = dict(batch_size=50, index_slots=6, shards=2)
    signer = stage.settings("signer-1", role="signer", **roles)
    sequenced = signer.sequenced_topic
    signed, judged, answered = LagReports(), LagReports(), LagReports()
    with (
        role_threads(signer, events=signed),
        role_threads(stage.settings("judge-1", role="judge", **roles), events=judged),
    ):
        # The signer has committed every document; the input's transaction markers are no lag.
        wait_until(lambda: signed.of(stage.input_topic) == {0: 0, 1: 0, 2: 0}, 60, "the signer to sign all")
        written = end_offset(stage.bootstrap, sequenced)
        # No shard answers: the judge has read every batch and judged none, so none is processed.
        wait_until(lambda: judged.of(sequenced) == {0: written}, 30, f"the judge to lag by {written}")
        with role_threads(
            stage.settings("shard-0", role="shard", shard_index=0, **roles),
            stage.settings("shard-1", role="shard", shard_index=1, **roles),
            events=answered,
        ):
            assert len(read_committed(stage.bootstrap, stage.output_topic, len(corpus))) == len(corpus)
            wait_until(lambda: judged.of(sequenced) == {0: 0}, 30, "the judge to lag by nothing")
            assert set(judged.of(signer.answers_topic).values()) == {0}
            wait_until(lambda: answered.of(sequenced) == {0: 0}, 30, "the shards to lag by nothing")
        assert signed.of(stage.input_topic) == {0: 0, 1: 0, 2: 0}


def lag_series(metrics: WorkerMetrics) -> dict[tuple[str, str], float]:
    """The ``stream_dedup_consumer_lag_records`` series a scrape of ``metrics`` would show, by (topic, partition)."""
    return {
        (sample.labels["topic"], sample.labels["partition"]): sample.value
        for family in metrics.consumer_lag.collect()
        for sample in family.samples
    }


def held(metrics: WorkerMetrics) -> float:
    """``stream_dedup_assigned_partitions`` as a scrape of ``metrics`` would show it."""
    return float(metrics.registry.get_sample_value("stream_dedup_assigned_partitions") or 0.0)


def test_a_signer_that_gives_up_partitions_to_another_stops_reporting_their_lag(stage: Stage) -> None:
    # Records of an upstream transaction left open lie past what any consumer may read: every partition lags
    # by them, on the signer that holds it, until the transaction commits. A signer that gave a partition up
    # kept its last lag, beside the new holder's: an idle stage summed to a lag that never went (a false
    # StreamDedupNoProgress, as no verdict comes).
    produce(stage.bootstrap, stage.input_topic, document_messages(make_clustered_corpus(30, seed=12), partitions=3))
    upstream = KafkaProducer(bootstrap_servers=stage.bootstrap, transactional_id=f"upstream-{stage.group_id}")
    upstream.init_transactions()
    upstream.begin_transaction()
    late = document_messages(make_clustered_corpus(60, seed=13)[30:], partitions=3)
    for key, value, partition, timestamp in late:
        upstream.send(stage.input_topic, key=key, value=value, partition=partition, timestamp_ms=timestamp)
    upstream.flush(30)
    roles = dict(batch_size=50, index_slots=6, shards=2, parallel_signers=True)
    first, second = WorkerMetrics(), WorkerMetrics()
    try:
        with role_threads(stage.settings("signer-1", role="signer", **roles), events=MetricsEvents(first, Health())):
            wait_until(lambda: set(lag_series(first).values()) == {10}, 60, "the first signer to lag by the open one")
            with role_threads(
                stage.settings("signer-2", role="signer", **roles), events=MetricsEvents(second, Health())
            ):
                wait_until(lambda: held(second) > 0, 60, "the second signer's partitions")
                upstream.commit_transaction()
                # Each signer reports the partitions it holds, and none lags once the transaction is signed.
                wait_until(
                    lambda: (
                        len(lag_series(first)) == held(first)
                        and len(lag_series(second)) == held(second)
                        and set(lag_series(first).values()) | set(lag_series(second).values()) == {0}
                    ),
                    60,
                    "each signer to report the lag of its own partitions only, and none",
                )
                assert set(lag_series(first)).isdisjoint(lag_series(second))
                assert len(lag_series(first)) + len(lag_series(second)) == 3
    finally:
        upstream.close()


def test_an_idle_stage_fed_in_transactions_commits_past_their_markers_and_resumes_there_at_once(stage: Stage) -> None:
    # One upstream transaction per feed: each partition ends with its commit marker, one offset no record has.
    first = make_clustered_corpus(90, seed=21)
    produce(stage.bootstrap, stage.input_topic, document_messages(first, partitions=3))
    # A long transaction timeout: a takeover that had to wait for the changelog to reach the committed
    # offsets (a commit of offsets alone, without a changelog record) would wait 90 s, past this test's limits.
    settings = stage.settings(batch_size=40, transaction_timeout_seconds=60)
    with worker_thread(settings):
        assert len(read_committed(stage.bootstrap, stage.output_topic, len(first))) == len(first)
        wait_until(
            lambda: lag_seen_from_outside(stage.bootstrap, stage.group_id, stage.input_topic) == {0: 0, 1: 0, 2: 0},
            60,
            "the group's committed offsets to reach the partitions' ends",
        )
    second = make_clustered_corpus(120, seed=21)[90:]
    produce(stage.bootstrap, stage.input_topic, document_messages(second, partitions=3))
    with worker_thread(settings):
        verdicts = read_committed(stage.bootstrap, stage.output_topic, len(first) + len(second), timeout=40)
    grouped = verdicts_by_source([json.loads(v.value) for v in verdicts])
    assert len(grouped) == len(first) + len(second)
    assert all(len(given) == 1 for given in grouped.values())


def test_idle_roles_commit_past_the_markers_of_every_topic_they_read(stage: Stage) -> None:
    corpus = make_clustered_corpus(120, seed=23)
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    roles = dict(batch_size=50, index_slots=6, shards=2)
    signer = stage.settings("signer-1", role="signer", **roles)
    shards = [stage.settings(f"shard-{k}", role="shard", shard_index=k, **roles) for k in range(2)]
    judge = stage.settings("judge-1", role="judge", **roles)
    read = [
        (signer.role_group_id, stage.input_topic),
        *[(shard.role_group_id, signer.sequenced_topic) for shard in shards],
        (judge.role_group_id, signer.sequenced_topic),
        (judge.role_group_id, signer.answers_topic),
    ]
    with role_threads(signer, *shards, judge):
        assert len(read_committed(stage.bootstrap, stage.output_topic, len(corpus))) == len(corpus)
        for group, topic in read:
            wait_until(
                lambda group=group, topic=topic: (
                    set(lag_seen_from_outside(stage.bootstrap, group, topic).values()) == {0}
                ),
                60,
                f"{group}'s committed offsets of {topic} to reach its ends",
            )


class ReplayReports(WorkerEvents):
    """A shard's roles and the replay's remaining records it reported, in order."""

    def __init__(self) -> None:
        self.reports: list[Role | int] = []

    def role_changed(self, role: Role, reason: str) -> None:
        self.reports.append(role)

    def replay_progress(self, documents: int, remaining_records: int) -> None:
        self.reports.append(remaining_records)

    def remaining_as(self, role: Role) -> int | None:
        """The last remaining records reported since the shard last became ``role``."""
        since = len(self.reports) - self.reports[::-1].index(role) if role in self.reports else len(self.reports)
        return next((n for n in reversed(self.reports[since:]) if isinstance(n, int)), None)


def test_a_shard_quiet_past_the_markers_has_nothing_left_to_replay_standing_by_or_taking_over(stage: Stage) -> None:
    # A shard's index ends at its last batch, before the marker the committed offset passes once the stage is
    # quiet: measured from the index's end, a standby and a shard that took over had 1 record to replay for good.
    corpus = make_clustered_corpus(60, seed=27)
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    roles = dict(batch_size=50, index_slots=6, shards=2)
    signer = stage.settings("signer-1", role="signer", **roles)
    shard = stage.settings("shard-0", role="shard", shard_index=0, **roles)
    reports = ReplayReports()
    with (
        role_threads(signer, stage.settings("shard-1", role="shard", shard_index=1, **roles)),
        role_threads(stage.settings("judge-1", role="judge", **roles)),
        contextlib.ExitStack() as active,
    ):
        active.enter_context(role_threads(shard))
        assert len(read_committed(stage.bootstrap, stage.output_topic, len(corpus))) == len(corpus)
        wait_until(
            lambda: (
                set(lag_seen_from_outside(stage.bootstrap, shard.role_group_id, signer.sequenced_topic).values()) == {0}
            ),
            60,
            "shard 0 to commit past the sequenced topic's markers",
        )
        # A standby started now tails up to that committed offset.
        with role_threads(stage.settings("shard-0b", role="shard", shard_index=0, **roles), events=reports):
            wait_until(lambda: reports.remaining_as("standby") == 0, 30, "the standby to have nothing left to replay")
            active.close()  # shard 0 leaves its group: the standby takes over
            wait_until(lambda: reports.remaining_as("active") == 0, 30, "the new active to have nothing to replay")
