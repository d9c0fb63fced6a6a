"""The snapshot store: when a snapshot is due, and which one a restore loads."""

import json
import logging
import os
import shutil
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.engine.detector import Detector
from stream_dedup.engine.sharding import ShardDetector, sequence_keys
from stream_dedup.engine.snapshot import Snapshotted, load_shard_snapshot, load_snapshot
from stream_dedup.errors import ConfigError, IncompatibleSnapshotError
from stream_dedup.lsh import IndexedBatch
from stream_dedup.worker.snapshot_store import SnapshotCoverage, SnapshotSchedule, SnapshotStore, write_failure
from tests.corpus import make_corpus

TOPIC = "stage.changelog"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def add_documents(detector: Detector, count: int, first: int) -> None:
    detector.process([f"new{i}" for i in range(first, first + count)], make_corpus(count, seed=first))


def whole_index(config: DetectionConfig) -> Callable[[Path], tuple[DuplicateDetector, dict[str, Any]]]:
    return lambda path: load_snapshot(path, config)


def shard_part(
    config: DetectionConfig, shard: int, shards: int
) -> Callable[[Path], tuple[ShardDetector, dict[str, Any]]]:
    return lambda path: load_shard_snapshot(path, config, shard, shards)


def write(
    store: SnapshotStore, detector: Snapshotted, offset: int, topic: str = TOPIC, topic_id: str | None = None
) -> None:
    failures: list[BaseException] = []
    coverage = SnapshotCoverage(topic, offset, {0: offset * 10}, topic_id=topic_id)
    store.write(detector, coverage, lambda *_: None, failures.append)
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
    loaded = store.load_newest(whole_index(DetectionConfig()), TOPIC, always)
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
    loaded = store.load_newest(whole_index(DetectionConfig()), TOPIC, always)
    assert loaded is not None and loaded[1].changelog_offset == 10


def test_a_snapshot_the_caller_cannot_use_is_skipped(tmp_path: Path, detector: Detector) -> None:
    store = SnapshotStore(tmp_path, kept=3)
    write(store, detector, offset=10)
    write(store, detector, offset=20)
    loaded = store.load_newest(
        whole_index(DetectionConfig()), TOPIC, lambda c: "past the end" if c.changelog_offset > 15 else None
    )
    assert loaded is not None and loaded[1].changelog_offset == 10


def test_a_snapshot_of_another_changelog_is_skipped(tmp_path: Path, detector: Detector) -> None:
    store = SnapshotStore(tmp_path, kept=3)
    write(store, detector, offset=10, topic="other.changelog")
    assert store.load_newest(whole_index(DetectionConfig()), TOPIC, always) is None


def test_another_groups_snapshot_past_this_changelogs_end_is_said_to_be_another_groups(
    tmp_path: Path, detector: Detector, caplog: pytest.LogCaptureFixture
) -> None:
    """A new group's first start in a directory it shares with an older group: the older group's snapshot
    covers offsets past this new changelog's end. Saying "past the changelog's end" read as this changelog
    having lost batches; what is true is that the snapshot is another group's."""
    store = SnapshotStore(tmp_path, kept=3)
    write(store, detector, offset=241, topic="other.changelog")

    with caplog.at_level(logging.WARNING):
        loaded = store.load_newest(whole_index(DetectionConfig()), TOPIC, lambda _: "past the changelog's end 0")

    assert loaded is None
    assert "it covers changelog 'other.changelog', not 'stage.changelog'" in caplog.text
    assert "past the changelog's end" not in caplog.text


def test_another_groups_snapshot_of_other_signature_parameters_is_skipped_not_refused(
    tmp_path: Path, detector: Detector, caplog: pytest.LogCaptureFixture
) -> None:
    """Two groups sharing one snapshot_dir (the default ``snapshots`` of one working directory).

    The other group's snapshot says nothing of this changelog, whatever its
    parameters: refusing it stopped a new group (exit 1, "run with a new
    group_id", which met the same file again).
    """
    store = SnapshotStore(tmp_path, kept=3)
    write(store, detector, offset=10, topic="other.changelog")

    with caplog.at_level(logging.WARNING):
        loaded = store.load_newest(whole_index(DetectionConfig(shingle_size=7)), TOPIC, always)

    assert loaded is None
    assert "it covers changelog 'other.changelog', not 'stage.changelog'" in caplog.text
    assert "give each its own snapshot_dir" in caplog.text


