"""Signer processes: the same outcomes and signatures as signing in place, whatever happens to the processes."""

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import make_detector
from stream_dedup.errors import SignerStartError
from stream_dedup.kafka.messages import InputReading, document_text
from stream_dedup.worker import signer_pool
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.pipeline import SigningStoppedError
from stream_dedup.worker.signer_pool import SignerPool
from stream_dedup.worker.signer_wire import PipeClosedError, config_message
from stream_dedup.worker.signing import SignedRecords, read_and_sign
from tests.corpus import make_corpus
from tests.processes import wait_ended
from tests.worker.fakes import block_values, document, record

READING = InputReading(max_document_bytes=5000)


class Restarts(WorkerEvents):
    def __init__(self) -> None:
        self.restarts = 0
        self.heartbeats = 0
        self.waits: list[float] = []

    def heartbeat(self) -> None:
        self.heartbeats += 1

    def signer_restarted(self) -> None:
        self.restarts += 1

    def signing_waited(self, seconds: float) -> None:
        self.waits.append(seconds)


def records(first: int, count: int) -> list[Any]:
    """Documents with near-copies, and every few records one that is not a document."""
    texts = make_corpus(first + count, seed=6)
    made = []
    for i in range(first, first + count):
        if i % 7 == 3:
            made.append(record("documents", i % 3, i, b'{"id": "x", "text": "  "}', b"k"))
        elif i % 11 == 5:
            made.append(record("documents", i % 3, i, None, None))
        else:
            made.append(document("documents", i % 3, i, f"d{i}", texts[i]))
    return made


def assert_signed_in_place(got: SignedRecords, batch: list[Any], config: DetectionConfig) -> None:
    expected = read_and_sign(batch, READING, make_detector(config), config.settles_with_texts)
    assert got.records == batch
    assert got.outcomes == expected.outcomes
    # The texts the worker keeps for its pairs: each document's, as reading its record again gives it.
    documents = [r for r, outcome in zip(batch, expected.outcomes, strict=True) if isinstance(outcome, str)]
    texts = [(document_text(r.value, READING) or "").encode() for r in documents]
    assert got.texts == expected.texts == (texts if config.settles_with_texts else [])
    # Cut into blocks per signer's slice, so compared by what they hold.
    assert block_values(got.blocks) == block_values(expected.blocks)
    assert np.array_equal(got.signed.sketches, expected.signed.sketches)
    assert np.array_equal(got.signed.keys, expected.signed.keys)
    assert (got.signed.fingerprints is None) == (expected.signed.fingerprints is None)
    if got.signed.fingerprints is not None and expected.signed.fingerprints is not None:
        assert np.array_equal(got.signed.fingerprints, expected.signed.fingerprints)
    assert (got.signed.shingles is None) == (expected.signed.shingles is None)
    if got.signed.shingles is not None and expected.signed.shingles is not None:
        assert np.array_equal(got.signed.shingles.values, expected.signed.shingles.values)


def started(processes: int, config: DetectionConfig, events: WorkerEvents, stopping: Any = None) -> SignerPool:
    pool = SignerPool(processes, config, READING, events, stopping or (lambda: False))
    pool.start()
    return pool


@pytest.fixture
def events() -> Restarts:
    return Restarts()


@pytest.fixture
def pool(events: Restarts) -> Iterator[SignerPool]:
    pool = started(2, DetectionConfig(), events)
    yield pool
    pool.close()


def sign(pool: SignerPool, batch: list[Any]) -> SignedRecords:
    pool.submit(batch)
    return pool.collect()


@pytest.mark.parametrize(
    ("processes", "config"),
    [
        (1, DetectionConfig()),
        (3, DetectionConfig(method="combined", verification="exact")),
        (2, DetectionConfig(method="simhash", max_documents=1000)),
    ],
    ids=["one-minhash", "three-combined-exact", "two-simhash-retention"],
)
def test_batches_of_any_size_come_back_as_signed_in_place(processes: int, config: DetectionConfig) -> None:
    pool = started(processes, config, WorkerEvents())
    try:
        for batch in (records(0, 40), records(40, 2), [], records(42, 1), records(43, 200)):
            assert_signed_in_place(sign(pool, batch), batch, config)
    finally:
        pool.close()


def test_a_signer_killed_while_idle_is_replaced_and_the_batch_is_unchanged(pool: SignerPool, events: Restarts) -> None:
    sign(pool, records(0, 10))
    victim = pool.signers[1].pid
    os.kill(victim, signal.SIGKILL)
    batch = records(10, 30)
    assert_signed_in_place(sign(pool, batch), batch, DetectionConfig())
    assert events.restarts == 1 and pool.signers[1].pid != victim


