"""The session's extra polls for records the client holds (``Session.poll_held``) stop at a rebalance.

Such a poll runs the rebalance listener like any other. Records it brings
with partitions revoked or newly assigned must not go into a batch: the
loop takes the assignment over first (it seeks, and drops what was fetched),
and a batch judged after the revocation would commit partitions the replica
no longer holds.
"""

from types import SimpleNamespace
from typing import Any

from kafka import TopicPartition

from stream_dedup.worker.session import Session, _Rebalance
from stream_dedup.worker.settings import WorkerSettings

from .fakes import record


class Rebalancing:
    """A consumer whose next poll runs the listener (``revoked``, then ``assigned`` if given) and hands out records."""

    def __init__(self, listener: _Rebalance, assigned: list[TopicPartition] | None) -> None:
        self.listener = listener
        self.assigned = assigned
        self.polls = 0

    def poll(self, timeout_ms: int, max_records: int) -> dict[TopicPartition, list[Any]]:
        self.polls += 1
        self.listener.on_partitions_revoked([TopicPartition("in", 0)])
        if self.assigned is not None:
            self.listener.on_partitions_assigned(self.assigned)
        return {TopicPartition("in", 0): [record("in", 0, 7, b"{}")]}


def active_session() -> Any:
    """A session past its takeover, active, with only what ``poll_held`` touches."""
    session: Any = Session.__new__(Session)
    session.settings = WorkerSettings(batch_size=10)
    session.active = True
    session.new_assignment = None
    session.lag = SimpleNamespace(given=lambda polled: None)
    return session


def test_a_held_poll_that_revokes_the_partitions_hands_out_nothing() -> None:
    session = active_session()
    session.consumer = Rebalancing(_Rebalance(session), assigned=None)
    assert session.poll_held() == {}
    assert not session.active


def test_a_held_poll_that_brings_a_new_assignment_hands_out_nothing() -> None:
    session = active_session()
    session.consumer = Rebalancing(_Rebalance(session), assigned=[TopicPartition("in", 1)])
    assert session.poll_held() == {}
    assert session.new_assignment == [TopicPartition("in", 1)]


def test_no_held_poll_once_the_partitions_are_revoked() -> None:
    session = active_session()
    session.consumer = Rebalancing(_Rebalance(session), assigned=None)
    session.poll_held()
    assert session.poll_held() == {}
    assert session.consumer.polls == 1
