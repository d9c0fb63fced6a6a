"""Event-time order across partitions: the merge is a sort, however the fetches interleave."""

import heapq
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_dedup.worker.ordering import EventTimeMerge, order_key


def rec(partition: int, offset: int, timestamp: int) -> Any:
    return SimpleNamespace(topic="documents", partition=partition, offset=offset, timestamp=timestamp)


def coords(records: list[Any]) -> list[tuple[int, int]]:
    return [(r.partition, r.offset) for r in records]


@st.composite
def backlogs_and_fetches(draw: Any, sorted_timestamps: bool) -> tuple[dict[int, list[Any]], list[tuple[int, int]]]:
    """Records per partition, and an arbitrary interleaving of fetches: (partition, how many records)."""
    partitions = draw(st.integers(1, 4))
    backlog: dict[int, list[Any]] = {}
    for p in range(partitions):
        stamps = draw(st.lists(st.integers(0, 50), max_size=30))
        if sorted_timestamps:
            stamps.sort()
        backlog[p] = [rec(p, 100 + i, t) for i, t in enumerate(stamps)]
    fetches = []
    left = {p: len(rs) for p, rs in backlog.items()}
    while any(left.values()):
        p = draw(st.sampled_from([q for q, n in left.items() if n]))
        n = draw(st.integers(1, left[p]))
        fetches.append((p, n))
        left[p] -= n
    return backlog, fetches


def merge_all(
    backlog: dict[int, list[Any]], fetches: list[tuple[int, int]], limit: int, quiet_seconds: float = 0.0
) -> list[Any]:
    """Feed the fetches one by one, taking up to ``limit`` after each.

    The clock moves only while the merge holds nothing: then ``quiet_seconds``
    pass before the next fetch (a slow first fetch, a broker away). Time
    while records wait does not pass, so nobody gives up waiting.
    """
    merge = EventTimeMerge(max_idle_seconds=10.0, buffer_limit=1000)
    merge.assign({p: 100 for p in backlog})
    merge.note_ends({p: 100 + len(rs) for p, rs in backlog.items()})
    fetched = {p: 0 for p in backlog}
    taken: list[Any] = []
    now = 0.0
    for p, n in fetches:
        if not any(merge.buffered().values()):
            assert merge.take(limit, now=now) == []
            now += quiet_seconds
            assert merge.take(limit, now=now) == []
        merge.add(backlog[p][fetched[p] : fetched[p] + n])
        fetched[p] += n
        taken += merge.take(limit, now=now)
    while batch := merge.take(limit, now=now):
        taken += batch
    return taken


@given(backlogs_and_fetches(sorted_timestamps=True), st.integers(1, 20), st.sampled_from([0.0, 3.0, 60.0]))
def test_any_interleaving_of_fetches_gives_the_sorted_order(case: Any, limit: int, quiet_seconds: float) -> None:
    """Also when the fetches pause, longer than the idle time, with nothing held (a restart, a broker away)."""
    backlog, fetches = case
    taken = merge_all(backlog, fetches, limit, quiet_seconds)
    assert coords(taken) == coords(sorted((r for rs in backlog.values() for r in rs), key=order_key))


@given(backlogs_and_fetches(sorted_timestamps=False), st.integers(1, 20))
def test_out_of_order_timestamps_still_give_one_order_whatever_the_fetches(case: Any, limit: int) -> None:
    """Timestamps going back within a partition: the order is the heads' merge, still independent of timing."""
    backlog, fetches = case
    taken = merge_all(backlog, fetches, limit)
    assert coords(taken) == coords(list(heapq.merge(*backlog.values(), key=order_key)))


def test_a_lagging_partition_with_nothing_buffered_holds_the_others_back_until_the_idle_time() -> None:
    merge = EventTimeMerge(max_idle_seconds=2.0, buffer_limit=1000)
    merge.assign({0: 0, 1: 0})
    merge.note_ends({0: 2, 1: 5})
    merge.add([rec(0, 0, 10), rec(0, 1, 11)])
    assert merge.starving() == [1]
    assert merge.take(10, now=100.0) == []
    assert merge.take(10, now=101.5) == []
    assert coords(merge.take(10, now=102.0)) == [(0, 0), (0, 1)]  # gave up waiting
    assert merge.waited_seconds == pytest.approx(2.0)


def test_the_idle_time_counts_from_when_records_wait_not_from_when_every_partition_went_quiet() -> None:
    """After a restart every partition starves until the first fetch: the first to deliver still waits."""
    merge = EventTimeMerge(max_idle_seconds=2.0, buffer_limit=1000)
    merge.assign({0: 0, 1: 0, 2: 0})
    merge.note_ends({0: 2, 1: 2, 2: 2})
    for now in (100.0, 103.0, 106.0):  # nothing fetched for longer than the idle time
        assert merge.take(10, now=now) == []
    merge.add([rec(1, 0, 11), rec(1, 1, 14)])
    assert merge.take(10, now=106.5) == []  # partitions 0 and 2 hold it back from now on
    merge.add([rec(0, 0, 10), rec(0, 1, 13)])
    assert merge.take(10, now=107.0) == []
    merge.add([rec(2, 0, 12), rec(2, 1, 15)])
    assert coords(merge.take(10, now=108.0)) == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1)]
    assert merge.waited_seconds == pytest.approx(1.5)


