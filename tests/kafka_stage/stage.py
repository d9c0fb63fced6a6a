"""Running the stage against the test broker: feeding input, running workers, reading output."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from stream_dedup.cli.settings_sources import resolve_settings
from stream_dedup.config import DetectionConfig
from stream_dedup.engine import DuplicateDetector, make_detector
from stream_dedup.engine.verdict import Verdict
from stream_dedup.kafka.clients import KafkaConnection, transactional_producer
from stream_dedup.kafka.fetched_records import read_fetches_quickly
from stream_dedup.roles.launch import role_runner
from stream_dedup.roles.session import RoleRunner
from stream_dedup.text import normalize_all
from stream_dedup.text.spool import TextSpool
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.loop import Worker
from stream_dedup.worker.settings import WorkerSettings
from tests.processes import children

REPO = Path(__file__).resolve().parents[2]


@dataclass
class Stage:
    """The topics and settings of one stage under test."""

    bootstrap: str
    input_topic: str
    output_topic: str
    dead_letter_topic: str
    group_id: str
    snapshot_root: Path
    extra: dict[str, str] = field(default_factory=dict)

    def environment(self, instance: str = "worker-1", **overrides: Any) -> dict[str, str]:
        """``STREAM_DEDUP_*`` variables for a worker of this stage."""
        values = {
            "bootstrap_servers": self.bootstrap,
            "input_topic": self.input_topic,
            "output_topic": self.output_topic,
            "dead_letter_topic": self.dead_letter_topic,
            "group_id": self.group_id,
            "instance_id": instance,
            "snapshot_dir": str(self.snapshot_root / instance),
            "metrics_port": "0",
            "log_format": "json",
            **self.extra,
            **{k: str(v) for k, v in overrides.items()},
        }
        return {f"STREAM_DEDUP_{k.upper()}": v for k, v in values.items()}

    def settings(self, instance: str = "worker-1", **overrides: Any) -> WorkerSettings:
        return resolve_settings({}, self.environment(instance, **overrides))


def make_stage(bootstrap: str, create_topic: Any, snapshot_root: Path) -> Stage:
    """A stage with fresh topics (3 input partitions) and its own group; ``create_topic(partitions)`` -> name."""
    return Stage(
        bootstrap=bootstrap,
        input_topic=create_topic(partitions=3),
        output_topic=create_topic(partitions=3),
        dead_letter_topic=create_topic(partitions=1),
        group_id=f"group-{uuid.uuid4().hex[:8]}",
        snapshot_root=snapshot_root,
    )


@contextlib.contextmanager
def worker_thread(
    settings: WorkerSettings,
    detector_factory: Callable[[DetectionConfig], DuplicateDetector] = make_detector,
    events: WorkerEvents | None = None,
) -> Iterator[Worker]:
    """A worker running in a thread of the test process, stopped (as by SIGTERM) at the end."""
    worker = Worker(settings, events=events, detector_factory=detector_factory)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=run, name=f"worker-{settings.instance_id}", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(60)
    assert not thread.is_alive(), "the worker did not stop within 60 s"
    if failure:
        raise failure[0]


def failure_of(
    settings: WorkerSettings, timeout: float = 60, runner: Callable[[WorkerSettings], Any] = Worker
) -> BaseException:
    """What a worker (or another ``runner``: ``role_runner``) that must stop on its own raises, run in a thread;
    an assertion error if it runs on."""
    failure: list[BaseException] = []

    def run() -> None:
        try:
            runner(settings).run()
        except BaseException as error:
            failure.append(error)

    thread = threading.Thread(target=run, name=f"failing-{settings.instance_id}", daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), f"the worker ran on for {timeout:.0f} s"
    assert failure, "the worker stopped without an error"
    return failure[0]


@contextlib.contextmanager
def role_threads(*settings: WorkerSettings, events: WorkerEvents | None = None) -> Iterator[list[RoleRunner]]:
    """Roles of a sharded stage, each running in a thread of the test process (all telling ``events``), stopped
    at the end."""
    runners = [role_runner(s, events) for s in settings]
    failures: list[BaseException] = []

    def run(runner: RoleRunner) -> None:
        try:
            runner.run()
        except BaseException as error:
            failures.append(error)

    threads = [
        threading.Thread(target=run, args=(r,), name=f"{r.settings.role}-{r.settings.instance_id}", daemon=True)
        for r in runners
    ]
    for thread in threads:
        thread.start()
    try:
        yield runners
    finally:
        for runner in runners:
            runner.request_stop()
        for thread in threads:
            thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a role did not stop within 60 s"
    if failures:
        raise failures[0]


class WorkerProcess:
    """``stream-dedup run`` as a child process, so that it can be killed -9 like in production.

    Every started process is remembered until :func:`kill_leftover_workers`, which the
    Kafka tests' conftest calls after each test: a failed assertion must not leave a
    worker running (and spinning on deleted topics) for the rest of the session.
    """

    started: ClassVar[list[WorkerProcess]] = []

    def __init__(self, environment: dict[str, str], log_path: Path) -> None:
        self.environment = {**os.environ, **environment, "PYTHONUNBUFFERED": "1"}
        self.log_path = log_path
        self.process: subprocess.Popen[bytes] | None = None
        #: What :meth:`pause` stopped, the process first.
        self.paused: list[int] = []

    def start(self) -> WorkerProcess:
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "stream_dedup.cli.main", "run"],
            env=self.environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        log.close()
        WorkerProcess.started.append(self)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def kill(self) -> None:
        self.resume()  # a stopped process is killed all the same; its stopped signers must be let go too
        self.signal(signal.SIGKILL)
        self.wait(30)

    def pause(self) -> None:
        """SIGSTOP the process and its children (its signers), as a frozen VM or a stopped container is."""
        self.paused = [self.pid, *children(self.pid, "")]
        for pid in self.paused:
            os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT what :meth:`pause` stopped, children first: the process finds them as it left them."""
        for pid in reversed(self.paused):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.paused = []

    def wait(self, timeout: float) -> int:
        assert self.process is not None
        return self.process.wait(timeout)

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_lines(self) -> list[dict[str, Any]]:
        lines = []
        for line in self.log_path.read_text(errors="replace").splitlines():
            with contextlib.suppress(json.JSONDecodeError):
                lines.append(json.loads(line))
        return lines


