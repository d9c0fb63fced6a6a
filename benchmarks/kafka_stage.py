"""The Kafka stage end to end through a real broker, exactly-once on, against a pass-through stage.

Throughput. An input topic of 3 partitions is loaded with N documents before anything
reads it (100,000 by default, 10,000 with --quick): 1 KB documents of real prose
(``corpus.kilobyte_documents``), 30% of them re-emitted later as edited near-copies
(``corpus.planted_stream``), as JSON ``{"id", "text"}`` records keyed by the id. Three
stages then each read the whole topic in a fresh consumer group, into topics of their
own:

* ours: the real ``stream_dedup.worker.loop.Worker`` in a thread of this process, with
  its default settings (batches of 1,000, t=0.8, 128 perms, char 5-shingles, and
  ``signing_processes`` from the cores: reading and signing pipelined in signer
  processes while the worker's thread does the Kafka I/O, the index and the
  transaction).
* ours, signing in place: the same with ``signing_processes=0`` (everything on the
  worker's thread, as before signing was pipelined), to show what the pipeline buys.
* pass-through, worker path: the same ``Worker`` with the detection taken out
  (and ``signing_processes=0``: there is nothing to sign)
  (``Detector.sign`` returns zero sketches and keys, ``process_signed`` says "unique"
  without touching the index). All else is the worker's own code: the poll, reading
  the records (JSON, normalisation), the verdict JSON, the changelog record (the same
  size: zero sketches and keys per document), the transaction and the offsets.
* pass-through, bare relay: a loop written here around the worker's own two clients
  (``stream_dedup.kafka.clients``: ``transactional_producer`` with ``PRODUCER_TUNING``,
  ``group_consumer``: ``read_committed``, static membership, the single-active
  assignor), polls of 1,000.
  Per poll, one transaction: for each input record a fixed verdict JSON of the real
  size keyed by the record's key, one changelog-sized record, the offsets, the commit.
  No parsing, no encoding: the client and the broker alone.

A rate counts from the commit that completes the first 10% of the documents to the
last commit: start-up, joining the group, the first fetch and kafka-python's second
join (its first assignment is made before the topic's metadata is in its records, so
it rejoins a moment later) are left out. The four run twice, alternating, and each
keeps its best, because the machine is shared. A run that commits nothing for 20 s
has stalled (kafka-python can lose that second join, see ``Session.check_join`` in
stream_dedup/worker/session.py) and is run again.

Latency. A fresh, empty input topic is then fed by another process at a steady rate,
60% of the worker's measured rate (``--load``), for ``--latency-seconds``. The worker is
already active when the feed starts, and reports per document the commit time minus
the record's timestamp (``BatchReport.latencies``). The worker-path pass-through is fed
the same way at the same rate, as the anchor.

Bars: docs/s >= 0.7x the bare relay (issue 14: the single-process default uses the
machine's cores), and >= 0.6x the worker-path pass-through (the earlier issue's "same
client, same transactions, no detection work"), with p50/p99 verdict latency
reported. CPU seconds per 1,000 documents are given for each stage's process (all its
threads: the loop and kafka-python's, whose producer thread compresses the batches) and for
its signer processes, with the share of the run the loop spent waiting for the signers
and how busy the broker was: together they say which side bounds the rate. The load
of a shared machine inflates them far less than it swings docs/s, so a row also
compares the docs/s the CPU of each stage's loop thread allows (the thread that polls,
judges, sends and commits; kafka-python's own threads, the signers and the broker on
other cores): ours against the bare relay, the ceiling of the ratio on a machine with
cores to spare. Every topic gets Kafka's default
``segment.bytes`` (1 GiB): the test broker of ``broker.sh`` rolls segments at 1 MiB,
and a fetch never reads past a segment.

    python benchmarks/kafka_stage.py [--quick] [--documents N] [--bootstrap HOST:PORT]
        [--profile]

Without ``--bootstrap`` it starts a broker of its own with ``scripts/kafka/broker.sh``
(a free port, a data directory under /tmp) and stops and deletes it at the end.
``--profile`` adds one more run of the worker under cProfile and prints where the
worker's thread spends its time (the signers' time is not in it).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import json
import logging
import multiprocessing
import os
import pstats
import resource
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np
import numpy.typing as npt
from _table import Row, print_table
from corpus import Document, kilobyte_documents, planted_stream
from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import Detector
from stream_dedup.engine.text_verification import DocumentTexts
from stream_dedup.engine.verdict import Verdict
from stream_dedup.kafka.changelog import ChangelogEntry, encode_entry
from stream_dedup.kafka.clients import KafkaConnection, group_consumer, transactional_producer
from stream_dedup.kafka.messages import Source, verdict_value
from stream_dedup.lsh import IndexedBatch, SignedBatch
from stream_dedup.worker.collector import tune_collector
from stream_dedup.worker.cores import default_signing_processes
from stream_dedup.worker.events import BatchReport, Role, StepReport, WorkerEvents
from stream_dedup.worker.loop import Worker
from stream_dedup.worker.settings import WorkerSettings
from stream_dedup.worker.topics import changelog_configs

BROKER_SH = Path(__file__).resolve().parent.parent / "scripts" / "kafka" / "broker.sh"
PARTITIONS = 3
BATCH = 1_000
BAR = 0.6
#: Issue 14: end to end against the bare transactional relay.
RELAY_BAR = 0.7
ROUNDS = 2
#: Share of the documents left out of a rate, at its start (see ``steady_rate``).
WARM_UP = 0.1
#: A stage that commits nothing for this long while records wait has stalled (a batch
#: commits every few hundred ms; this is also shorter than any watchdog of the worker's,
#: so a stalled run is run again rather than timed with the gap in it).
STALL_SECONDS = 20.0
T = TypeVar("T")
#: What a production broker gives a topic; broker.sh's test broker rolls segments at 1 MiB.
TOPIC_CONFIGS = {"segment.bytes": str(1 << 30), "retention.ms": "-1", "retention.bytes": "-1"}
#: Brokers this script started, by bootstrap address: their CPU time is reported beside the stages'.
BROKER_PIDS: dict[str, int] = {}
#: The changelog as the worker creates it with its default settings (plus the above).
CHANGELOG_CONFIGS = {**TOPIC_CONFIGS, **changelog_configs(WorkerSettings())}


# --- the broker and the topics -----------------------------------------------------------


@contextlib.contextmanager
def broker(bootstrap: str | None) -> Iterator[str]:
    """``bootstrap`` if given, else a broker of our own from ``broker.sh``, stopped and deleted at the end."""
    if bootstrap:
        yield bootstrap
        return
    subprocess.run(["bash", str(BROKER_SH), "fetch"], check=True)
    data = tempfile.mkdtemp(prefix="sdbench-kafka-")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    try:
        started = subprocess.run(
            ["bash", str(BROKER_SH), "start", "--port", str(port), "--data", data],
            check=True,
            capture_output=True,
            text=True,
        )
        bootstrap = started.stdout.strip()
        BROKER_PIDS[bootstrap] = int((Path(data) / "broker.pid").read_text())
        yield bootstrap
    finally:
        # Stop even after a failed start: no broker JVM may outlive the benchmark.
        subprocess.run(["bash", str(BROKER_SH), "stop", "--data", data], check=False)
        shutil.rmtree(data, ignore_errors=True)


def create_topics(bootstrap: str, topics: dict[str, int], configs: dict[str, str] = TOPIC_CONFIGS) -> None:
    """Create ``{name: partitions}`` and wait until they have leaders."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="sdbench-admin")
    try:
        admin.create_topics(
            {name: {"num_partitions": n, "replication_factor": 1, "configs": configs} for name, n in topics.items()},
            wait_for_metadata=True,
        )
    finally:
        admin.close()


