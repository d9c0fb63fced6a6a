"""ProcessedLag: lag from the offsets committed, the markers past the last record not counted once all is done,
and committed alone once the input pauses."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest
from kafka import TopicPartition

from stream_dedup.kafka import processed_lag
from stream_dedup.kafka.processed_lag import IDLE_SECONDS, ProcessedLag

PARTITION = TopicPartition("documents", 0)


@dataclass
class Record:
    offset: int


@dataclass
class Consumer:
    """What ProcessedLag asks a consumer: its partitions, their ends and its positions."""

    end: int
    position_of: int
    partitions: set[TopicPartition] = field(default_factory=lambda: {PARTITION})
    #: A position being reset or validated: without a timeout, asking for it waits for the brokers.
    unsettled: bool = False
    #: When the group coordinator last answered a heartbeat (kafka-python's ``_coordinator.heartbeat``); None: now.
    last_receive: float | None = None
    config: dict[str, int] = field(default_factory=lambda: {"heartbeat_interval_ms": 3000})

    @property
    def _coordinator(self) -> SimpleNamespace:
        answered = time.monotonic() if self.last_receive is None else self.last_receive
        return SimpleNamespace(heartbeat=SimpleNamespace(last_receive=answered))

    def assignment(self) -> set[TopicPartition]:
        return self.partitions

    def highwater(self, partition: TopicPartition) -> int | None:
        return self.end

    def position(self, partition: TopicPartition, timeout_ms: int | None = None) -> int | None:
        """kafka-python's: ``None`` within ``timeout_ms`` for a position the brokers must settle first."""
        return None if self.unsettled and timeout_ms is not None else self.position_of


def test_records_read_and_not_committed_are_lag() -> None:
    lag = ProcessedLag()
    lag.start({PARTITION: 100})
    lag.given({PARTITION: [Record(o) for o in range(100, 130)]})
    assert lag.measure(Consumer(end=130, position_of=130)) == {("documents", 0): 30}
    lag.committed({PARTITION: 110})
    assert lag.measure(Consumer(end=130, position_of=130)) == {("documents", 0): 20}


def test_the_marker_after_the_last_committed_record_is_no_lag() -> None:
    lag = ProcessedLag()
    lag.start({PARTITION: 0})
    lag.given({PARTITION: [Record(o) for o in range(10)]})  # offset 10 is the transaction's marker
    lag.committed({PARTITION: 10})
    assert lag.measure(Consumer(end=11, position_of=11)) == {("documents", 0): 0}


def test_records_not_fetched_yet_are_lag_and_a_replay_before_the_committed_offset_is_not() -> None:
    lag = ProcessedLag()
    lag.start({PARTITION: 50})  # a shard reads again from 20 to rebuild its index; 50 is committed
    lag.given({PARTITION: [Record(o) for o in range(20, 40)]})
    assert lag.measure(Consumer(end=80, position_of=40)) == {("documents", 0): 30}


def test_a_partition_of_unknown_end_or_not_held_is_left_out() -> None:
    lag = ProcessedLag()
    lag.start({PARTITION: 0})
    assert lag.measure(Consumer(end=5, position_of=0, partitions=set())) == {}
    unknown = Consumer(end=5, position_of=0)
    unknown.highwater = lambda partition: None  # type: ignore[method-assign]
    assert lag.measure(unknown) == {}


def test_a_position_the_brokers_must_settle_is_not_waited_for_and_counts_nothing_past_the_commit() -> None:
    lag = ProcessedLag()
    lag.start({PARTITION: 100})
    lag.given({PARTITION: [Record(o) for o in range(100, 130)]})
    lag.committed({PARTITION: 130})
    assert lag.measure(Consumer(end=131, position_of=131, unsettled=True)) == {("documents", 0): 1}


class Clock:
    """A monotonic clock the test moves (ProcessedLag reads ``time.monotonic``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(processed_lag.time, "monotonic", clock)
    return clock


def test_the_markers_past_the_last_commit_are_named_for_a_commit_of_their_own_once_the_input_pauses(
    clock: Clock,
) -> None:
    lag = ProcessedLag()
    lag.start({PARTITION: 0})
    lag.given({PARTITION: [Record(o) for o in range(10)]})  # offset 10 is the transaction's marker
    lag.committed({PARTITION: 10})
    consumer = Consumer(end=11, position_of=11)
    assert lag.passed_markers(consumer) == {}  # records just came: the next batch's commit moves on anyway
    clock.now += IDLE_SECONDS
    assert lag.passed_markers(consumer) == {PARTITION: 11}
    lag.committed({PARTITION: 11})
    assert lag.passed_markers(consumer) == {}


def test_no_offset_is_named_while_a_record_given_is_not_committed_or_the_position_is_unsettled(clock: Clock) -> None:
    lag = ProcessedLag()
    lag.start({PARTITION: 0})
    lag.given({PARTITION: [Record(o) for o in range(10)]})
    lag.committed({PARTITION: 9})  # record 9 is held (a batch in flight, a judge waiting for answers)
    clock.now += IDLE_SECONDS
    assert lag.passed_markers(Consumer(end=11, position_of=11)) == {}
    lag.committed({PARTITION: 10})
    assert lag.passed_markers(Consumer(end=11, position_of=11, unsettled=True)) == {}
    assert lag.passed_markers(Consumer(end=10, position_of=10)) == {}  # no marker: nothing to pass
    assert lag.passed_markers(Consumer(end=11, position_of=11, partitions=set())) == {}  # not held
    silent = Consumer(end=11, position_of=11, last_receive=clock.now - 6.0)  # the brokers away
    assert lag.passed_markers(silent) == {}
    assert lag.passed_markers(Consumer(end=11, position_of=11, last_receive=clock.now - 5.0)) == {PARTITION: 11}


def test_a_new_assignment_waits_its_own_idle_time_and_a_replay_behind_the_commit_names_nothing(clock: Clock) -> None:
    lag = ProcessedLag()
    lag.start({PARTITION: 50})
    clock.now += IDLE_SECONDS
    lag.start({PARTITION: 50})
    assert lag.passed_markers(Consumer(end=52, position_of=52)) == {}
    clock.now += IDLE_SECONDS
    assert lag.passed_markers(Consumer(end=80, position_of=40)) == {}  # a shard rebuilding from 20
    assert lag.passed_markers(Consumer(end=52, position_of=52)) == {PARTITION: 52}