def test_a_snapshot_of_a_topic_deleted_since_is_removed_and_an_older_one_of_the_topic_now_loaded(
    tmp_path: Path, detector: Detector, caplog: pytest.LogCaptureFixture
) -> None:
    """A changelog deleted and created again under its name: the old snapshots' offsets mean nothing in it."""
    store = SnapshotStore(tmp_path, kept=5)
    write(store, detector, offset=4, topic_id="new-id")
    write(store, detector, offset=7)  # written before snapshots said which topic: taken as it is
    write(store, detector, offset=11, topic_id="old-id")

    with caplog.at_level(logging.WARNING):
        loaded = store.load_newest(whole_index(DetectionConfig()), TOPIC, always, topic_id="new-id")

    assert loaded is not None and loaded[1].changelog_offset == 7
    assert [p.name for p in store.paths()] == ["snapshot-000000000007.sds", "snapshot-000000000004.sds"]
    assert "deleted since (topic id old-id, now new-id)" in caplog.text
    # Brokers that send no ids: nothing to compare, every snapshot of the name is taken.
    write(store, detector, offset=11, topic_id="old-id")
    loaded = store.load_newest(whole_index(DetectionConfig()), TOPIC, always, topic_id=None)
    assert loaded is not None and loaded[1].changelog_offset == 11 and loaded[1].topic_id == "old-id"


def test_what_is_no_snapshot_file_under_a_snapshot_name_is_skipped(tmp_path: Path, detector: Detector) -> None:
    store = SnapshotStore(tmp_path, kept=5)
    write(store, detector, offset=10)
    (tmp_path / "snapshot-000000000030.sds").mkdir()
    (tmp_path / "snapshot-000000000020.sds").symlink_to(tmp_path / "gone")

    loaded = store.load_newest(whole_index(DetectionConfig()), TOPIC, always)

    assert loaded is not None and loaded[1].changelog_offset == 10


def test_no_snapshot_at_all_means_a_full_replay(tmp_path: Path) -> None:
    assert SnapshotStore(tmp_path / "fresh", kept=2).load_newest(whole_index(DetectionConfig()), TOPIC, always) is None


def test_a_snapshot_of_other_signature_parameters_is_refused(tmp_path: Path, detector: Detector) -> None:
    store = SnapshotStore(tmp_path, kept=3)
    write(store, detector, offset=10)
    with pytest.raises(IncompatibleSnapshotError):
        store.load_newest(whole_index(DetectionConfig(shingle_size=7)), TOPIC, always)


def test_only_the_newest_snapshots_are_kept(tmp_path: Path, detector: Detector) -> None:
    store = SnapshotStore(tmp_path, kept=2)
    for offset in (10, 20, 30):
        write(store, detector, offset=offset)
    assert [p.name for p in store.paths()] == ["snapshot-000000000030.sds", "snapshot-000000000020.sds"]


@pytest.mark.parametrize("kind", ["empty file", "directory"])
def test_what_is_named_past_the_snapshot_written_never_has_it_pruned(
    tmp_path: Path, detector: Detector, kind: str
) -> None:
    """A file no start can load (or another group's) under a name past ours is not one of the ``kept``.

    Counted among them, with ``snapshots_kept=1`` it had every snapshot
    written removed at once, while the writes were said to succeed: every
    restart replayed the whole changelog.
    """
    store = SnapshotStore(tmp_path, kept=1)
    unusable = tmp_path / "snapshot-000000099999.sds"
    unusable.mkdir() if kind == "directory" else unusable.write_bytes(b"")
    for offset in (10, 20):
        write(store, detector, offset=offset)

    loaded = store.load_newest(whole_index(DetectionConfig()), TOPIC, always)

    assert loaded is not None and loaded[1].changelog_offset == 20
    assert [p.name for p in store.paths()] == [unusable.name, "snapshot-000000000020.sds"]


