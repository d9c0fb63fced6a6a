"""What the worker says between sessions: a session ended by a Kafka error makes the replica not ready, not dead."""

from pathlib import Path

import pytest
from kafka.errors import GroupAuthorizationFailedError, KafkaConnectionError

from stream_dedup.worker import loop
from stream_dedup.worker.events import Role, WorkerEvents
from stream_dedup.worker.loop import Worker
from stream_dedup.worker.settings import WorkerSettings


class Said(WorkerEvents):
    """The roles the worker takes and its heartbeats, in order."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def role_changed(self, role: Role, reason: str) -> None:
        self.said.append(role)

    def heartbeat(self) -> None:
        self.said.append("heartbeat")


def test_a_session_ended_by_a_kafka_error_leaves_the_replica_restoring_and_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the brokers stay away the next session never gets to restore (which says "restoring"
    itself): the replica must not go on saying "active" (ready) for the whole outage. Each
    session that ends is a heartbeat: the pod must not be restarted for the brokers' absence."""
    events = Said()
    worker = Worker(WorkerSettings(signing_processes=0, snapshot_dir=str(tmp_path), text_spool_mb=0), events)
    sessions = iter(["active, then the brokers go away", "the brokers still away"])

    def session() -> None:
        which = next(sessions, None)
        if which is None:
            worker.request_stop()
            return
        if which.startswith("active"):
            events.role_changed("active", "processing 3 partitions")
        raise KafkaConnectionError("111 ECONNREFUSED")

    monkeypatch.setattr(loop, "ensure_stage_topics", lambda *args, **kwargs: None)
    monkeypatch.setattr(worker, "_run_session", session)
    monkeypatch.setattr(loop.SessionBackoff, "after_failure", lambda self, lasted: 0.0)
    worker.run()
    assert events.said == ["active", "restoring", "heartbeat", "restoring", "heartbeat"]


def test_a_session_refused_by_an_acl_ends_the_worker_instead_of_restarting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing ACL (here Read on the group) is refused again by every new session: restarting them
    hid it behind ERROR lines for ever, the replica alive and never judging a record."""
    worker = Worker(WorkerSettings(signing_processes=0, snapshot_dir=str(tmp_path), text_spool_mb=0))
    sessions: list[str] = []

    def session() -> None:
        sessions.append("refused")
        if len(sessions) > 2:
            worker.request_stop()
        raise GroupAuthorizationFailedError("stream-dedup")

    monkeypatch.setattr(loop, "ensure_stage_topics", lambda *args, **kwargs: None)
    monkeypatch.setattr(worker, "_run_session", session)
    monkeypatch.setattr(loop.SessionBackoff, "after_failure", lambda self, lasted: 0.0)
    with pytest.raises(GroupAuthorizationFailedError):
        worker.run()
    assert sessions == ["refused"]