def stage_settings(
    bootstrap: str,
    input_topic: str,
    name: str,
    snapshots: Path,
    changelog_topic: str | None = None,
    signing_processes: int | None = None,
) -> WorkerSettings:
    """Settings of a worker named ``name`` (also its group; snapshots in ``snapshots/name``), its topics created.

    The changelog is ``name.changelog``, created here, unless ``changelog_topic`` names an existing one.
    ``signing_processes`` defaults to the worker's own default (from the cores).
    """
    settings = WorkerSettings(
        signing_processes=default_signing_processes() if signing_processes is None else signing_processes,
        bootstrap_servers=bootstrap,
        input_topic=input_topic,
        output_topic=f"{name}.verdicts",
        dead_letter_topic=f"{name}.dead-letters",
        changelog_topic=changelog_topic or f"{name}.changelog",
        group_id=name,
        instance_id="bench",
        snapshot_dir=str(snapshots / name),
        metrics_port=0,
    )
    create_topics(bootstrap, {settings.output_topic: PARTITIONS, settings.dead_letter_topic: PARTITIONS})
    if changelog_topic is None:
        create_topics(bootstrap, {settings.changelog_topic: 1}, CHANGELOG_CONFIGS)
    return settings


def quiet_kafka_python() -> None:
    """Show warnings, except two kinds kafka-python logs that say nothing about the result."""
    logging.basicConfig(level=logging.WARNING)
    # Its I/O thread waited >100 ms for the GIL, which the worker's thread holds while it works.
    logging.getLogger("kafka.net.selector").setLevel(logging.ERROR)
    # A metadata refresh cancelled because its client was closing, logged at ERROR.
    logging.getLogger("kafka.cluster").addFilter(lambda record: "failed Cancelled" not in record.getMessage())


