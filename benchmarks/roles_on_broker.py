"""Each role of a sharded stage alone on the real broker, end to end with its transactions (issue 14).

``capacity.py`` times each role's work in process and the sequenced partition's reads;
this script runs the roles themselves (``role_runner``, what ``stream-dedup run --role``
runs), one at a time on a thread of this process, so that each has a core and the broker
the other. The input is ``kafka_stage.py``'s: 1 KB documents of real prose with 30%
planted near-copies, round-robin over 3 partitions, preloaded. In turn, each role reading
what the one before wrote:

1. signer (one, batches of 1,000): the input -> the sequenced topic;
2. shard 0 of 1: the sequenced topic -> its answers, settling pairs near the threshold by
   the input records' texts, which it reads again from the input;
3. judge of that one shard: the sequenced topic and the answers -> verdicts;
4. shard 0 of 2 (a new shard set on the same sequenced topic): every document probed,
   about half stored.

Each is timed as ``kafka_stage.py`` times a stage: documents/s from the commit that
completes the first 10% of the documents to the last commit; CPU s per 1,000 documents
of this process (the role's thread and kafka-python's) and of the role's thread alone;
how busy the broker was. Then the bytes per document each wrote. Anchors, same run: the
single-process stage (``stream-dedup run``'s default, one signer process) and the bare
relay of ``kafka_stage.py`` (consume, and one transaction per poll of verdict-sized
records), both on the same input.

    python benchmarks/roles_on_broker.py [--quick] [--documents N] [--bootstrap HOST:PORT]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _table import Row, print_table
from kafka import KafkaConsumer, TopicPartition
from kafka_stage import (
    BATCH,
    CHANGELOG_CONFIGS,
    PARTITIONS,
    StageClock,
    broker,
    cpu_note,
    create_topics,
    documents,
    encoded,
    loop_bound,
    produce,
    quiet_kafka_python,
    relay_payloads,
    relay_stage,
    running_on_thread,
    steady_rate,
    unique_name,
    wait_finished,
    worker_stage,
)

from stream_dedup.config import DetectionConfig
from stream_dedup.roles.launch import role_runner
from stream_dedup.worker.collector import tune_collector
from stream_dedup.worker.settings import StageRole, WorkerSettings

#: Slots of the index: shard sets of 1 and 2 divide it.
CONFIG = DetectionConfig(index_slots=12)


def role_settings(
    bootstrap: str,
    input_topic: str,
    group: str,
    role: StageRole,
    snapshots: Path,
    detection: DetectionConfig = CONFIG,
    **own: object,
) -> WorkerSettings:
    """Settings of a role of the stage ``group``, its topics named after it, snapshots in ``snapshots/group``."""
    return WorkerSettings(
        role=role,
        bootstrap_servers=bootstrap,
        input_topic=input_topic,
        output_topic=f"{group}.verdicts",
        dead_letter_topic=f"{group}.dead-letters",
        group_id=group,
        instance_id=f"bench-{role}",
        snapshot_dir=str(snapshots / group),
        metrics_port=0,
        detection=detection,
        batch_size=BATCH,
        **own,  # type: ignore[arg-type]
    )


def create_written_topics(settings: WorkerSettings) -> None:
    """The topics the role writes, if missing, with the benchmarks' 1 GiB segments (``kafka_stage.TOPIC_CONFIGS``).

    The roles would create what is missing with the broker's defaults, which the test broker rolls at 1 MiB.
    """
    bootstrap = settings.bootstrap_servers
    metadata = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        existing = metadata.topics()
    finally:
        metadata.close()
    wide = {t: PARTITIONS for t in (settings.output_topic, settings.dead_letter_topic) if t not in existing}
    logs = {settings.sequenced_topic: 1, settings.answers_topic: settings.shards}
    logs = {topic: n for topic, n in logs.items() if topic not in existing}
    if wide:
        create_topics(bootstrap, wide)
    if logs:
        create_topics(bootstrap, logs, CHANGELOG_CONFIGS)


def role_stage(settings: WorkerSettings, expected: int) -> StageClock:
    """Run the role until it has committed ``expected`` documents; its clock."""
    create_written_topics(settings)
    clock = StageClock(expected)
    runner = role_runner(settings, clock)
    with running_on_thread(runner.run, runner.request_stop, clock, settings.bootstrap_servers):
        wait_finished(clock, f"{settings.role} {settings.shard_index} of {settings.shards}")
    return clock


def topic_bytes(bootstrap: str, topic: str) -> int:
    """Bytes of the keys and values ``topic`` holds (committed records), all partitions."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        ends = consumer.end_offsets(partitions)
        total = 0
        while any(consumer.position(tp) < ends[tp] for tp in partitions):
            for records in consumer.poll(timeout_ms=500).values():
                total += sum(len(r.key or b"") + len(r.value or b"") for r in records)
        return total
    finally:
        consumer.close()


