"""The intake's bounded merge buffer: records past a full partition are fetched again, never lost nor judged twice."""

import heapq
from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from kafka import TopicPartition

from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.intake import BatchIntake
from stream_dedup.worker.isolation import BatchFailures
from stream_dedup.worker.ordering import EventTimeMerge, order_key

TOPIC = "documents"
#: Long enough that no test sees a lagging partition given up on: the order never depends on timing.
NEVER_GIVE_UP = 600.0


def rec(partition: int, offset: int, timestamp: int, size: int = 0) -> Any:
    """A record whose key and value take ``size`` bytes."""
    key, value = b"k" * min(size, 1), b"v" * max(size - 1, 0)
    return SimpleNamespace(topic=TOPIC, partition=partition, offset=offset, timestamp=timestamp, key=key, value=value)


def coords(records: list[Any]) -> list[tuple[int, int]]:
    return [(r.partition, r.offset) for r in records]


class PartitionLogs:
    """The consumer as the intake sees it: a fetch position per partition, moved by fetches and seeks."""

    def __init__(self, logs: dict[int, list[Any]], first_offset: int) -> None:
        self.logs = logs
        self.first_offset = first_offset
        self.positions = {p: first_offset for p in logs}
        self.seeks: list[tuple[int, int]] = []

    def fetch(self, partition: int, count: int) -> dict[TopicPartition, list[Any]]:
        """A poll returning the next ``count`` records of ``partition``: the position moves past them."""
        start = self.positions[partition] - self.first_offset
        records = self.logs[partition][start : start + count]
        self.positions[partition] += len(records)
        return {TopicPartition(TOPIC, partition): records}

    def left(self, partition: int) -> int:
        return self.first_offset + len(self.logs[partition]) - self.positions[partition]

    def position(self, tp: TopicPartition) -> int:
        return self.positions[tp.partition]

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self.positions[tp.partition] = offset
        self.seeks.append((tp.partition, offset))

    def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return {tp: self.first_offset + len(self.logs[tp.partition]) for tp in partitions}


class BufferReports(WorkerEvents):
    def __init__(self) -> None:
        self.buffered: list[int] = []
        self.refetched = 0

    def records_buffered(self, buffered: int, refetched: int) -> None:
        self.buffered.append(buffered)
        self.refetched += refetched


def intake_over(
    logs: PartitionLogs,
    batch_size: int,
    buffer_limit: int,
    events: WorkerEvents,
    byte_limit: int | None = None,
    span_ms: int | None = None,
) -> BatchIntake:
    merge = EventTimeMerge(NEVER_GIVE_UP, buffer_limit, byte_limit)
    consumer: Any = logs
    intake = BatchIntake(consumer, consumer, TOPIC, batch_size, merge, BatchFailures(), events, span_ms)
    intake.restart(TopicPartition(TOPIC, p) for p in logs.logs)
    return intake


def test_records_past_a_full_buffer_are_let_go_and_the_partition_sought_back_to_the_first() -> None:
    logs = PartitionLogs({0: [rec(0, 100 + i, 50 + i) for i in range(5)], 1: [rec(1, 100, 1)]}, first_offset=100)
    events = BufferReports()
    intake = intake_over(logs, batch_size=10, buffer_limit=2, events=events)
    intake.add(logs.fetch(0, 5))
    assert logs.seeks == [(0, 102)]
    assert intake.merge.buffered() == {0: 2, 1: 0}
    assert (events.buffered, events.refetched) == ([2], 3)
    # Partition 1 lags with nothing buffered: a full partition 0 does not make the merge judge past it.
    assert intake.next_batch() == []
    intake.add(logs.fetch(1, 1))
    assert coords(intake.next_batch()) == [(1, 100), (0, 100), (0, 101)]
    # Partition 0 still lags (from offset 102): nothing is judged past it until those records come again.
    intake.add(logs.fetch(0, 5))
    assert coords(intake.next_batch()) == [(0, 102), (0, 103)]
    assert logs.seeks == [(0, 102), (0, 104)]


def test_a_full_partition_is_judged_on_while_the_others_are_caught_up() -> None:
    logs = PartitionLogs({0: [rec(0, i, i) for i in range(4)], 1: []}, first_offset=0)
    intake = intake_over(logs, batch_size=10, buffer_limit=1, events=WorkerEvents())
    taken: list[Any] = []
    for _ in range(4):
        intake.add(logs.fetch(0, 4))
        taken += intake.next_batch()
    assert coords(taken) == [(0, 0), (0, 1), (0, 2), (0, 3)]


def test_a_partition_holds_records_up_to_its_byte_limit_and_always_one() -> None:
    logs = PartitionLogs({0: [rec(0, i, i, size=10) for i in range(4)], 1: [rec(1, 0, 0, size=50)]}, first_offset=0)
    intake = intake_over(logs, batch_size=10, buffer_limit=100, events=WorkerEvents(), byte_limit=25)
    intake.add(logs.fetch(0, 4))
    intake.add(logs.fetch(1, 1))  # larger than the limit, alone in its buffer: held
    assert logs.seeks == [(0, 2)]
    assert intake.merge.buffered_bytes() == {0: 20, 1: 50}
    assert coords(intake.next_batch()) == [(0, 0), (1, 0), (0, 1)]
    assert intake.merge.buffered_bytes() == {0: 0, 1: 0}