def unique_name(what: str) -> str:
    return f"sdbench-{what}-{uuid.uuid4().hex[:8]}"


# --- the documents -----------------------------------------------------------------------


def documents(count: int) -> list[Document]:
    """``count`` 1 KB documents of real prose, 30% of them planted near-copies of earlier ones."""
    originals = count - round(count * 0.3)
    return planted_stream(count, dup_fraction=0.3, seed=7, paragraphs=kilobyte_documents(originals))


def encoded(docs: Sequence[Document]) -> list[tuple[bytes, bytes]]:
    """(key, value) of each document's record."""
    return [(d.id.encode(), json.dumps(d.record(), ensure_ascii=False).encode()) for d in docs]


def produce(bootstrap: str, topic: str, messages: Sequence[tuple[bytes, bytes]]) -> None:
    """Load ``messages`` into ``topic``, round-robin over its partitions, as fast as the client goes."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, batch_size=256 * 1024)
    try:
        for i, (key, value) in enumerate(messages):
            producer.send(topic, key=key, value=value, partition=i % PARTITIONS)
        producer.flush()
    finally:
        producer.close()


def feed(bootstrap: str, topic: str, messages: Sequence[tuple[bytes, bytes]], rate: float) -> float:
    """Send ``messages`` at ``rate`` per second, evenly; return the rate achieved (run in another process)."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    try:
        start, sent = time.perf_counter(), 0
        while sent < len(messages):
            due = min(len(messages), int((time.perf_counter() - start) * rate) + 1)
            for i in range(sent, due):
                producer.send(topic, key=messages[i][0], value=messages[i][1], partition=i % PARTITIONS)
            sent = due
            time.sleep(0.002)
        producer.flush()
        return len(messages) / (time.perf_counter() - start)
    finally:
        producer.close()


# --- running a stage ---------------------------------------------------------------------