def test_an_old_snapshot_that_cannot_be_removed_is_said_and_fails_no_write(
    tmp_path: Path, detector: Detector, caplog: pytest.LogCaptureFixture
) -> None:
    """A directory under an old snapshot's name failed every write after it (IsADirectoryError, naming nothing)."""
    store = SnapshotStore(tmp_path, kept=2)
    (tmp_path / "snapshot-000000000001.sds").mkdir()
    for offset in (10, 20, 30):
        write(store, detector, offset=offset)  # asserts that none failed

    assert [p.name for p in store.paths()] == [
        "snapshot-000000000030.sds",
        "snapshot-000000000020.sds",
        "snapshot-000000000001.sds",
    ]
    assert "cannot remove the old snapshot " + str(tmp_path / "snapshot-000000000001.sds") in caplog.text


SLOTS = DetectionConfig(index_slots=6)


def shard_with_documents(shard: int, shards: int) -> ShardDetector:
    """Shard ``shard`` of ``shards`` after one batch of 20 documents at offset 3."""
    part = ShardDetector(SLOTS, shard, shards)
    texts = make_corpus(20, seed=3)
    batch = IndexedBatch(
        [f"d{i}" for i in range(20)], part.detector.sign(texts), np.zeros(20), np.arange(20, dtype=np.uint64)
    )
    part.answer(batch, sequence_keys(3, 20))
    return part


@pytest.mark.parametrize(
    ("setting", "shard", "shards", "config"),
    [
        ("shards", 1, 3, SLOTS),
        ("shard_index", 0, 2, SLOTS),
        ("index_slots", 1, 2, DetectionConfig(index_slots=12)),
        ("shingle_size", 1, 2, DetectionConfig(index_slots=6, shingle_size=7)),
    ],
)
def test_a_snapshot_of_another_shard_is_skipped_with_a_warning_naming_the_setting(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, setting: str, shard: int, shards: int, config: DetectionConfig
) -> None:
    store = SnapshotStore(tmp_path, kept=3)
    write(store, shard_with_documents(1, 2), offset=10)
    with caplog.at_level(logging.WARNING):
        assert store.load_newest(shard_part(config, shard, shards), TOPIC, always) is None
    (warning,) = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "skipped" in warning.getMessage() and f"{setting}=" in warning.getMessage()


