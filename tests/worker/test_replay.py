"""The changelog's catch-up at restore: a replay that moves is never cut short; one that is stuck is."""

import logging
import time
from typing import Any, NamedTuple

import numpy as np
import pytest
from kafka import TopicPartition

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from stream_dedup.errors import ChangelogError, ReplayTimeoutError
from stream_dedup.kafka import clients
from stream_dedup.kafka.changelog import ChangelogEntry, encode_entry
from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.lsh import IndexedBatch
from stream_dedup.ops.http import Health, OpsServer
from stream_dedup.ops.metrics import WorkerMetrics
from stream_dedup.ops.runtime import MetricsEvents
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.replay import ChangelogReplay, ReplayStoppedError
from tests.ops.test_http import get


class CrawlingConsumer:
    """A changelog of ``END`` offsets (commit markers only: no record) served ``step`` offsets a poll, slowly."""

    END = 12
    step = 1

    def __init__(self, **options: Any) -> None:
        self._position = 0

    def assign(self, partitions: list[Any]) -> None:
        pass

    def seek(self, partition: Any, offset: int) -> None:
        self._position = offset

    def position(self, partition: Any) -> int:
        return self._position

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0}

    def beginning_offsets(self, partitions: list[Any]) -> dict[Any, int]:
        return dict.fromkeys(partitions, 0)

    def end_offsets(self, partitions: list[Any]) -> dict[Any, int]:
        return dict.fromkeys(partitions, self.END)

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[Any]]:
        time.sleep(0.05)
        self._position = min(self.END, self._position + self.step)
        return {}


@pytest.fixture
def changelog(monkeypatch: pytest.MonkeyPatch) -> ChangelogReplay:
    monkeypatch.setattr(clients, "KafkaConsumer", CrawlingConsumer)
    return ChangelogReplay(KafkaConnection("127.0.0.1:9"), "changelog", "documents", "", 0, {}, WorkerEvents())


def test_a_replay_that_keeps_moving_outlasts_the_stall_time(
    changelog: ChangelogReplay, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(CrawlingConsumer, "step", 1)
    started = time.monotonic()
    assert changelog.catch_up(make_detector(DetectionConfig()), stall_seconds=0.2) == 0
    assert time.monotonic() - started > 0.5  # 12 polls of 0.05 s: longer than 0.2 s in all, never 0.2 s still


def test_a_restore_whose_replay_keeps_moving_is_alive_for_the_liveness_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clients, "KafkaConsumer", CrawlingConsumer)
    monkeypatch.setattr(CrawlingConsumer, "step", 1)
    metrics, health = WorkerMetrics(), Health(liveness_timeout_seconds=0.3)
    events = MetricsEvents(metrics, health)
    replay = ChangelogReplay(KafkaConnection("127.0.0.1:9"), "changelog", "documents", "", 0, {}, events)

    with OpsServer("127.0.0.1", 0, metrics, health) as server:
        replay.catch_up(make_detector(DetectionConfig()), stall_seconds=5.0)  # 12 polls of 0.05 s: 0.6 s in all

        assert get(server, "/healthz").status == 200


def test_a_replay_that_stops_moving_is_cut_after_the_stall_time(
    changelog: ChangelogReplay, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(CrawlingConsumer, "step", 0)
    with pytest.raises(ReplayTimeoutError, match="stuck at offset 0 of 12 for 0 s"):
        changelog.catch_up(make_detector(DetectionConfig()), stall_seconds=0.2)


class DamagedRecord(NamedTuple):
    offset: int
    value: bytes


class DamagingConsumer(CrawlingConsumer):
    """A changelog whose record at offset 7 is cut short."""

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[Any]]:
        return {TopicPartition("changelog", 0): [DamagedRecord(7, b"SDCL\x02\x05")]}


def test_a_damaged_record_stops_the_replay_naming_where_it_is_and_what_to_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(clients, "KafkaConsumer", DamagingConsumer)
    replay = ChangelogReplay(KafkaConnection("127.0.0.1:9"), "changelog", "documents", "", 0, {}, WorkerEvents())

    with pytest.raises(ChangelogError, match="topic 'changelog' partition 0 offset 7: the changelog record is damaged"):
        replay.catch_up(make_detector(DetectionConfig()))


class SettingsConsumer(CrawlingConsumer):
    """A changelog of four batches, judged under the settings of ``made_under`` in turn, one per poll."""

    made_under: tuple[DetectionConfig, ...] = ()

    def poll(self, timeout_ms: int, max_records: int) -> dict[Any, list[Any]]:
        if self._position >= len(self.made_under):
            return {}
        config = self.made_under[self._position]
        detector = make_detector(config)
        batch = IndexedBatch(
            [f"d{self._position}"], detector.sign(["some text"]), np.zeros(1), np.zeros(1, dtype=np.uint64)
        )
        entry = ChangelogEntry(batch, "documents", {0: self._position + 1}, settings=config.verdict_settings())
        (value,) = encode_entry(entry, config.signature_fingerprint())
        self._position += 1
        return {TopicPartition("changelog", 0): [DamagedRecord(self._position - 1, value)]}


def test_batches_judged_under_other_settings_are_named_in_a_warning_each_time_that_changes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    ours = DetectionConfig()
    theirs = DetectionConfig(threshold=0.795, max_bucket_size=50)  # the same signatures
    monkeypatch.setattr(clients, "KafkaConsumer", SettingsConsumer)
    monkeypatch.setattr(SettingsConsumer, "made_under", (theirs, theirs, ours, theirs))
    monkeypatch.setattr(SettingsConsumer, "END", 4)
    replay = ChangelogReplay(
        KafkaConnection("127.0.0.1:9"),
        "changelog",
        "documents",
        ours.signature_fingerprint(),
        0,
        {},
        WorkerEvents(),
        ours.verdict_settings(),
    )

    with caplog.at_level(logging.WARNING, logger="stream_dedup.worker.replay"):
        assert replay.catch_up(make_detector(ours)) == 4

    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings
    assert "other detection settings (threshold 0.795 -> 0.8, max_bucket_size 50 -> 64)" in warnings[0]


def test_a_stop_asked_for_cuts_a_replay_short_rather_than_let_it_run_out_the_grace_period(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A replica restoring a large index in a rolling update: the replay ran on until the grace period's exit 1.
    monkeypatch.setattr(clients, "KafkaConsumer", CrawlingConsumer)
    monkeypatch.setattr(CrawlingConsumer, "step", 1)
    asked = time.monotonic() + 0.2
    replay = ChangelogReplay(
        KafkaConnection("127.0.0.1:9"),
        "changelog",
        "documents",
        "",
        0,
        {},
        WorkerEvents(),
        stopping=lambda: time.monotonic() > asked,
    )
    with pytest.raises(ReplayStoppedError, match=r"stopped while replaying changelog changelog at offset [1-9]"):
        replay.catch_up(make_detector(DetectionConfig()))
    assert replay.applied_offset == 0  # and what the index holds is not taken as the changelog's end
