"""Restoring the index at the start of a session: the newest usable snapshot, then the changelog after it.

The changelog alone can rebuild the index; a snapshot only shortens the
replay. So a snapshot is used only if the changelog still holds everything
after it (and nothing before it is missing), and anything else falls back
to an older snapshot or to a full replay.
"""

import logging
import time
from collections.abc import Callable

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.engine.snapshot import load_snapshot
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.replay import ChangelogReplay
from stream_dedup.worker.settings import WorkerSettings
from stream_dedup.worker.snapshot_store import SnapshotCoverage, SnapshotSchedule, SnapshotStore, continued_by
from stream_dedup.worker.working_heartbeat import heartbeats_while_working

log = logging.getLogger(__name__)


def restore(
    settings: WorkerSettings,
    store: SnapshotStore,
    replay: ChangelogReplay,
    events: WorkerEvents,
    detector_factory: Callable[[DetectionConfig], DuplicateDetector],
) -> tuple[DuplicateDetector, SnapshotSchedule]:
    """The index as of the changelog's end, and the schedule of the next snapshot (due from the one loaded).

    ``detector_factory`` makes the empty index of a full replay. Leaves
    ``replay`` positioned after the last batch it applied.
    """
    s = settings
    events.role_changed("restoring", "restoring state from snapshot and changelog")
    started = time.perf_counter()
    schedule = SnapshotSchedule(s.snapshot_interval_seconds, s.snapshot_every_documents)
    first, end = replay.bounds()
    usable = continued_by("changelog", first, end, "the changelog's end")
    topic_id = replay.topic_id()
    with heartbeats_while_working(events):  # minutes for a large index, with no poll to heartbeat
        loaded = store.load_newest(lambda path: load_snapshot(path, s.detection), s.changelog_topic, usable, topic_id)
    if loaded is None:
        log.info("no usable snapshot: replaying the whole changelog (offsets %d..%d)", first, end)
        detector = detector_factory(s.detection)
        replay.skip_to(first, {})
    else:
        detector, coverage = loaded
        warn_of_changed_settings(coverage, s.detection)
        replay.skip_to(coverage.changelog_offset, coverage.positions, coverage.input_topic_id)
        schedule.covers(coverage.changelog_offset, detector)
        events.snapshot_current(coverage.written_at)
    replayed = replay.catch_up(detector)
    if len(detector) == 0:
        schedule.covers(replay.applied_offset, detector)  # nothing worth a snapshot yet
        events.snapshot_current(time.time())  # an empty index needs no snapshot to be whole
    report_index(events, detector)
    log.info(
        "restored %d documents (%d replayed from the changelog) in %.2f s",
        len(detector),
        replayed,
        time.perf_counter() - started,
    )
    return detector, schedule


def warn_of_changed_settings(coverage: SnapshotCoverage, running: DetectionConfig) -> None:
    """Log a WARNING naming each verdict setting the snapshot was made under that ``running`` changes.

    Restoring under them is legitimate (an index of the snapshot's signatures
    runs under them), but verdicts of two ``params_fingerprint`` then stand on
    the output topic, and the log must say why.
    """
    changed = coverage.settings_changed(running.verdict_settings())
    if changed is not None:
        log.warning(
            "the snapshot was made under other detection settings (%s): verdicts from here on follow "
            "this run's (params_fingerprint %s)",
            changed,
            running.fingerprint(),
        )


def report_index(events: WorkerEvents, detector: DuplicateDetector) -> None:
    """Tell the listeners the index's size after it changed outside a batch (restored, replayed, taken over)."""
    events.index_changed(len(detector), detector.memory_bytes(), detector.evicted_documents)