class StageClock(WorkerEvents):
    """Times the worker's role changes and committed batches (called on the worker's thread).

    ``roles`` holds when each role was first entered (``time.perf_counter()``),
    ``activations`` how often the worker became active, ``commits`` the (time,
    records) of every committed batch.
    """

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.roles: dict[str, float] = {}
        self.activations = 0
        self.settled = threading.Event()
        self.commits: list[tuple[float, int]] = []
        self.latencies: list[npt.NDArray[np.float64]] = []
        self.verdicts: Counter[str] = Counter()
        self.active = threading.Event()
        self.finished = threading.Event()
        self.failure: BaseException | None = None
        self.signing_wait = 0.0
        #: CPU seconds of this process and of its reaped children (the signers) over the run, and the run's wall time.
        self.cpu = CpuUse(0.0, 0.0, None, 0.0)
        #: CPU seconds of the thread that ran the loop (the worker's, or the relay's).
        self.loop_cpu = 0.0
        self._records = 0

    def role_changed(self, role: Role, reason: str) -> None:
        self.roles.setdefault(role, time.perf_counter())
        if role == "active":
            self.activations += 1
            self.active.set()
            if self.activations == 2:
                self.settled.set()

    def batch_committed(self, report: BatchReport) -> None:
        self.latencies.append(report.latencies)
        self.committed(report.records, report.verdicts)

    def step_committed(self, report: StepReport, seconds: float) -> None:
        """A role's step (documents signed, answered for, or judged)."""
        self.committed(report.documents, report.verdicts)

    def committed(self, records: int, verdicts: Counter[str]) -> None:
        self.commits.append((time.perf_counter(), records))
        self.verdicts.update(verdicts)
        self._records += records
        if self._records >= self.expected:
            self.finished.set()

    def signing_waited(self, seconds: float) -> None:
        self.signing_wait += seconds

    @property
    def records(self) -> int:
        return self._records


def steady_rate(commits: Sequence[tuple[float, int]], warm_up: float = WARM_UP) -> float:
    """Records/s from the commit completing the first ``warm_up`` share of the records to the last commit."""
    total = sum(n for _, n in commits)
    cumulative = np.cumsum([n for _, n in commits])
    start = int(np.searchsorted(cumulative, warm_up * total))
    done = int(cumulative[start])
    if start >= len(commits) - 1:
        raise RuntimeError(f"{len(commits)} batch(es) committed: too few to time; give more --documents")
    return (total - done) / (commits[-1][0] - commits[start][0])


@contextlib.contextmanager
def running_worker(
    settings: WorkerSettings, clock: StageClock, profiler: cProfile.Profile | None = None, detect: bool = True
) -> Iterator[Worker]:
    """A :class:`Worker` on a thread of its own, stopped (as by SIGTERM) and joined at the end.

    With ``detect=False`` its detector is a :class:`_NoDetection` (the pass-through).
    """
    worker = Worker(settings, clock, Detector if detect else _NoDetection)
    with running_on_thread(worker.run, worker.request_stop, clock, settings.bootstrap_servers, profiler):
        yield worker


@contextlib.contextmanager
def running_on_thread(
    run: Callable[[], None],
    request_stop: Callable[[], None],
    clock: StageClock,
    bootstrap: str,
    profiler: cProfile.Profile | None = None,
) -> Iterator[None]:
    """``run()`` (a worker's or a role's) on a thread of its own, stopped with ``request_stop()`` and joined.

    ``clock`` gets the CPU used meanwhile (this process, its reaped children,
    the broker) and that of the thread; a failure of ``run`` is raised here.
    """
    failure: list[BaseException] = []

    def on_thread() -> None:
        started = time.thread_time()
        try:
            if profiler is None:
                run()
            else:
                profiler.runcall(run)
        except BaseException as error:
            failure.append(error)
            clock.failure = error
            clock.active.set()
            clock.finished.set()
        finally:
            clock.loop_cpu = time.thread_time() - started

    meter = CpuMeter(bootstrap)
    thread = threading.Thread(target=on_thread, name="stage", daemon=True)
    thread.start()
    try:
        yield
    finally:
        request_stop()
        thread.join(120)
    # After the join: the signers have exited and been reaped, so their time is in RUSAGE_CHILDREN.
    clock.cpu = meter.used()
    if failure:
        raise failure[0]
    if thread.is_alive():
        raise RuntimeError("the stage did not stop within 120 s")


@dataclass(frozen=True)
class CpuUse:
    """CPU seconds over a run: this process (the stage's thread and kafka-python's), its children that
    ended meanwhile (the signer processes), the broker (when we started it), and the run's wall time."""

    own: float
    signers: float
    broker: float | None
    wall: float


