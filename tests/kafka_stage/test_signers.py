"""Signer processes on a real broker: the verdicts of signing in place, whatever happens to the signers."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from stream_dedup.config import DetectionConfig
from tests.corpus import make_clustered_corpus
from tests.processes import children, wait_ended

from .stage import (
    Stage,
    WorkerProcess,
    check_exactly_once,
    document_messages,
    expected_verdicts,
    make_stage,
    produce,
    read_committed,
    verdicts_by_source,
    wait_until,
    worker_thread,
)
from .test_crash import unprocessed

pytestmark = pytest.mark.kafka

SIGNER = "stream_dedup.worker.signer_process"
#: Records a batch of the kill test.
BATCH = 20


def restart_logged(worker: WorkerProcess) -> int:
    return sum("restarting it" in str(line.get("message", "")) for line in worker.log_lines())


def test_verdicts_signed_in_signer_processes_are_those_signed_in_place_across_a_restart(
    stage: Stage, kafka_bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path
) -> None:
    corpus = make_clustered_corpus(1200, seed=51)
    messages = document_messages(corpus, partitions=3)
    in_place = stage
    apart = replace(make_stage(kafka_bootstrap, topic_factory, tmp_path / "apart"), input_topic=stage.input_topic)
    runs = ((in_place, 0), (apart, 2))
    produce(stage.bootstrap, stage.input_topic, messages[:500])
    for run, processes in runs:
        with worker_thread(run.settings(batch_size=50, signing_processes=processes)):
            read_committed(run.bootstrap, run.output_topic, 500)
    produce(stage.bootstrap, stage.input_topic, messages[500:])
    verdicts: dict[int, list[dict[str, Any]]] = {}
    for run, processes in runs:
        with worker_thread(run.settings(batch_size=50, signing_processes=processes)):
            records = read_committed(run.bootstrap, run.output_topic, len(corpus))
        verdicts[processes] = [json.loads(r.value) for r in records]
    check_exactly_once(verdicts[2], expected_verdicts(corpus))
    # Field for field, sources and match sources included.
    assert verdicts_by_source(verdicts[2]) == verdicts_by_source(verdicts[0])


def test_kill_9_of_signers_mid_run_leaves_one_verdict_per_record_as_an_uninterrupted_run(
    stage: Stage, tmp_path: Path
) -> None:
    rng = random.Random(52)
    corpus = make_clustered_corpus(40_000, seed=52)
    messages = document_messages(corpus, partitions=3)
    for start in range(0, len(messages), 5000):
        produce(stage.bootstrap, stage.input_topic, messages[start : start + 5000])
    environment = stage.environment(batch_size=BATCH, signing_processes=2)
    worker = WorkerProcess(environment, tmp_path / "worker.log").start()
    killed: list[int] = []
    try:
        wait_until(lambda: len(children(worker.pid, SIGNER)) == 2, 60, "two signer processes")
        while len(killed) < 8:
            time.sleep(rng.uniform(0.5, 1.5))
            signers = children(worker.pid, SIGNER)
            assert unprocessed(stage) > 0, f"the stream ended after {len(killed)} kills: make it longer"
            victim = rng.choice(signers)
            os.kill(victim, signal.SIGKILL)
            killed.append(victim)
            # The next kill waits for the replacement (a signer killed while it starts is another test): for
            # its process, then for batches it signed. Every batch is cut between both signers, so three batches
            # committed after the restart include the one the replacement signed again (on a loaded machine its
            # start took longer than the pause before the next kill, which then failed that batch twice).
            wait_until(lambda: restart_logged(worker) == len(killed), 60, "the signer to be replaced")
            wait_until(lambda: len(children(worker.pid, SIGNER)) == 2, 60, "two signer processes again")
            left = unprocessed(stage)
            wait_until(lambda left=left: unprocessed(stage) < left - 2 * BATCH, 60, "batches signed by the replacement")
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=180, settle=3)
        assert worker.running(), "the worker died with its signers"
        failed = [line for line in worker.log_lines() if "batch failed" in str(line.get("message", ""))]
        assert not failed, f"a replaced signer must not fail its batch: {failed[:2]}"
        survivors = children(worker.pid, SIGNER)
    finally:
        if worker.running():
            worker.kill()
    check_exactly_once([json.loads(r.value) for r in records], expected_verdicts(corpus))
    assert not wait_ended(killed + survivors, 20), "signers outlived their worker"


def test_signer_processes_fold_lookalike_letters_when_asked(stage: Stage) -> None:
    """Copies disguised with Cyrillic letters, on other partitions than their originals, found by the stage."""
    originals = [text for text, _ in make_clustered_corpus(40, seed=57)][:20]
    disguise = str.maketrans("aeopcxy", "\u0430\u0435\u043e\u0440\u0441\u0445\u0443")
    corpus = [(text, 0) for text in originals] + [(text.translate(disguise), 0) for text in originals]
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    with worker_thread(stage.settings(batch_size=10, signing_processes=1, fold_lookalikes=True)):
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
    verdicts = {v["id"]: v for v in (json.loads(r.value) for r in records)}
    copies = [verdicts[f"doc-{i + len(originals)}"] for i in range(len(originals))]
    assert all(v["verdict"] == "duplicate" for v in copies)
    assert {v["duplicate_of"] for v in copies} <= {f"doc-{i}" for i in range(len(originals))}
    assert all(v["params_fingerprint"] == DetectionConfig(fold_lookalikes=True).fingerprint() for v in copies)