def role_processes(
    stage: Stage, log_directory: Path, roles: dict[str, dict[str, Any]], **common: Any
) -> dict[str, WorkerProcess]:
    """Each role of a sharded stage as a child process, by instance id (``roles``: its own settings),
    logging to ``log_directory/NAME.log``; any left running are killed after the test."""
    return {
        name: WorkerProcess(stage.environment(name, **common, **own), log_directory / f"{name}.log").start()
        for name, own in roles.items()
    }


def kill_leftover_workers() -> None:
    for worker in WorkerProcess.started:
        if worker.running():
            worker.kill()
    WorkerProcess.started.clear()


#: ``(key, value, partition)``, or ``(key, value, partition, timestamp_ms)``.
Message = tuple[bytes | None, bytes | None, int | None] | tuple[bytes | None, bytes | None, int | None, int | None]


def produce(bootstrap: str, topic: str, messages: Sequence[Message], transactional_id: str | None = None) -> None:
    """Send the messages in one transaction and wait for all of them.

    A transaction makes the messages visible to a read_committed consumer on
    every partition at once, so a worker judging records as they arrive (the
    live edge) still meets them in event-time order, as the expected verdicts
    of an uninterrupted run assume.
    """
    transactional_id = transactional_id or f"feeder-{uuid.uuid4().hex}"
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, transactional_id=transactional_id)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for key, value, partition, *timestamp in messages:
            producer.send(topic, key=key, value=value, partition=partition, timestamp_ms=next(iter(timestamp), None))
        producer.commit_transaction()
        producer.flush(60)
    finally:
        producer.close()


def produce_one_batch(
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes | None, bytes]],
    partition: int,
    timestamp: int | None = None,
) -> list[int]:
    """``records`` (key, value) in one zstd batch, however large decompressed (a few KB on the wire if
    repetitive): what a producer with a large ``batch.size`` writes. Their offsets."""
    size = sum(len(value) + 1024 for _, value in records)
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, compression_type="zstd", max_request_size=size, batch_size=size, linger_ms=1000
    )
    try:
        sent = [
            producer.send(topic, key=key, value=value, partition=partition, timestamp_ms=timestamp)
            for key, value in records
        ]
        producer.flush(60)
        return [future.get(10).offset for future in sent]
    finally:
        producer.close()


def document_messages(
    corpus: Sequence[tuple[str, int]], partitions: int, first_timestamp_ms: int | None = None, spacing_ms: int = 1
) -> list[tuple[bytes, bytes, int, int]]:
    """JSON documents ``doc-N``, round-robin over the partitions, ``doc-N`` stamped ``first_timestamp_ms + N``
    (``N * spacing_ms``: retention by age then forgets a number of documents one can count).

    Near-copies land on any partition, as with real producers. Timestamps are
    explicit and distinct, increasing with N, so the event-time order
    (timestamp, partition, offset) is the corpus order (see :func:`expected_verdicts`).
    They are recent by default: the broker deletes records older than the topic's retention.
    """
    first = int(time.time() * 1000) if first_timestamp_ms is None else first_timestamp_ms
    return [
        (
            f"doc-{i}".encode(),
            json.dumps({"id": f"doc-{i}", "text": text}).encode(),
            i % partitions,
            first + i * spacing_ms,
        )
        for i, (text, _) in enumerate(corpus)
    ]


