"""Replaying the changelog into a detector: at restore, and continuously on a standby.

The reader holds a plain (group-less) consumer on the changelog's single
partition, with ``read_committed`` so that batches of aborted transactions
are never replayed: the index must hold exactly what published verdicts saw.
"""

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kafka import KafkaAdminClient, TopicPartition
from kafka.admin import OffsetSpec

from stream_dedup.config import settings_changes
from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.errors import ChangelogError, ReplayTimeoutError
from stream_dedup.kafka.bounded_commit import MissingTopicError
from stream_dedup.kafka.changelog import ChangelogEntry, decode_entry, merge_parts
from stream_dedup.kafka.clients import KafkaConnection, partition_reader, topic_id
from stream_dedup.kafka.packed_arrays import record_at
from stream_dedup.worker.events import WorkerEvents

log = logging.getLogger(__name__)

#: Changelog records fetched per poll during a replay.
_RECORDS_PER_POLL = 64


class ReplayStoppedError(Exception):
    """A stop was asked for during a catch-up: the index holds only part of the changelog, and must not be used."""


class ChangelogReplay:
    """Applies committed changelog batches to a detector, in order, exactly once each.

    Attributes:
        applied_offset: changelog offset after the last batch applied (what a
            snapshot covers).
        positions: input partition -> next offset, as of that batch.
    """

    def __init__(
        self,
        connection: KafkaConnection,
        topic: str,
        input_topic: str,
        digest: str,
        start_offset: int,
        positions: dict[int, int],
        events: WorkerEvents,
        verdict_settings: Mapping[str, object] | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ) -> None:
        """``verdict_settings`` are this run's (``DetectionConfig.verdict_settings``): batches judged under
        others are named in a WARNING (a standby taking over, a restart, under a changed setting).
        ``stopping``: whether the process was asked to stop, which cuts a catch-up short."""
        self.partition = TopicPartition(topic, 0)
        self.input_topic = input_topic
        self.digest = digest
        self.applied_offset = start_offset
        self.positions = dict(positions)
        #: Kafka's id of the input topic whose offsets ``positions`` are, once a batch or snapshot said.
        self.input_topic_id: str | None = None
        self.events = events
        self._pending: list[ChangelogEntry] = []
        self.verdict_settings = verdict_settings
        self._stopping = stopping
        #: How the batches replayed last differed from this run's settings, as last said in a warning.
        self._settings_warned: str | None = None
        self._connection = connection
        #: Asks the changelog's high watermark (see holds_everything_written); made when first needed.
        self._admin: KafkaAdminClient | None = None
        self._consumer = partition_reader(
            connection,
            self.partition,
            start_offset,
            "earliest",
            fetch_max_bytes=64 << 20,
            max_partition_fetch_bytes=16 << 20,
        )

    def topic_id(self) -> str | None:
        """The changelog topic's id: which topic of that name a snapshot covers (see ``SnapshotCoverage``)."""
        return topic_id(self._consumer, self.partition.topic)

    def bounds(self) -> tuple[int, int]:
        """(first offset still kept, last stable offset) of the changelog.

        Raises :class:`MissingTopicError` at once if the changelog is gone:
        the offsets of a deleted topic are asked for 30 s (``request_timeout_ms``)
        before the client gives up, and a standby taking over from an active
        replica that died after the deletion waited that long before its next
        session stopped the process, naming the topic
        (:func:`~stream_dedup.worker.topics.refuse_lost_history`).
        """
        if not self._consumer.partitions_for_topic(self.partition.topic):
            raise MissingTopicError(f"changelog_topic {self.partition.topic!r} does not exist (deleted?)")
        first = self._consumer.beginning_offsets([self.partition])[self.partition]
        end = self._consumer.end_offsets([self.partition])[self.partition]
        return int(first), int(end)

    def catch_up(self, detector: DuplicateDetector, stall_seconds: float = 300.0) -> int:
        """Apply everything committed up to now; return the documents applied.

        Each poll that moves the position is a heartbeat (``/healthz``).
        Raises :class:`ReplayTimeoutError` if the position stops moving for
        ``stall_seconds``: a replay that moves is never cut short, however
        long it takes (a full replay of a large index without a snapshot
        takes minutes, and cutting it would have the restore start again and
        fail again, for ever). But a stop asked for cuts it, with
        :class:`ReplayStoppedError`: a replica stopped in a rolling update
        while it restores would otherwise wait out its grace period and exit 1.
        """
        _, end = self.bounds()
        applied = 0
        position = self._consumer.position(self.partition)
        deadline = time.monotonic() + stall_seconds
        while position < end:
            if self._stopping():
                raise ReplayStoppedError(
                    f"stopped while replaying changelog {self.partition.topic} at offset {position}"
                )
            if time.monotonic() > deadline:
                raise ReplayTimeoutError(
                    f"changelog {self.partition.topic} replay stuck at offset {position} of {end} "
                    f"for {stall_seconds:.0f} s: "
                    "check that the brokers serve that topic (the restore starts again when the process restarts)"
                )
            # A short poll: at the very end only a commit marker may be left, which returns no record.
            applied += self._apply(detector, self._consumer.poll(timeout_ms=100, max_records=_RECORDS_PER_POLL), end)
            moved_to = self._consumer.position(self.partition)
            if moved_to > position:
                position, deadline = moved_to, time.monotonic() + stall_seconds
                # A replay that moves is the process at work: without this, /healthz said "stalled" 60 s
                # into any restore, and a pod's liveness probe killed a restore longer than about two
                # minutes (the startup probe had passed at once), over and over. A stuck one is cut above.
                self.events.heartbeat()
        return applied

    def apply_available(self, detector: DuplicateDetector) -> int:
        """Apply whatever is already fetched or arrives at once (a standby's tailing)."""
        return self._apply(detector, self._consumer.poll(timeout_ms=0, max_records=_RECORDS_PER_POLL), None)

    def skip_to(self, offset: int, positions: dict[int, int], input_topic_id: str | None = None) -> None:
        """The caller applied the changelog up to ``offset`` itself (its own batches): do not replay them."""
        self.applied_offset = offset
        self.positions = dict(positions)
        self.input_topic_id = input_topic_id or self.input_topic_id
        self._consumer.seek(self.partition, offset)

    def holds_everything_written(self) -> bool:
        """Whether the replay has read past all the changelog holds, committed or not (its high watermark).

        A batch's changelog records are written before its transaction commits
        the group's offsets, so once they are seen, the records are in the
        log: behind the high watermark if not yet committed (the changelog's
        last stable offset, where a read_committed replay stops, waits for
        their marker). Offsets committed past ``positions``, asked before
        this, are then no batch's still to be replayed, but an operator's
        reset forward: waiting for the changelog to reach them would wait
        for nothing, ``transaction_timeout_seconds`` and 30 s more.
        """
        if self._admin is None:
            self._admin = KafkaAdminClient(**self._connection.options())
        written = self._admin.list_partition_offsets({self.partition: OffsetSpec.LATEST})[self.partition].offset
        return bool(self._consumer.position(self.partition) >= written)

    def close(self) -> None:
        self._consumer.close()
        if self._admin is not None:
            self._admin.close()

    def _apply(self, detector: DuplicateDetector, fetched: dict[Any, list[Any]], end: int | None) -> int:
        applied = 0
        for record in fetched.get(self.partition, []):
            with record_at(self.partition.topic, self.partition.partition, record.offset):
                entry = decode_entry(record.value, self.digest, verdict_settings=self.verdict_settings)
            if entry.input_topic != self.input_topic:
                raise ChangelogError(
                    f"changelog {self.partition.topic} belongs to input topic {entry.input_topic!r}, "
                    f"not {self.input_topic!r}; give each input its own changelog_topic"
                )
            self._pending.append(entry)
            if not entry.final:
                continue
            self._check_settings(entry)
            batch = merge_parts(self._pending)
            self._pending.clear()
            if batch.documents.ids:
                detector.process_signed(batch.documents)
            applied += len(batch.documents.ids)
            self.applied_offset = record.offset + 1
            self.positions.update(batch.positions)
            self.input_topic_id = batch.input_topic_id or self.input_topic_id
        if applied:
            remaining = 0 if end is None else max(0, end - self._consumer.position(self.partition))
            self.events.replay_progress(applied, remaining)
        return applied

    def _check_settings(self, entry: ChangelogEntry) -> None:
        """Warn once batches come judged under other verdict settings than this run's, and when that changes.

        Legitimate (an index of the same signatures runs under them), but the
        verdicts on the output topic change with this replica, and an operator
        should hear it: a standby of other settings takes over without a word otherwise.
        """
        if entry.settings is None or self.verdict_settings is None:
            return
        changed = settings_changes(entry.settings, self.verdict_settings)
        if changed is not None and changed != self._settings_warned:
            log.warning(
                "changelog %s holds batches judged under other detection settings (%s): verdicts from here on "
                "follow this run's",
                self.partition.topic,
                changed,
            )
        self._settings_warned = changed