def test_a_shard_loads_its_own_newest_snapshot_and_skips_a_corrupt_one(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path, kept=3)
    part = shard_with_documents(1, 2)
    write(store, part, offset=10)
    write(store, part, offset=20)
    newest = store.paths()[0]
    damaged = bytearray(newest.read_bytes())
    damaged[len(damaged) // 2] ^= 1
    newest.write_bytes(bytes(damaged))
    loaded = store.load_newest(shard_part(SLOTS, 1, 2), TOPIC, always)
    assert loaded is not None
    restored, coverage = loaded
    assert coverage.changelog_offset == 10
    assert len(restored) == len(part) > 0
    assert len(restored.stream) == len(part.stream) == 20


def test_a_whole_index_and_a_shard_never_load_each_others_snapshots(tmp_path: Path, detector: Detector) -> None:
    store = SnapshotStore(tmp_path, kept=3)
    write(store, shard_with_documents(0, 1), offset=20)
    write(store, detector, offset=10)
    loaded = store.load_newest(whole_index(SLOTS), TOPIC, always)
    assert loaded is not None and loaded[1].changelog_offset == 10
    loaded_shard = store.load_newest(
        shard_part(SLOTS, 0, 1), TOPIC, lambda c: None if c.changelog_offset == 10 else "no"
    )
    assert loaded_shard is None


def test_a_snapshot_says_which_verdict_settings_changed_since_it_was_made(tmp_path: Path, detector: Detector) -> None:
    # 0.8 and 0.795 choose the same banding: the index loads, and the operator hears the verdicts change.
    made_with = DetectionConfig(threshold=0.8)
    running = DetectionConfig(threshold=0.795, max_documents=1000)
    assert made_with.banding() == running.banding()
    store = SnapshotStore(tmp_path, kept=3)
    failures: list[BaseException] = []
    coverage = SnapshotCoverage(TOPIC, 20, {0: 200}, settings=made_with.verdict_settings())
    store.write(detector, coverage, lambda *_: None, failures.append)
    assert not failures

    loaded = store.load_newest(whole_index(running), TOPIC, always)

    assert loaded is not None
    _, restored = loaded
    assert restored.settings_changed(made_with.verdict_settings()) is None
    assert restored.settings_changed(running.verdict_settings()) == "max_documents None -> 1000, threshold 0.8 -> 0.795"
    assert SnapshotCoverage(TOPIC, 20, {}).settings_changed(running.verdict_settings()) is None  # an older snapshot


def test_what_writes_that_died_left_is_removed_when_the_store_opens(tmp_path: Path, detector: Detector) -> None:
    """A process killed while writing a snapshot (kill -9, the OOM killer, the grace period's exit) leaves its
    temporary, as large as a snapshot: each crash left one more, until the volume was full."""
    finished = subprocess.Popen(["true"])
    assert finished.wait() == 0  # its pid is free now
    dead = [
        tmp_path / f".snapshot-000000000010.sds.tmp-{finished.pid}-7",
        tmp_path / f".snapshot-000000000020.sds.tmp-{os.getpid()}-1",  # a container's pid 1, reused
    ]
    alive = [
        tmp_path / f".snapshot-000000000030.sds.tmp-{os.getppid()}-7",  # another process, writing now
        tmp_path / f".snapshot-000000000040.sds.tmp-{os.getpid()}-{threading.get_ident()}",
        tmp_path / "notes.tmp-1-1",
    ]
    write(SnapshotStore(tmp_path, kept=2), detector, offset=5)
    for path in (*dead, *alive):
        path.write_bytes(b"SDEDUPSN half a snapshot")

    store = SnapshotStore(tmp_path, kept=2)

    assert [p for p in dead if p.exists()] == []
    assert all(p.exists() for p in alive)
    assert [p.name for p in store.paths()] == ["snapshot-000000000005.sds"]


def test_a_snapshot_directory_removed_while_the_stage_runs_is_made_again_by_the_next_write(
    tmp_path: Path, detector: Detector
) -> None:
    """An operator freeing the volume (``rm -rf snapshots``) under a running stage: every later snapshot,
    the final one included, failed with FileNotFoundError until a restart, which then replayed everything."""
    store = SnapshotStore(tmp_path / "snapshots", kept=2)
    write(store, detector, offset=10)
    shutil.rmtree(tmp_path / "snapshots")

    write(store, detector, offset=20)

    assert [p.name for p in store.paths()] == ["snapshot-000000000020.sds"]


def test_a_snapshot_dir_that_is_a_file_is_refused_naming_the_setting(tmp_path: Path) -> None:
    taken = tmp_path / "snapshots"
    taken.write_text("not a directory")
    with pytest.raises(ConfigError, match=f"'snapshot_dir': cannot make the snapshot directory {taken}: File exists"):
        SnapshotStore(taken, kept=2)


def test_a_coverage_keeps_every_field_through_the_snapshot_metadata() -> None:
    # (written_at is the file's, not the metadata's.)
    coverage = SnapshotCoverage(
        TOPIC, 20, {0: 200, 2: 7}, settings={"threshold": 0.8}, topic_id="changelog-id", input_topic_id="input-id"
    )
    assert SnapshotCoverage.of_metadata(json.loads(json.dumps(coverage.to_metadata()))) == coverage
    older = {key: value for key, value in coverage.to_metadata().items() if key != "input_topic_id"}
    assert SnapshotCoverage.of_metadata(older).input_topic_id is None  # made before the field existed


def test_a_failed_write_is_said_naming_the_path_in_the_way(tmp_path: Path, detector: Detector) -> None:
    """A directory under the name the snapshot goes to (a quiet stage writes the same offset again and again)."""
    store = SnapshotStore(tmp_path, kept=2)
    (tmp_path / "snapshot-000000000010.sds").mkdir()
    failures: list[BaseException] = []
    store.write(detector, SnapshotCoverage(TOPIC, 10, {}), lambda *_: None, failures.append)

    (failure,) = failures
    said = write_failure(failure)
    assert said.startswith("IsADirectoryError: ") and str(tmp_path / "snapshot-000000000010.sds") in said, said