#: The verdict fields an in-process run predicts (the sources are Kafka's).
VERDICT_CORE = ("id", "verdict", "duplicate_of", "similarity", "hamming_distance")


def expected_verdicts(
    corpus: Sequence[tuple[str, int]], config: DetectionConfig | None = None
) -> dict[str, dict[str, Any]]:
    """Verdicts of one uninterrupted run over the corpus, by document id.

    The worker judges a backlog in event-time order (timestamp, partition,
    offset) across partitions; :func:`document_messages` stamps ``doc-N`` with
    increasing timestamps, so that order is the corpus order, however the
    partitions' fetches interleave.
    """
    verdicts = one_run(corpus, config or DetectionConfig())
    return {v.id: {k: v.to_dict()[k] for k in VERDICT_CORE} for v in verdicts}


def one_run(corpus: Sequence[tuple[str, int]], config: DetectionConfig) -> list[Verdict]:
    """Verdicts of ``doc-N`` for the corpus in one batch, pairs near the threshold settled by text as the stage does."""
    detector = make_detector(config)
    ids = [f"doc-{i}" for i in range(len(corpus))]
    texts = normalize_all(text for text, _ in corpus)
    numbers = list(range(1, len(texts) + 1))
    with TextSpool() as spool:
        spool.add(numbers, texts)
        return detector.process(
            ids, texts, event_times=[0.0] * len(ids), normalized=True, sources=numbers, document_texts=spool
        )


def in_transaction(bootstrap: str, send: Callable[[KafkaProducer], None], commit: bool = True) -> None:
    """Run ``send`` with a transactional producer of its own, in one transaction, committed or aborted."""
    producer = transactional_producer(KafkaConnection(bootstrap), f"test-sending-{uuid.uuid4().hex}", 60)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        send(producer)
        if commit:
            producer.commit_transaction()
        else:
            producer.abort_transaction()
    finally:
        producer.close()


def read_committed(
    bootstrap: str, topic: str, count: int, timeout: float = 120.0, settle: float = 2.0, quickly: bool = False
) -> list[Any]:
    """Committed records of ``topic``: at least ``count`` of them, plus any that follow within ``settle`` seconds.

    Read by kafka-python's own consumer, or with ``quickly`` by the stage's way of reading fetches.
    """
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
    )
    if quickly:
        read_fetches_quickly(consumer)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        records: list[Any] = []
        deadline = time.monotonic() + timeout
        quiet_until: float | None = None
        while time.monotonic() < deadline:
            batch = [r for rs in consumer.poll(timeout_ms=300).values() for r in rs]
            records.extend(batch)
            if len(records) >= count:
                if quiet_until is None or batch:
                    quiet_until = time.monotonic() + settle
                elif time.monotonic() > quiet_until:
                    break
        return records
    finally:
        consumer.close()


def check_exactly_once(verdicts: list[dict[str, object]], expected: dict[str, dict[str, object]]) -> None:
    by_source = verdicts_by_source(verdicts)
    duplicated = {source: vs for source, vs in by_source.items() if len(vs) > 1}
    assert not duplicated, f"{len(duplicated)} records got more than one verdict, e.g. {next(iter(duplicated.items()))}"
    published = {str(v["id"]): {k: v[k] for k in VERDICT_CORE} for v in verdicts}
    missing = expected.keys() - published.keys()
    assert not missing, f"{len(missing)} documents got no verdict, e.g. {sorted(missing)[:5]}"
    wrong = {i: (published[i], expected[i]) for i in expected if published[i] != expected[i]}
    assert not wrong, f"{len(wrong)} verdicts differ from an uninterrupted run, e.g. {next(iter(wrong.items()))}"
    check_match_sources(verdicts)


def check_match_sources(verdicts: list[dict[str, object]]) -> None:
    """Every duplicate's ``match_source`` is where its match was read (ids are unique here)."""
    where = {v["id"]: {k: v["source"][k] for k in ("topic", "partition", "offset")} for v in verdicts}
    pointed = {v["id"]: (v["match_source"], where[v["duplicate_of"]]) for v in verdicts if v["duplicate_of"]}
    wrong = {i: pair for i, pair in pointed.items() if pair[0] != pair[1]}
    assert pointed and not wrong, f"{len(wrong)} match sources are wrong, e.g. {next(iter(wrong.items()), None)}"
    assert {v["format_version"] for v in verdicts} == {2}


def verdicts_by_source(verdicts: list[dict[str, object]]) -> dict[tuple[object, object], list[object]]:
    grouped: dict[tuple[object, object], list[object]] = {}
    for verdict in verdicts:
        source = verdict["source"]
        assert isinstance(source, dict)
        grouped.setdefault((source["partition"], source["offset"]), []).append(verdict)
    return grouped


def wait_until(condition: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(0.1)
