"""Local snapshots of the index: when one is due, written in the background, loaded newest-valid-first.

A snapshot is an optimisation: the changelog topic alone can rebuild the
index, a snapshot only saves replaying all of it. So a damaged snapshot is
skipped (loudly) for the one before it, or for a full replay, and never
loaded. The same store keeps a shard's snapshots (``roles.shard``), whose
changelog is the sequenced topic.

Files are named after the changelog offset they cover
(``snapshot-000000001234.sds``), so the newest is the one covering most of
the changelog, whatever the clocks say.
"""

import logging
import threading
import time
from collections.abc import Callable, Sized
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol, TypeVar

from stream_dedup.config import settings_changes
from stream_dedup.engine.snapshot import (
    SnapshotImage,
    Snapshotted,
    abandoned_temporaries,
    capture_snapshot,
    malformed_as_corrupt,
    read_snapshot_metadata,
)
from stream_dedup.errors import (
    ConfigError,
    CorruptSnapshotError,
    ForeignSnapshotError,
    IncompatibleSnapshotError,
    SnapshotError,
)

log = logging.getLogger(__name__)

_PATTERN = "snapshot-*.sds"
#: Said of a snapshot of another changelog: stages sharing a directory overwrite and prune each other's files.
_SHARED = (
    ": another group's (groups sharing a snapshot directory overwrite and prune each other's snapshots: "
    "give each its own snapshot_dir)"
)


@dataclass(frozen=True)
class SnapshotCoverage:
    """What a snapshot covers: the changelog up to ``changelog_offset`` (exclusive), and the input positions then."""

    changelog_topic: str
    changelog_offset: int
    positions: dict[int, int]
    written_at: float = 0.0
    #: The detection settings that decided the verdicts so far (``DetectionConfig.verdict_settings``),
    #: if the snapshot says (those written before it did do not).
    settings: dict[str, Any] | None = None
    #: Kafka's id of the changelog topic, if the brokers said: a topic deleted and created again under
    #: its name is another log, whose offsets the snapshot does not cover.
    topic_id: str | None = None
    #: Kafka's id of the input topic whose offsets ``positions`` are, if known (see ``kafka.input_identity``).
    input_topic_id: str | None = None

    def to_metadata(self) -> dict[str, Any]:
        return {
            "changelog_topic": self.changelog_topic,
            "changelog_offset": self.changelog_offset,
            "positions": {str(p): o for p, o in self.positions.items()},
            "settings": self.settings,
            "topic_id": self.topic_id,
            "input_topic_id": self.input_topic_id,
        }

    @classmethod
    def of_metadata(cls, metadata: dict[str, Any]) -> "SnapshotCoverage":
        return cls(
            str(metadata["changelog_topic"]),
            int(metadata["changelog_offset"]),
            {int(p): int(o) for p, o in metadata["positions"].items()},
            settings=metadata.get("settings"),
            topic_id=metadata.get("topic_id"),
            input_topic_id=metadata.get("input_topic_id"),
        )

    def settings_changed(self, running: dict[str, Any]) -> str | None:
        """The settings that decide verdicts and differ from the snapshot's, said for a log; None if none do.

        Only settings an index of the snapshot's signatures can run under
        differ here (a threshold that keeps the banding, retention, the cap):
        the others refuse the snapshot. Legitimate, but the verdicts change
        from here on, and an operator should hear it.
        """
        return None if self.settings is None else settings_changes(self.settings, running)


def continued_by(log: str, first: int, end: int, end_name: str) -> Callable[[SnapshotCoverage], str | None]:
    """Whether ``log``, holding offsets from ``first``, continues a snapshot up to ``end``: why not, or None.

    A snapshot past ``end`` (named ``end_name`` in the reason) holds batches
    that must not be skipped; one before ``first`` misses what retention deleted.
    """

    def usable(coverage: SnapshotCoverage) -> str | None:
        if coverage.changelog_offset > end:
            return f"it covers {log} offset {coverage.changelog_offset}, past {end_name} {end}"
        if coverage.changelog_offset < first:
            return f"the {log} no longer holds offsets {coverage.changelog_offset}..{first} after it"
        return None

    return usable


def _changelog_of(path: Path) -> str | None:
    """The changelog a snapshot says it covers; None if it cannot be read or does not say."""
    try:
        return str(read_snapshot_metadata(path)["changelog_topic"])
    except (SnapshotError, OSError, KeyError):
        return None


class Indexed(Protocol):
    """What a schedule counts: documents held, and documents evicted so far."""

    def __len__(self) -> int: ...

    @property
    def evicted_documents(self) -> int: ...