def test_a_signer_killed_while_signing_is_replaced_and_its_slice_signed_again(
    pool: SignerPool, events: Restarts
) -> None:
    batch = records(0, 3000)
    pool.submit(batch)
    os.kill(pool.signers[0].pid, signal.SIGKILL)
    assert_signed_in_place(pool.collect(), batch, DetectionConfig())
    assert events.restarts == 1


def test_a_batch_dropped_in_flight_is_never_collected_and_the_next_one_is_unchanged(pool: SignerPool) -> None:
    pool.submit(records(0, 50))
    pool.drop()
    batch = records(50, 20)
    assert_signed_in_place(sign(pool, batch), batch, DetectionConfig())


def test_a_signer_that_never_answers_in_time_is_replaced_and_a_second_failure_fails_the_batch(
    pool: SignerPool, events: Restarts, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(signer_pool, "ANSWER_SECONDS", 0.0)
    pool.submit(records(0, 100))
    with pytest.raises(PipeClosedError, match="failed this batch twice"):
        pool.collect()
    assert events.restarts == 1
    monkeypatch.setattr(signer_pool, "ANSWER_SECONDS", 120.0)
    batch = records(100, 20)
    assert_signed_in_place(sign(pool, batch), batch, DetectionConfig())


def test_a_hung_signer_is_replaced_while_the_wait_keeps_the_worker_alive(
    pool: SignerPool, events: Restarts, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stopped (not dead): found after ANSWER_SECONDS and replaced, with heartbeats all along, so that
    /healthz does not have the pod restarted first."""
    monkeypatch.setattr(signer_pool, "ANSWER_SECONDS", 2.0)
    os.kill(pool.signers[0].pid, signal.SIGSTOP)
    batch = records(0, 50)
    pool.submit(batch)
    assert_signed_in_place(pool.collect(), batch, DetectionConfig())
    assert events.restarts == 1
    assert events.heartbeats >= 3  # one per half second of the 2 s waited


def test_a_worker_that_stops_while_waiting_drops_the_batch(events: Restarts) -> None:
    stop = False
    pool = started(1, DetectionConfig(), events, lambda: stop)
    try:
        pool.submit(records(0, 500))
        stop = True
        with pytest.raises(SigningStoppedError):
            pool.collect()
    finally:
        pool.close()


def test_a_signer_that_cannot_start_stops_the_worker_naming_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", "/bin/false")
    with pytest.raises(SignerStartError, match="signing_processes=0"):
        started(1, DetectionConfig(), WorkerEvents())


def test_a_signer_killed_while_it_starts_is_named_killed_with_where_to_look(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An out-of-memory kill is not cured by signing in the worker's process: the message says what ended it."""
    killed_at_start = tmp_path / "python"
    killed_at_start.write_text("#!/bin/sh\nkill -9 $$\n")
    killed_at_start.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(killed_at_start))
    with pytest.raises(SignerStartError) as error:
        started(1, DetectionConfig(), WorkerEvents())
    assert "it was killed by SIGKILL" in str(error.value) and "out-of-memory killer" in str(error.value)
    assert "signing_processes=0" not in str(error.value)


def test_a_signer_of_other_detection_settings_is_refused() -> None:
    pool = SignerPool(1, DetectionConfig(), READING, WorkerEvents(), lambda: False)
    pool.config = config_message(DetectionConfig(threshold=0.5), READING)
    with pytest.raises(SignerStartError, match="other detection settings"):
        pool.start()


def test_signers_end_when_their_worker_is_killed() -> None:
    script = (
        "import sys, time\n"
        "from stream_dedup.config import DetectionConfig\n"
        "from stream_dedup.kafka.messages import InputReading\n"
        "from stream_dedup.worker.events import WorkerEvents\n"
        "from stream_dedup.worker.signer_pool import SignerPool\n"
        "pool = SignerPool(2, DetectionConfig(), InputReading(), WorkerEvents(), lambda: False)\n"
        "pool.start()\n"
        "print(' '.join(str(s.pid) for s in pool.signers), flush=True)\n"
        "time.sleep(60)\n"
    )
    worker = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert worker.stdout is not None
        pids = [int(p) for p in worker.stdout.readline().split()]
        assert len(pids) == 2
    finally:
        worker.kill()
        worker.wait()
    alive = wait_ended(pids, 20)
    assert not alive, f"signers {alive} outlived their worker"


def test_closing_with_an_answer_unread_ends_the_signers_at_once(events: Restarts) -> None:
    pool = started(2, DetectionConfig(), events)
    pool.submit(records(0, 2000))  # answers of ~200 KB each: more than a pipe holds
    time.sleep(1.0)
    pids = [signer.pid for signer in pool.signers]
    closing = time.monotonic()
    pool.close()
    assert time.monotonic() - closing < signer_pool._EXIT_SECONDS
    assert not wait_ended(pids, 0)
    assert [signer.process.returncode for signer in pool.signers if signer.process] == [0, 0]
