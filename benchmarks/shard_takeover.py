"""A shard taking over with 200k documents in the sequenced topic: from its snapshot, or replaying the whole topic.

The sequenced topic is built as ``kafka_restart.py`` builds a changelog (a worker's
changelog is a sequenced topic, ``docs/scale-out.md``): 1 KB documents of real
prose, signed, one record per batch of 1,000, each in a transaction of its own.
This process then reads the topic back and feeds every batch to shard 0 of 2
(``ShardDetector.answer``, as the shard does; the time is the anchor of the
replay rate), and snapshots it with ``SnapshotStore`` at 90% of the topic and
at its end.

Then the real shard role (``role_runner``, on a thread) takes over, each time as
a new group whose committed offset is the topic's end (what a restarted shard or
a standby finds: every batch answered before), with:

* full: no snapshot, the whole topic replayed;
* tail: the 90% snapshot in its directory, the last 10% replayed;
* loaded: the snapshot at the end, nothing replayed.

*Take-over* is from ``RoleRunner.run()`` to the end of the replay (the
``replay_progress`` event with nothing remaining): creating or checking the
topics, the transactional producer's ``init_transactions``, joining the group,
loading the snapshot and replaying the topic from it up to the committed offset.

    python benchmarks/shard_takeover.py [--documents N] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

from _table import Row, print_table
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata
from kafka_restart import BATCH, SNAPSHOT_SHARE, build
from kafka_stage import broker, quiet_kafka_python, unique_name
from roles_on_broker import role_settings

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.sharding import ShardDetector
from stream_dedup.kafka.sequenced import SequencedBatch, every_batch
from stream_dedup.roles.launch import role_runner
from stream_dedup.roles.shard import snapshot_directory
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.snapshot_store import SnapshotCoverage, SnapshotStore

SHARDS = 2
CONFIG = DetectionConfig(index_slots=SHARDS)
ROUNDS = 3


def sequenced(bootstrap: str, topic: str) -> list[SequencedBatch]:
    """Every batch of the topic, in order."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False)
    try:
        return every_batch(consumer, topic, CONFIG.signature_fingerprint())
    finally:
        consumer.close()


def shard_snapshots(batches: list[SequencedBatch], end: int, root: Path, topic: str) -> tuple[list[Path], float, int]:
    """Shard 0's snapshots at 90% of the batches and at ``end``; the in-process seconds; the documents it holds."""
    shard = ShardDetector(CONFIG, 0, SHARDS)
    at_share = round(len(batches) * SNAPSHOT_SHARE)
    paths = []
    seconds = 0.0
    for i, batch in enumerate(batches, start=1):
        t = time.perf_counter()
        shard.answer(batch.entry.documents, batch.keys)
        seconds += time.perf_counter() - t
        if i in (at_share, len(batches)):
            store = SnapshotStore(root / f"at-{i}", kept=1)
            covered = batch.offset + 1 if i < len(batches) else end
            store.write(shard, SnapshotCoverage(topic, covered, {}), lambda *_: None, _raise)
            paths.append(store.paths()[0])
    return paths, seconds, len(shard)


def _raise(error: BaseException) -> None:
    raise RuntimeError("a shard snapshot failed") from error


class TakeOverClock(WorkerEvents):
    """When the replay ended, and how many documents it replayed."""

    def __init__(self) -> None:
        self.replayed = 0
        self.done = threading.Event()
        self.finished = 0.0

    def replay_progress(self, documents: int, remaining_records: int) -> None:
        self.replayed += documents
        if not remaining_records and not self.done.is_set():
            self.finished = time.perf_counter()
            self.done.set()


def take_over(
    bootstrap: str, input_topic: str, topic: str, end: int, snapshot: Path | None, root: Path
) -> tuple[float, int]:
    """Shard 0 of a new group committed at ``end``, with ``snapshot`` in its directory: (seconds, replayed)."""
    name = unique_name("shard")
    settings = role_settings(bootstrap, input_topic, name, "shard", root, CONFIG, shards=SHARDS, sequenced_topic=topic)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=settings.role_group_id, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.commit({TopicPartition(topic, 0): OffsetAndMetadata(end, "", -1)})
    finally:
        consumer.close()
    if snapshot is not None:
        directory = snapshot_directory(settings)
        directory.mkdir(parents=True)
        os.link(snapshot, directory / snapshot.name)  # a hard link: no copy to time
    clock = TakeOverClock()
    runner = role_runner(settings, clock)
    thread = threading.Thread(target=runner.run, daemon=True)
    started = time.perf_counter()
    thread.start()
    try:
        if not clock.done.wait(600):
            raise RuntimeError(f"{name} did not take over within 600 s")
    finally:
        runner.request_stop()
        thread.join(60)
    return clock.finished - started, clock.replayed


def main() -> None:
    parser = argparse.ArgumentParser(description="a shard's take-over: from its snapshot, or replaying the topic")
    parser.add_argument("--documents", type=int, default=200_000, help="documents in the sequenced topic")
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    args = parser.parse_args()
    documents = args.documents - args.documents % BATCH
    if documents < 10 * BATCH:
        parser.error(f"--documents must be at least {10 * BATCH:,}")

    quiet_kafka_python()
    with broker(args.bootstrap) as bootstrap, tempfile.TemporaryDirectory(prefix="sdbench-takeover-") as tmp:
        root = Path(tmp)
        built = build(bootstrap, unique_name("sequenced"), documents, root / "built")
        topic = built.changelog_topic
        batches = sequenced(bootstrap, topic)
        end = batches[-1].offset + 1
        (partial, whole), in_process, held = shard_snapshots(batches, end, root / "shard", topic)
        snapshot_bytes = whole.stat().st_size
        runs: dict[str, list[tuple[float, int]]] = {"full": [], "tail": [], "loaded": []}
        for _ in range(ROUNDS):
            runs["full"].append(take_over(bootstrap, built.input_topic, topic, end, None, root))
            runs["tail"].append(take_over(bootstrap, built.input_topic, topic, end, partial, root))
            runs["loaded"].append(take_over(bootstrap, built.input_topic, topic, end, whole, root))
    full, tail, loaded = (min(runs[name]) for name in ("full", "tail", "loaded"))
    tail_documents = documents - round(len(batches) * SNAPSHOT_SHARE) * BATCH
    rows = [
        *(
            Row(label, seconds, f"full replay of {documents:,}", full[0], lower_is_better=True, fmt=".2f")
            for label, seconds in (
                (f"take-over s, snapshot at {documents:,} (no replay)", loaded[0]),
                (f"take-over s, snapshot + replay of {tail_documents:,}", tail[0]),
            )
        ),
        Row(
            "replay docs/s (full take-over minus one with nothing to replay)",
            full[1] / max(full[0] - loaded[0], 1e-9),
            "ShardDetector.answer in process, same batches",
            documents / in_process,
        ),
    ]
    print_table(
        f"shard take-over: shard 0 of {SHARDS} holding {held:,} of {documents:,} docs "
        f"(1 KB real prose, t=0.8, 128 perms), sequenced topic {built.changelog_bytes / 1e6:,.0f} MB",
        rows,
        [
            "take-over: RoleRunner.run() to the end of the replay (committed offset at the topic's end)",
            "every run (best counts): "
            + "; ".join(f"{name} {', '.join(f'{s:.2f} s ({n:,} docs)' for s, n in r)}" for name, r in runs.items()),
            f"snapshot at the end: {snapshot_bytes / 1e6:,.1f} MB ({snapshot_bytes / held:,.0f} bytes per held doc)",
        ],
    )


if __name__ == "__main__":
    main()