class SnapshotSchedule:
    """When the next snapshot is due: ``interval_seconds`` after the last, or ``every_documents`` documents later.

    Documents are counted as ever indexed (held plus evicted by retention), so
    that an index evicting as fast as it takes documents in still gets its
    snapshots, and a restart never replays more than ``every_documents``. A
    shard counts the documents of the whole stream (``ShardDetector.stream``):
    it replays all of them, not only those it stores.

    Attributes:
        covered_offset: changelog offset the newest snapshot covers (-1: none yet).
    """

    def __init__(
        self, interval_seconds: float, every_documents: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.interval_seconds = interval_seconds
        self.every_documents = every_documents
        self.covered_offset = -1
        self._clock = clock
        self._since = clock()
        self._documents = 0

    def due(self, detector: Indexed) -> bool:
        return (
            self._clock() - self._since >= self.interval_seconds
            or _indexed_ever(detector) - self._documents >= self.every_documents
        )

    def covers(self, changelog_offset: int, detector: Indexed) -> None:
        """The newest snapshot holds ``detector`` as of ``changelog_offset``: the next is due from now."""
        self.started(detector)
        self.written(changelog_offset)

    def started(self, detector: Indexed) -> None:
        """A snapshot of ``detector`` was begun, or found needless: the next is due from now, whatever comes of it.

        A write that fails (a full or read-only volume) is tried again at the
        next due time, not at every turn of the loop.
        """
        self._documents = _indexed_ever(detector)
        self._since = self._clock()

    def written(self, changelog_offset: int) -> None:
        """A snapshot up to ``changelog_offset`` is on disk (called from the thread that wrote it).

        Only then: a write that failed covers nothing, so the next due time
        writes again rather than call the older snapshot current (which
        set ``snapshot_last_success`` to now and hid the failing volume
        from the stale-snapshot alert), and the final one is not skipped.
        """
        self.covered_offset = changelog_offset


def _indexed_ever(detector: Indexed) -> int:
    return len(detector) + detector.evicted_documents


def write_failure(error: BaseException) -> str:
    """A failed write as a log says it: the error's type and its text.

    Its repr dropped the file an ``OSError`` names: a directory where the
    snapshot goes said ``IsADirectoryError(21, 'Is a directory')``, at every
    due time of a quiet stage, and not which path to move away.
    """
    return f"{type(error).__name__}: {error}"


#: Called when a background write ends: (seconds writing, seconds the caller paused, file size) or the error.
WriteDone = Callable[[float, float, int], None]
WriteFailed = Callable[[BaseException], None]
#: What a restore loads: a detector, a shard, anything with a size to report.
Loaded = TypeVar("Loaded", bound=Sized)


class SnapshotStore:
    """A directory of snapshots, at most one being written at a time."""

    def __init__(self, directory: str | Path, kept: int) -> None:
        self.directory = Path(directory)
        self.kept = kept
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:  # a file of that name, no permission: the setting is wrong, not the code
            raise ConfigError(
                "snapshot_dir", f"cannot make the snapshot directory {self.directory}: {error.strerror}"
            ) from error
        self._writer: threading.Thread | None = None
        self._remove_abandoned_writes()

    def _remove_abandoned_writes(self) -> None:
        """Remove what writes that died left (see :func:`abandoned_temporaries`): they would fill the volume."""
        for path in abandoned_temporaries(self.directory):
            log.warning("removing %s: a snapshot whose write died with its process", path)
            try:
                path.unlink(missing_ok=True)
            except OSError as error:  # a read-only volume: snapshot writes fail too, and say so
                log.warning("cannot remove %s: %r", path, error)

    def paths(self) -> list[Path]:
        """Snapshot files, newest (highest changelog offset) first."""
        return sorted(self.directory.glob(_PATTERN), reverse=True)

    def load_newest(
        self,
        load: Callable[[Path], tuple[Loaded, dict[str, Any]]],
        changelog_topic: str,
        usable: Callable[[SnapshotCoverage], str | None],
        topic_id: str | None = None,
    ) -> tuple[Loaded, SnapshotCoverage] | None:
        """The newest snapshot that ``load`` reads and ``usable`` accepts (it returns why not, or None).

        ``load`` is :func:`~stream_dedup.engine.snapshot.load_snapshot` or
        :func:`~stream_dedup.engine.snapshot.load_shard_snapshot` with the
        running settings. A corrupt file is reported and skipped, a foreign one
        (another shard's) skipped with a warning; a snapshot made with other
        signature parameters raises :class:`IncompatibleSnapshotError` from
        ``load`` (falling back would replay a changelog of the same,
        incomparable kind), unless ``load`` calls it foreign, or it covers
        another changelog (another group's, in a directory shared): that one
        is skipped with a warning, as with the running parameters.

        ``topic_id`` is the changelog topic's id now. A snapshot of a topic of
        that name deleted since (another id) covers offsets of a log that is
        gone: it is removed, since it can never be used again, and its offset,
        past the new topic's for a while, would keep it the newest while the
        new snapshots were pruned.
        """
        for path in self.paths():
            try:
                detector, metadata = load(path)
                with malformed_as_corrupt(path):
                    coverage = replace(SnapshotCoverage.of_metadata(metadata), written_at=path.stat().st_mtime)
            except ForeignSnapshotError as error:
                log.warning("snapshot %s skipped: %s", path, error)
                continue
            except IncompatibleSnapshotError:
                # Refused for its parameters, unless it is another changelog's: then they are not ours to judge.
                covered = _changelog_of(path)
                if covered in (None, changelog_topic):
                    raise
                log.warning(
                    "snapshot %s skipped: it covers changelog %r, not %r%s", path, covered, changelog_topic, _SHARED
                )
                continue
            except (CorruptSnapshotError, OSError) as error:
                log.error("snapshot %s is unusable, trying an older one: %r", path, error)
                continue
            recreated = coverage.changelog_topic == changelog_topic and None not in (coverage.topic_id, topic_id)
            if recreated and coverage.topic_id != topic_id:
                log.warning(
                    "snapshot %s removed: it covers an earlier topic %r, deleted since (topic id %s, now %s)",
                    path,
                    changelog_topic,
                    coverage.topic_id,
                    topic_id,
                )
                path.unlink(missing_ok=True)
                continue
            # Another changelog's first: its offsets say nothing of ours, and "past the changelog's end" of
            # another group's snapshot read as our changelog having lost batches.
            reason: str | None
            if coverage.changelog_topic != changelog_topic:
                reason = f"it covers changelog {coverage.changelog_topic!r}, not {changelog_topic!r}{_SHARED}"
            else:
                reason = usable(coverage)
            if reason is not None:
                log.warning("snapshot %s skipped: %s", path, reason)
                continue
            log.info(
                "loaded snapshot %s (%d documents, changelog offset %d)", path, len(detector), coverage.changelog_offset
            )
            return detector, coverage
        return None

    @property
    def writing(self) -> bool:
        return self._writer is not None and self._writer.is_alive()

    def write_in_background(
        self, detector: Snapshotted, coverage: SnapshotCoverage, done: WriteDone, failed: WriteFailed
    ) -> float:
        """Capture the detector now and write it on a thread; return how long the capture paused the caller."""
        started = time.perf_counter()
        image = capture_snapshot(detector, coverage.to_metadata())
        pause = time.perf_counter() - started
        self._writer = threading.Thread(
            target=self._write, args=(image, coverage, pause, done, failed), name="snapshot-writer", daemon=True
        )
        self._writer.start()
        return pause

    def write(self, detector: Snapshotted, coverage: SnapshotCoverage, done: WriteDone, failed: WriteFailed) -> None:
        """Capture and write on the caller's thread (at shutdown, when nothing else runs)."""
        started = time.perf_counter()
        image = capture_snapshot(detector, coverage.to_metadata())
        self._write(image, coverage, time.perf_counter() - started, done, failed)

    def _write(
        self, image: SnapshotImage, coverage: SnapshotCoverage, pause: float, done: WriteDone, failed: WriteFailed
    ) -> None:
        began = time.perf_counter()
        try:
            # Made again if removed under the running stage (a volume freed by hand): else every snapshot
            # after, the final one too, would fail until a restart.
            self.directory.mkdir(parents=True, exist_ok=True)
            path = self.directory / f"snapshot-{coverage.changelog_offset:012d}.sds"
            size = image.write(path)
            self._prune(path)
        except BaseException as error:  # reported, never fatal: the changelog still has everything
            failed(error)
            return
        done(time.perf_counter() - began, pause, size)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for a write in progress; return whether none is left running."""
        if self._writer is not None:
            self._writer.join(timeout)
        return not self.writing

    def _prune(self, written: Path) -> None:
        """Remove the snapshots before ``written`` but the ``kept`` newest (``written`` one of them).

        Only those before it: what is named past it was not loaded (damaged,
        a directory, another group's), and counted among the kept it had
        ``written`` removed at once with ``snapshots_kept=1`` (every restart
        then replayed the whole changelog). What cannot be removed (a
        directory) is said, and the snapshot written still counts as written:
        it failed every write after it.
        """
        for old in [path for path in self.paths() if path <= written][self.kept :]:
            try:
                old.unlink(missing_ok=True)
            except OSError as error:
                log.warning("cannot remove the old snapshot %s (move it away): %s", old, error.strerror)