@st.composite
def partition_logs(draw: Any) -> PartitionLogs:
    """1 to 4 partitions of up to 30 records of 0 to 40 bytes, timestamps in any order (then the heads' merge)."""
    logs = {}
    for p in range(draw(st.integers(1, 4))):
        stamps = draw(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 40)), max_size=30))
        logs[p] = [rec(p, 100 + i, t, size) for i, (t, size) in enumerate(stamps)]
    return PartitionLogs(logs, first_offset=100)


@given(
    partition_logs(),
    st.integers(1, 8),
    st.none() | st.integers(1, 100),
    st.integers(1, 20),
    st.none() | st.integers(0, 20),
    st.data(),
)
def test_any_polls_with_any_buffer_limits_take_the_unbounded_order_within_the_limits(
    logs: PartitionLogs,
    buffer_limit: int,
    byte_limit: int | None,
    batch_size: int,
    span_ms: int | None,
    data: st.DataObject,
) -> None:
    """Whatever the limits and however the polls interleave: each record once, in the order of an unbounded merge;
    no batch spans more than ``span_ms`` of event time past its first record (retention by age's bound)."""
    events = BufferReports()
    intake = intake_over(logs, batch_size, buffer_limit, events, byte_limit, span_ms)
    everything = [r for log in logs.logs.values() for r in log]
    taken: list[Any] = []
    polled = 0
    # Polls of arbitrary partitions and sizes, then polls of every partition in turn:
    # each round of those fills every empty buffer, so each round takes something.
    arbitrary = data.draw(st.integers(0, 60))
    for step in range(arbitrary + 2 * len(everything) + 2):
        fetchable = [p for p in logs.logs if logs.left(p)]
        if not fetchable and len(taken) == len(everything):
            break
        if step < arbitrary and fetchable:
            partition = data.draw(st.sampled_from(fetchable))
            sizes = {partition: data.draw(st.integers(1, logs.left(partition)))}
        else:
            sizes = {p: logs.left(p) for p in fetchable} or {0: 0}
        for partition, size in sizes.items():
            poll = logs.fetch(partition, size)  # one at a time: a poll's records are added before the next poll
            polled += size
            intake.add(poll)
            assert max(intake.merge.buffered().values()) <= buffer_limit
            if byte_limit is not None:
                counts = intake.merge.buffered()
                assert all(size <= byte_limit or counts[p] == 1 for p, size in intake.merge.buffered_bytes().items())
            batch = intake.next_batch()
            assert len(batch) <= batch_size
            if span_ms is not None and batch:
                assert max(r.timestamp for r in batch) <= batch[0].timestamp + span_ms
            taken += batch
    assert coords(taken) == coords(list(heapq.merge(*logs.logs.values(), key=order_key)))
    assert set(intake.merge.buffered_bytes().values()) <= {0}  # every byte counted in was counted out
    assert events.refetched == polled - len(everything)
    assert max(events.buffered, default=0) <= buffer_limit * len(logs.logs)


class HandingOut(PartitionLogs):
    """kafka-python's poll: all fetched, but a poll hands out at most ``max_records``, partition by partition."""

    def poll(self, max_records: int) -> dict[TopicPartition, list[Any]]:
        polled: dict[TopicPartition, list[Any]] = {}
        for partition in sorted(self.logs):
            count = min(self.left(partition), max_records - sum(len(r) for r in polled.values()))
            if count > 0:
                polled.update(self.fetch(partition, count))
        return polled


def test_records_the_client_holds_for_many_partitions_are_polled_before_the_merge_judges_past_them() -> None:
    # 128 partitions of a backlog, 10 records each, stamped round robin: the first batch of 1,000 must be
    # the first 1,000 records in event time. A poll hands out 1,000, the first 100 partitions' records;
    # the other 28 partitions, fetched but not handed out, must not be taken for starving ones (with the
    # idle time over, as on a loaded machine, the merge would judge past them).
    partitions, per_partition, batch = 128, 10, 1000
    logs = HandingOut(
        {p: [rec(p, o, timestamp=o * partitions + p) for o in range(per_partition)] for p in range(partitions)}, 0
    )
    consumer: Any = logs
    intake = BatchIntake(
        consumer, consumer, TOPIC, batch, EventTimeMerge(0.0, 2 * batch), BatchFailures(), WorkerEvents()
    )
    intake.restart([TopicPartition(TOPIC, p) for p in range(partitions)])
    intake.fill(logs.poll(batch), lambda: logs.poll(batch))
    taken = intake.next_batch()
    everything = sorted((r for log in logs.logs.values() for r in log), key=order_key)
    assert coords(taken) == coords(everything[:batch])