def test_a_caught_up_partition_holds_nobody_back() -> None:
    merge = EventTimeMerge(max_idle_seconds=60.0, buffer_limit=1000)
    merge.assign({0: 0, 1: 7})
    merge.note_ends({0: 2, 1: 7})
    merge.add([rec(0, 0, 10), rec(0, 1, 11)])
    assert coords(merge.take(10, now=0.0)) == [(0, 0), (0, 1)]
    assert merge.waited_seconds == 0.0


def test_a_partition_of_unknown_lag_holds_nobody_back_and_is_worth_asking_about() -> None:
    merge = EventTimeMerge(max_idle_seconds=60.0, buffer_limit=1000)
    merge.assign({0: 0, 1: 0})
    merge.add([rec(0, 0, 10)])
    assert merge.unknown_or_caught_up() == [0, 1]
    assert coords(merge.take(10, now=0.0)) == [(0, 0)]


def test_a_partition_with_records_buffered_is_asked_about_too_as_its_buffer_can_run_dry_within_a_batch() -> None:
    """Partition 1's second record is still in Kafka: partition 0's later record must not overtake it."""
    merge = EventTimeMerge(max_idle_seconds=60.0, buffer_limit=1000)
    merge.assign({0: 0, 1: 0})
    merge.add([rec(0, 0, 10), rec(1, 0, 1)])
    merge.note_ends({0: 1})
    assert merge.unknown_or_caught_up() == [0, 1]
    merge.note_ends({1: 2})
    assert merge.unknown_or_caught_up() == [0]
    assert coords(merge.take(10, now=0.0)) == [(1, 0)]
    merge.add([rec(1, 1, 2)])
    assert coords(merge.take(10, now=0.0)) == [(1, 1), (0, 0)]


def test_a_batch_stops_where_a_partition_runs_dry_with_records_still_to_fetch() -> None:
    merge = EventTimeMerge(max_idle_seconds=5.0, buffer_limit=1000)
    merge.assign({0: 0, 1: 0})
    merge.note_ends({0: 3, 1: 3})
    merge.add([rec(0, 0, 1), rec(0, 1, 3), rec(0, 2, 5), rec(1, 0, 2)])
    # (1, 1) may have timestamp 2 or 3: nothing after (1, 0) can be judged before it arrives.
    assert coords(merge.take(10, now=0.0)) == [(0, 0), (1, 0)]
    merge.add([rec(1, 1, 4), rec(1, 2, 6)])
    assert coords(merge.take(10, now=0.5)) == [(0, 1), (1, 1), (0, 2), (1, 2)]
    assert merge.waited_seconds == pytest.approx(0.5)


def test_positions_past_transaction_markers_end_the_lag() -> None:
    merge = EventTimeMerge(max_idle_seconds=60.0, buffer_limit=1000)
    merge.assign({0: 0, 1: 0})
    merge.note_ends({0: 1, 1: 4})
    merge.add([rec(0, 0, 1), rec(1, 0, 2), rec(1, 1, 3)])
    assert coords(merge.take(10, now=0.0)) == [(0, 0), (1, 0), (1, 1)]
    merge.add([rec(0, 1, 9)])
    merge.note_ends({0: 3})
    assert merge.take(10, now=0.0) == []  # partition 1: offsets 2 and 3 not seen yet
    merge.note_positions({1: 4})  # they were a commit marker and an aborted record
    assert coords(merge.take(10, now=0.0)) == [(0, 1)]


def test_records_put_back_are_taken_again_first() -> None:
    merge = EventTimeMerge(max_idle_seconds=0.0, buffer_limit=1000)
    merge.assign({0: 0, 1: 0})
    merge.add([rec(0, 0, 1), rec(1, 0, 2), rec(0, 1, 3)])
    taken = merge.take(2, now=0.0)
    merge.unread(taken[1:])
    assert coords(merge.take(10, now=0.0)) == [(1, 0), (0, 1)]


def test_records_out_of_offset_order_are_refused() -> None:
    merge = EventTimeMerge(max_idle_seconds=0.0, buffer_limit=1000)
    merge.assign({0: 0})
    merge.add([rec(0, 5, 1)])
    with pytest.raises(ValueError, match="out of order"):
        merge.add([rec(0, 5, 1)])


def test_a_full_buffer_refuses_the_rest_of_its_partition_which_then_lags_until_fetched_again() -> None:
    merge = EventTimeMerge(max_idle_seconds=60.0, buffer_limit=2)
    merge.assign({0: 0, 1: 0})
    refused = merge.add([rec(0, 0, 5), rec(0, 1, 6), rec(1, 0, 9), rec(0, 2, 7), rec(0, 3, 8)])
    assert refused == {0: 2}
    assert merge.buffered() == {0: 2, 1: 1}
    assert merge.starving() == []  # a full partition never starves the merge
    # Partition 0's end was never asked, but records past its buffer exist: they are waited for.
    assert coords(merge.take(10, now=0.0)) == [(0, 0), (0, 1)]
    assert merge.starving() == [0]
    assert merge.add([rec(0, 2, 7), rec(0, 3, 8)]) == {}
    assert coords(merge.take(10, now=0.0)) == [(0, 2), (0, 3), (1, 0)]
