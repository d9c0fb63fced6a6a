"""The snapshot store: when a snapshot is due, and which one a restore loads."""

from pathlib import Path

import pytest

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import Detector
from stream_dedup.errors import IncompatibleSnapshotError
from stream_dedup.worker.snapshot_store import SnapshotCoverage, SnapshotSchedule, SnapshotStore
from tests.corpus import make_corpus

TOPIC = "stage.changelog"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def add_documents(detector: Detector, count: int, first: int) -> None:
    detector.process([f"new{i}" for i in range(first, first + count)], make_corpus(count, seed=first))


def write(store: SnapshotStore, detector: Detector, offset: int, topic: str = TOPIC) -> None:
    failures: list[BaseException] = []
    store.write(detector, SnapshotCoverage(topic, offset, {0: offset * 10}), lambda *_: None, failures.append)
    assert not failures


def always(_coverage: SnapshotCoverage) -> str | None:
    return None


def test_a_snapshot_is_due_after_the_interval(detector: Detector) -> None:
    clock = Clock()
    schedule = SnapshotSchedule(interval_seconds=300, every_documents=1000, clock=clock)
    schedule.covers(5, detector)
    clock.now += 299
    assert not schedule.due(detector)
    clock.now += 1
    assert schedule.due(detector)


def test_a_snapshot_is_due_after_enough_new_documents(detector: Detector) -> None:
    schedule = SnapshotSchedule(interval_seconds=300, every_documents=10, clock=Clock())
    schedule.covers(5, detector)
    add_documents(detector, 9, first=0)
    assert not schedule.due(detector)
    add_documents(detector, 1, first=9)
    assert schedule.due(detector)


def test_evicted_documents_still_count_towards_the_next_snapshot() -> None:
    detector = Detector(DetectionConfig(max_documents=8))
    schedule = SnapshotSchedule(interval_seconds=300, every_documents=30, clock=Clock())
    schedule.covers(0, detector)
    for first in range(0, 30, 5):  # retention drops whole generations, between batches
        add_documents(detector, 5, first=first)
    assert len(detector) < 30 and detector.index.evicted_documents > 0
    assert schedule.due(detector)


def test_a_covering_snapshot_restarts_both_counts(detector: Detector) -> None:
    clock = Clock()
    schedule = SnapshotSchedule(interval_seconds=300, every_documents=10, clock=clock)
    add_documents(detector, 10, first=0)
    clock.now += 300
    assert schedule.due(detector)
    schedule.covers(42, detector)
    assert schedule.covered_offset == 42
    assert not schedule.due(detector)


def test_the_newest_snapshot_is_loaded(tmp_path: Path, detector: Detector) -> None:
    store = SnapshotStore(tmp_path, kept=3)
    write(store, Detector(DetectionConfig()), offset=10)
    write(store, detector, offset=20)
    loaded = store.load_newest(DetectionConfig(), TOPIC, always)
    assert loaded is not None
    restored, coverage = loaded
    assert (coverage.changelog_topic, coverage.changelog_offset, coverage.positions) == (TOPIC, 20, {0: 200})
    assert coverage.written_at > 0
    assert len(restored) == len(detector) == 20
    # The same index: a document already held is found again as a duplicate of itself.
    (verdict,) = restored.process(["again"], make_corpus(20, seed=3)[:1])
    assert verdict.verdict == "duplicate"


def test_a_corrupt_snapshot_is_skipped_for_the_one_before(tmp_path: Path, detector: Detector) -> None:
    store = SnapshotStore(tmp_path, kept=3)
    write(store, detector, offset=10)
    write(store, detector, offset=20)
    newest = store.paths()[0]
    newest.write_bytes(newest.read_bytes()[:-100])
    loaded = store.load_newest(DetectionConfig(), TOPIC, always)
    assert loaded is not None and loaded[1].changelog_offset == 10


def test_a_snapshot_the_caller_cannot_use_is_skipped(tmp_path: Path, detector: Detector) -> None:
    store = SnapshotStore(tmp_path, kept=3)
    write(store, detector, offset=10)
    write(store, detector, offset=20)
    loaded = store.load_newest(DetectionConfig(), TOPIC, lambda c: "past the end" if c.changelog_offset > 15 else None)
    assert loaded is not None and loaded[1].changelog_offset == 10


def test_a_snapshot_of_another_changelog_is_skipped(tmp_path: Path, detector: Detector) -> None:
    store = SnapshotStore(tmp_path, kept=3)
    write(store, detector, offset=10, topic="other.changelog")
    assert store.load_newest(DetectionConfig(), TOPIC, always) is None


def test_no_snapshot_at_all_means_a_full_replay(tmp_path: Path) -> None:
    assert SnapshotStore(tmp_path / "fresh", kept=2).load_newest(DetectionConfig(), TOPIC, always) is None


def test_a_snapshot_of_other_signature_parameters_is_refused(tmp_path: Path, detector: Detector) -> None:
    store = SnapshotStore(tmp_path, kept=3)
    write(store, detector, offset=10)
    with pytest.raises(IncompatibleSnapshotError):
        store.load_newest(DetectionConfig(shingle_size=7), TOPIC, always)


def test_only_the_newest_snapshots_are_kept(tmp_path: Path, detector: Detector) -> None:
    store = SnapshotStore(tmp_path, kept=2)
    for offset in (10, 20, 30):
        write(store, detector, offset=offset)
    assert [p.name for p in store.paths()] == ["snapshot-000000000030.sds", "snapshot-000000000020.sds"]