class CpuMeter:
    """Starts counting when made; :meth:`used` is the CPU spent since."""

    def __init__(self, bootstrap: str) -> None:
        self.broker_pid = BROKER_PIDS.get(bootstrap)
        self.started = time.perf_counter()
        self.before = self._sample()

    def used(self) -> CpuUse:
        own, children, broker = self._sample()
        spent_broker = None if broker is None or self.before[2] is None else broker - self.before[2]
        wall = time.perf_counter() - self.started
        return CpuUse(own - self.before[0], children - self.before[1], spent_broker, wall)

    def _sample(self) -> tuple[float, float, float | None]:
        own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        broker = None
        if self.broker_pid is not None:
            with contextlib.suppress(OSError, IndexError, ValueError):
                fields = Path(f"/proc/{self.broker_pid}/stat").read_text().rsplit(")", 1)[1].split()
                broker = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime, broker


class StalledError(RuntimeError):
    """No batch was committed for ``STALL_SECONDS`` while records were waiting."""


def wait_finished(clock: StageClock, what: str, timeout: float = 900) -> None:
    """Wait for the stage to commit ``clock.expected`` records; raise :class:`StalledError` if it stops."""
    started = time.perf_counter()
    while not clock.finished.wait(1.0):
        last = clock.commits[-1][0] if clock.commits else started
        if time.perf_counter() - last > STALL_SECONDS or time.perf_counter() - started > timeout:
            raise StalledError(
                f"{what}: {clock.records:,} of {clock.expected:,} records committed, "
                f"none for {time.perf_counter() - last:.0f} s"
            )
    if clock.failure is not None:
        raise RuntimeError(f"{what} failed") from clock.failure


