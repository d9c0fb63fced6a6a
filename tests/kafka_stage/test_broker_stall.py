"""A broker that hangs without dying (SIGSTOP, then SIGCONT: a long GC pause, a frozen VM) mid-stream.

Its connections stay open and nothing answers on them, unlike a broker
stopped or killed (test_failover), whose connections are refused. After
the stall every record has one verdict, an uninterrupted run's, and the
stage commits again within seconds, by itself. So it has when the broker is
only slow, hung a fifth of every second for a while (requests time out now
and then, groups rebalance): nothing is lost or published twice.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from stream_dedup.worker.events import BatchReport, Role, StepReport, WorkerEvents
from tests.corpus import make_clustered_corpus

from .broker import JarBroker
from .stage import (
    Stage,
    check_exactly_once,
    document_messages,
    expected_verdicts,
    produce,
    read_committed,
    wait_until,
    worker_thread,
)
from .test_failover import own_stage
from .test_roles import a_signer_two_shards_and_a_judge, check_one_process_verdicts_once

pytestmark = pytest.mark.kafka

#: Longest wait for the first commit after the broker goes on (it takes under 2 s here).
RESUME_SECONDS = 15.0


class Timeline(WorkerEvents):
    """When the stage (every role of it, in roles mode) committed, and which roles it went through."""

    def __init__(self) -> None:
        self.commits: list[float] = []
        self.roles: list[tuple[float, Role]] = []
        self._lock = threading.Lock()

    def role_changed(self, role: Role, reason: str) -> None:
        with self._lock:
            self.roles.append((time.monotonic(), role))

    def batch_committed(self, report: BatchReport) -> None:
        self.commits.append(time.monotonic())

    def step_committed(self, report: StepReport, seconds: float) -> None:
        self.commits.append(time.monotonic())

    def roles_between(self, start: float, end: float) -> list[Role]:
        with self._lock:
            return [role for at, role in self.roles if start <= at <= end]


def stall(broker: JarBroker, seconds: float) -> float:
    """Hang ``broker`` for ``seconds``; return when it went on (``time.monotonic()``)."""
    broker.pause()
    try:
        time.sleep(seconds)
    finally:
        broker.resume()
    return time.monotonic()


def seconds_to_resume(timeline: Timeline, went_on: float) -> float:
    """How long after ``went_on`` the stage committed again (waits up to ``RESUME_SECONDS``).

    Input is fed again as the broker goes on, so that a commit is due whether or not the stall caught
    the backlog's last batches.
    """
    wait_until(lambda: timeline.commits[-1] > went_on, RESUME_SECONDS, "a commit after the broker went on")
    return min(t for t in timeline.commits if t > went_on) - went_on


def stage_with_backlog(
    broker: JarBroker, tmp_path: Path, documents: int, backlog: int, seed: int
) -> tuple[Stage, list[tuple[str, int]], list[tuple[bytes, bytes, int, int]]]:
    """A stage on ``broker``, its corpus and input messages, the first ``backlog`` of them produced."""
    stage = own_stage(broker, tmp_path)
    corpus = make_clustered_corpus(documents, seed=seed)
    messages = document_messages(corpus, partitions=3)
    produce(stage.bootstrap, stage.input_topic, messages[:backlog])
    return stage, corpus, messages


#: Past session_timeout_seconds (10 s); and past transaction_timeout_seconds (15 s) and kafka-python's
#: request timeout (30 s), where the session ends and the replica says it is not ready.
STALLS = [
    pytest.param(12.0, id="12s"),
    pytest.param(60.0, id="60s", marks=pytest.mark.long),
]


@pytest.mark.parametrize("seconds", STALLS)
def test_a_broker_stall_mid_stream_leaves_one_process_publishing_each_verdict_once(
    own_broker: JarBroker, tmp_path: Path, seconds: float
) -> None:
    stage, corpus, messages = stage_with_backlog(own_broker, tmp_path, 10_000, 8000, seed=36)
    timeline = Timeline()
    with worker_thread(stage.settings(batch_size=200), events=timeline):
        read_committed(stage.bootstrap, stage.output_topic, 1000, settle=0)
        stalled = time.monotonic()
        went_on = stall(own_broker, seconds)
        produce(stage.bootstrap, stage.input_topic, messages[8000:])
        assert seconds_to_resume(timeline, went_on) < RESUME_SECONDS
        if seconds > 30:
            assert "restoring" in timeline.roles_between(stalled, went_on), "not ready while the broker hangs"
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=180)
    assert [role for _, role in timeline.roles if role != "stopping"][-1] == "active", "active again after it"
    check_exactly_once([json.loads(r.value) for r in records], expected_verdicts(corpus))


@pytest.mark.parametrize("seconds", STALLS)
def test_a_broker_stall_mid_stream_leaves_every_role_publishing_each_verdict_once(
    own_broker: JarBroker, tmp_path: Path, seconds: float
) -> None:
    stage = own_stage(own_broker, tmp_path)
    corpus = make_clustered_corpus(6000, seed=37)
    messages = document_messages(corpus, partitions=3)
    produce(stage.bootstrap, stage.input_topic, messages[:5000])
    timeline = Timeline()
    with a_signer_two_shards_and_a_judge(stage, timeline) as runners:
        read_committed(stage.bootstrap, stage.output_topic, 600, settle=0)
        went_on = stall(own_broker, seconds)
        produce(stage.bootstrap, stage.input_topic, messages[5000:])
        assert seconds_to_resume(timeline, went_on) < RESUME_SECONDS
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=180)
        sequenced = runners[0].settings.sequenced_topic
    check_one_process_verdicts_once(stage, records, sequenced, len(corpus))


@contextlib.contextmanager
def throttled(broker: JarBroker, seconds: float, stopped: float = 0.2) -> Iterator[None]:
    """A slow broker for ``seconds``: hung for ``stopped`` of every second (short of CPU, or in GC), while the
    body runs; the end of the block waits for the slow spell to end."""

    def throttle() -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            stall(broker, stopped)
            time.sleep(1 - stopped)

    throttling = threading.Thread(target=throttle, daemon=True)
    throttling.start()
    try:
        yield
    finally:
        throttling.join()


#: Within the session and transaction timeouts each time, but over and over: requests time out now and then.
@pytest.mark.parametrize("seconds", [15.0, pytest.param(60.0, marks=pytest.mark.long)], ids=["15s", "60s"])
def test_a_broker_hung_a_fifth_of_every_second_leaves_one_process_publishing_each_verdict_once(
    own_broker: JarBroker, tmp_path: Path, seconds: float
) -> None:
    stage, corpus, messages = stage_with_backlog(own_broker, tmp_path, 6000, 3000, seed=40)
    with worker_thread(stage.settings(batch_size=100)):
        read_committed(stage.bootstrap, stage.output_topic, 300, settle=0)
        with throttled(own_broker, seconds):
            for start in range(3000, 6000, 1000):  # input arrives while the broker is slow too
                produce(stage.bootstrap, stage.input_topic, messages[start : start + 1000])
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=180)
    check_exactly_once([json.loads(r.value) for r in records], expected_verdicts(corpus))