def main() -> None:
    parser = argparse.ArgumentParser(description="each role of a sharded stage alone on the broker, end to end")
    parser.add_argument("--quick", action="store_true", help="10,000 documents")
    parser.add_argument("--documents", type=int, help="documents (default 100,000)")
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    args = parser.parse_args()
    tune_collector()  # as `stream-dedup run` does: the stages here run in this process
    count = args.documents or (10_000 if args.quick else 100_000)

    quiet_kafka_python()
    started = time.perf_counter()
    messages = encoded(documents(count))
    input_bytes = sum(len(k) + len(v) for k, v in messages)
    with broker(args.bootstrap) as bootstrap, tempfile.TemporaryDirectory(prefix="sdbench-roles-") as tmp:
        snapshots = Path(tmp)
        input_topic = unique_name("input")
        create_topics(bootstrap, {input_topic: PARTITIONS})
        produce(bootstrap, input_topic, messages)

        group = unique_name("roles")
        clocks: dict[str, StageClock] = {}
        for name, role, own in (
            ("signer", "signer", {}),
            ("shard 0 of 1", "shard", {}),
            ("judge of 1 shard", "judge", {}),
        ):
            settings = role_settings(bootstrap, input_topic, group, role, snapshots, **own)
            clocks[name] = role_stage(settings, count)
        sequenced = f"{group}.sequenced"
        second = role_settings(
            bootstrap, input_topic, unique_name("two"), "shard", snapshots, shards=2, sequenced_topic=sequenced
        )
        clocks["shard 0 of 2"] = role_stage(second, count)
        written = {
            "sequenced": topic_bytes(bootstrap, sequenced),
            "answers of 1 shard": topic_bytes(bootstrap, f"{group}.answers"),
            "verdicts": topic_bytes(bootstrap, f"{group}.verdicts"),
        }
        clocks["one process"] = worker_stage(bootstrap, input_topic, count, snapshots, True, None)
        verdict, changelog_per_doc = relay_payloads(input_topic, DetectionConfig())
        clocks["bare relay"] = relay_stage(bootstrap, input_topic, count, verdict, changelog_per_doc)

    rate = {name: steady_rate(clock.commits) for name, clock in clocks.items()}
    duplicates = clocks["judge of 1 shard"].verdicts["duplicate"]
    rows = [
        *(
            Row(f"docs/s, {name} alone", rate[name], "bare relay (client only)", rate["bare relay"])
            for name in ("signer", "shard 0 of 1", "shard 0 of 2", "judge of 1 shard")
        ),
        Row("docs/s, one process (all roles)", rate["one process"], "bare relay (client only)", rate["bare relay"]),
        *(
            Row(
                f"docs/s its thread's CPU allows, {name}",
                loop_bound(clocks[name], count),
                "the same for the bare relay",
                loop_bound(clocks["bare relay"], count),
            )
            for name in ("signer", "shard 0 of 1", "shard 0 of 2", "judge of 1 shard")
        ),
        *(
            Row(f"bytes/doc written, {name}", size / count, "the input record", input_bytes / count, fmt=",.1f")
            for name, size in written.items()
        ),
        Row(
            "duplicate verdicts, judge",
            duplicates,
            "one process",
            clocks["one process"].verdicts["duplicate"],
        ),
    ]
    notes = [cpu_note(name, clock, count) for name, clock in clocks.items()]
    notes.append(f"whole run {time.perf_counter() - started:.0f} s")
    print_table(
        f"roles alone on the broker: {count:,} docs of 1 KB, {PARTITIONS} input partitions, batches of {BATCH:,}",
        rows,
        notes,
    )


if __name__ == "__main__":
    main()