def with_retries(run: Callable[[], T], what: str, stalls: list[str]) -> T:
    """``run()``, again (up to twice) if it stalls; each stall is noted in ``stalls``."""
    for attempt in range(3):
        try:
            return run()
        except StalledError as stall:
            stalls.append(str(stall))
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _zero_signed(config: DetectionConfig, documents: int) -> SignedBatch:
    """What signing ``documents`` documents yields, all zeros: the same bytes, no work."""
    return SignedBatch(
        np.zeros((documents, config.sketch_bits // 8), dtype=np.uint8),
        np.zeros((documents, config.banding().bands + 1), dtype=np.uint32),
    )


class _NoDetection(Detector):
    """The pass-through's detector: zero sketches and keys, every document unique, nothing indexed."""

    def sign(self, texts: Sequence[str], normalized: bool = False) -> SignedBatch:
        return _zero_signed(self.config, len(texts))

    def process_signed(self, batch: IndexedBatch, document_texts: DocumentTexts | None = None) -> list[Verdict]:
        self.last_batch_candidates = np.zeros(len(batch.ids), dtype=np.int64)
        return [Verdict(doc_id, "unique") for doc_id in batch.ids]


def worker_stage(
    bootstrap: str,
    input_topic: str,
    expected: int,
    snapshots: Path,
    detect: bool,
    profiler: cProfile.Profile | None,
    signing_processes: int | None = None,
) -> StageClock:
    """Run the worker over ``expected`` preloaded records; return its clock.

    The pass-through (``detect=False``) signs nothing, so it never has signer processes.
    """
    processes = signing_processes if detect else 0
    name = unique_name("worker" if detect else "pass")
    settings = stage_settings(bootstrap, input_topic, name, snapshots, signing_processes=processes)
    clock = StageClock(expected)
    with running_worker(settings, clock, profiler, detect):
        wait_finished(clock, "worker" if detect else "pass-through (worker path)")
    return clock


def relay_stage(bootstrap: str, input_topic: str, expected: int, verdict: bytes, changelog_per_doc: int) -> StageClock:
    """The bare pass-through: consume, and per poll one transaction of verdict- and changelog-sized records."""
    name = unique_name("relay")
    create_topics(bootstrap, {f"{name}.verdicts": PARTITIONS})
    create_topics(bootstrap, {f"{name}.changelog": 1}, CHANGELOG_CONFIGS)
    # The worker's own clients, with its default timeouts.
    defaults = WorkerSettings()
    connection = KafkaConnection(bootstrap, client_id=f"{name}-bench")
    producer = transactional_producer(connection, f"{name}-bench", defaults.transaction_timeout_seconds)
    producer.init_transactions()
    consumer = group_consumer(connection, name, "bench", defaults.session_timeout_seconds, BATCH)
    clock = StageClock(expected)
    meter, loop_started = CpuMeter(bootstrap), time.thread_time()
    try:
        consumer.subscribe([input_topic])
        progress = time.perf_counter()
        while clock.records < expected:
            polled = consumer.poll(timeout_ms=100, max_records=BATCH)
            records = [r for tp in sorted(polled) for r in polled[tp]]
            if not records:
                if time.perf_counter() - progress > STALL_SECONDS:
                    raise StalledError(
                        f"bare relay: {clock.records:,} of {expected:,} committed, none for {STALL_SECONDS:.0f} s"
                    )
                continue
            progress = time.perf_counter()
            producer.begin_transaction()
            for record in records:
                producer.send(f"{name}.verdicts", key=record.key, value=verdict)
            producer.send(f"{name}.changelog", value=bytes(changelog_per_doc * len(records)), partition=0)
            offsets = {TopicPartition(r.topic, r.partition): OffsetAndMetadata(r.offset + 1, "", -1) for r in records}
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            producer.commit_transaction()
            clock.batch_committed(_relay_report(len(records)))
    finally:
        consumer.close()
        producer.close()
    clock.cpu, clock.loop_cpu = meter.used(), time.thread_time() - loop_started
    return clock


def _relay_report(records: int) -> BatchReport:
    none = np.zeros(0, dtype=np.int64)
    return BatchReport(Counter(unique=records), Counter(), 0.0, time.time(), none, none, 0, 0, 0, 0, 0, 0)


def relay_payloads(input_topic: str, config: DetectionConfig) -> tuple[bytes, int]:
    """A 'unique' verdict's JSON as the worker writes it, and the changelog bytes per document of a full batch."""
    verdict = verdict_value(
        Verdict("d0012345", "unique"), Source(input_topic, 1, 12_345, int(time.time() * 1000)), config.fingerprint()
    )
    ids = [f"d{i:07d}" for i in range(BATCH)]
    documents = IndexedBatch(ids, _zero_signed(config, BATCH), np.zeros(BATCH), np.zeros(BATCH, dtype=np.uint64))
    entry = ChangelogEntry(documents, input_topic, {p: 33_334 for p in range(PARTITIONS)})
    changelog = sum(len(value) for value in encode_entry(entry, config.signature_fingerprint()))
    return verdict, -(-changelog // BATCH)


# --- the measurements --------------------------------------------------------------------


def throughput(
    bootstrap: str, input_topic: str, count: int, snapshots: Path, rounds: int, stalls: list[str]
) -> tuple[dict[str, float], dict[str, list[float]], dict[str, StageClock]]:
    """Best docs/s of each stage over ``rounds`` alternating runs, every rate, and each stage's best run's clock."""
    verdict, changelog_per_doc = relay_payloads(input_topic, DetectionConfig())
    stages: dict[str, Callable[[], StageClock]] = {
        "ours": lambda: worker_stage(bootstrap, input_topic, count, snapshots, True, None),
        "in place": lambda: worker_stage(bootstrap, input_topic, count, snapshots, True, None, 0),
        "worker path": lambda: worker_stage(bootstrap, input_topic, count, snapshots, False, None),
        "bare relay": lambda: relay_stage(bootstrap, input_topic, count, verdict, changelog_per_doc),
    }
    rates: dict[str, list[float]] = {name: [] for name in stages}
    best_clocks: dict[str, StageClock] = {}
    for _ in range(rounds):
        for name, run in stages.items():
            clock = with_retries(run, name, stalls)
            rates[name].append(steady_rate(clock.commits))
            if rates[name][-1] == max(rates[name]):
                best_clocks[name] = clock
    return {name: max(r) for name, r in rates.items()}, rates, best_clocks


def latency(
    bootstrap: str, messages: Sequence[tuple[bytes, bytes]], rate: float, snapshots: Path, detect: bool
) -> tuple[npt.NDArray[np.float64], float]:
    """Per-document verdict latencies (s) with ``messages`` fed at ``rate``/s to a caught-up stage, and the rate fed."""
    input_topic = unique_name("steady")
    create_topics(bootstrap, {input_topic: PARTITIONS})
    name = unique_name("worker" if detect else "pass")
    settings = stage_settings(bootstrap, input_topic, name, snapshots, signing_processes=None if detect else 0)
    clock = StageClock(len(messages))
    feeder = multiprocessing.get_context("spawn").Pool(1)
    with feeder, running_worker(settings, clock, detect=detect):
        if not clock.active.wait(120):
            raise RuntimeError("the worker did not become active within 120 s")
        # kafka-python joins the group twice: its first assignment is made before the
        # topic's metadata is in its snapshot, and the next metadata update makes it
        # rejoin. Feed once the second assignment is in, or the first latencies
        # would measure the rebalance.
        clock.settled.wait(5)
        fed = feeder.apply(feed, (bootstrap, input_topic, messages, rate))
        wait_finished(clock, "steady feed" + ("" if detect else " (pass-through)"))
    return np.concatenate(clock.latencies), fed


def profile(bootstrap: str, input_topic: str, count: int, snapshots: Path) -> str:
    """Top functions of the worker's thread over one run (cProfile's own overhead included)."""
    profiler = cProfile.Profile()
    worker_stage(bootstrap, input_topic, count, snapshots, True, profiler)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(25)
    stats.sort_stats("cumulative").print_stats(35)
    return out.getvalue()


def cpu_note(name: str, clock: StageClock, count: int) -> str:
    """CPU per 1,000 documents of the stage's process and its signers, and how busy the broker was."""
    use = clock.cpu
    per = 1000 / count
    parts = [f"stage's process {use.own * per:.3f} (its loop's thread {clock.loop_cpu * per:.3f})"]
    if use.signers:
        parts.append(f"signers {use.signers * per:.3f}")
    if use.broker is not None:
        # Per second, not per document: the test broker's background work grows with the run's length.
        parts.append(f"the broker was {use.broker / use.wall:.0%} of a core busy")
    if clock.signing_wait:
        parts.append(f"the loop waited {clock.signing_wait / use.wall:.0%} of the run for the signers")
    return f"CPU s per 1,000 docs, {name} (best run, start to stop): {'; '.join(parts)}"


def loop_bound(clock: StageClock, count: int) -> float:
    """Docs/s the stage's loop thread allows with a core to itself (kafka-python's threads, signers elsewhere)."""
    return count / clock.loop_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description="Kafka stage docs/s and verdict latency vs a pass-through stage")
    parser.add_argument("--quick", action="store_true", help="10,000 documents, 5 s latency runs, one round")
    parser.add_argument("--documents", type=int, help="documents in the throughput run (default 100,000)")
    parser.add_argument("--latency-seconds", type=float, help="length of each steady feed (default 20)")
    parser.add_argument("--load", type=float, default=0.6, help="steady feed rate, share of ours' docs/s")
    parser.add_argument("--bootstrap", help="use this broker instead of starting one")
    parser.add_argument("--profile", action="store_true", help="also run the worker under cProfile")
    args = parser.parse_args()
    tune_collector()  # as `stream-dedup run` does: the stages here run in this process
    count = args.documents or (10_000 if args.quick else 100_000)
    seconds = args.latency_seconds or (5.0 if args.quick else 20.0)
    rounds = 1 if args.quick else ROUNDS

    quiet_kafka_python()
    started = time.perf_counter()
    docs = documents(count)
    messages = encoded(docs)
    size_mb = sum(len(v) for _, v in messages) / 1e6
    with broker(args.bootstrap) as bootstrap, tempfile.TemporaryDirectory(prefix="sdbench-snapshots-") as tmp:
        snapshots = Path(tmp)
        input_topic = unique_name("input")
        create_topics(bootstrap, {input_topic: PARTITIONS})
        t = time.perf_counter()
        produce(bootstrap, input_topic, messages)
        load_seconds = time.perf_counter() - t

        stalls: list[str] = []
        best, rates, clocks = throughput(bootstrap, input_topic, count, snapshots, rounds, stalls)
        clock = clocks["ours"]
        rate = args.load * best["ours"]
        steady = messages[: max(2 * BATCH, int(rate * seconds))]
        ours_latency, ours_fed = with_retries(
            lambda: latency(bootstrap, steady, rate, snapshots, True), "latency", stalls
        )
        pass_latency, pass_fed = with_retries(
            lambda: latency(bootstrap, steady, rate, snapshots, False), "latency", stalls
        )
        profiled = profile(bootstrap, input_topic, count, snapshots) if args.profile else ""

    planted = sum(d.origin is not None for d in docs)
    first_batch = clock.commits[0][0] - clock.roles["active"]
    from_first = steady_rate(clock.commits, warm_up=0.0)
    p = {name: np.percentile(lat, [50, 99]) * 1000 for name, lat in (("ours", ours_latency), ("pass", pass_latency))}
    processes = default_signing_processes()
    rows = [
        Row(
            f"docs/s end to end, exactly-once ({processes} signers)",
            best["ours"],
            "bare relay (client only)",
            best["bare relay"],
            f">= {RELAY_BAR}x",
            best["ours"] >= RELAY_BAR * best["bare relay"],
        ),
        Row(
            f"docs/s end to end, exactly-once ({processes} signers)",
            best["ours"],
            "pass-through (worker, no detection)",
            best["worker path"],
            f">= {BAR}x",
            best["ours"] >= BAR * best["worker path"],
        ),
        Row("docs/s end to end, signing in place", best["in place"], "bare relay (client only)", best["bare relay"]),
        Row("docs/s end to end, pipelined", best["ours"], "signing in place", best["in place"]),
        Row(
            "docs/s its loop thread's CPU allows",
            loop_bound(clocks["ours"], count),
            "the same for the bare relay",
            loop_bound(clocks["bare relay"], count),
        ),
        *(
            Row(
                f"verdict latency {name} ms, {ours_fed:,.0f} docs/s fed",
                p["ours"][k],
                f"pass-through, same rate ({pass_fed:,.0f}/s)",
                p["pass"][k],
                lower_is_better=True,
                fmt=",.1f",
            )
            for k, name in enumerate(("p50", "p99"))
        ),
        Row("duplicate verdicts", clock.verdicts["duplicate"], "planted near-copies", planted),
    ]
    each = "; ".join(f"{name} {', '.join(f'{r:,.0f}' for r in rs)}" for name, rs in rates.items())
    print_table(
        f"kafka stage: {count:,} docs of 1 KB ({size_mb:.0f} MB), 3 partitions, batches of {BATCH:,}, "
        "read_committed + transactions, one broker on this machine",
        rows,
        [
            f"docs/s from the commit completing the first {WARM_UP:.0%} of the documents to the last commit; "
            f"every run: {each}",
            f"left out for ours: {first_batch:.2f} s from 'active' to the first commit, and the rebalance when "
            f"kafka-python joins twice (it became active {clock.activations}x); from the first commit on, "
            f"ours ran {from_first:,.0f} docs/s",
            *(cpu_note(name, clocks[name], count) for name in clocks),
            f"latency: {len(steady):,} docs fed at {args.load:.0%} of ours' best rate by another process, "
            "commit time - record timestamp; the stage was active (and rejoined) before the feed began",
            *(f"stalled and run again: {stall}" for stall in stalls),
            f"input loaded in {load_seconds:.1f} s; whole run {time.perf_counter() - started:.0f} s",
        ],
    )
    if profiled:
        print("\ncProfile of the worker's thread, one run (cProfile slows Python code more than C code):")
        print(profiled)


if __name__ == "__main__":
    main()
