"""Which Kafka errors end a role's session and start another, and which end the role."""

from pathlib import Path

import pytest
from kafka.errors import TransactionalIdAuthorizationFailedError

from stream_dedup.roles import session as role_session
from stream_dedup.roles.session import RoleRunner
from stream_dedup.worker.settings import WorkerSettings


def test_a_role_session_refused_by_an_acl_ends_the_role_instead_of_restarting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing ACL (here Write on the transactional id) is refused again by every new session:
    restarting them kept the role alive for ever, judging nothing, with only ERROR lines to say why."""
    settings = WorkerSettings(role="judge", snapshot_dir=str(tmp_path), text_spool_mb=0)
    runner = RoleRunner(settings, lambda: pytest.fail("no work is made: the session is replaced"))
    sessions: list[str] = []

    def session() -> None:
        sessions.append("refused")
        if len(sessions) > 2:
            runner.request_stop()
        raise TransactionalIdAuthorizationFailedError()

    monkeypatch.setattr(role_session, "ensure_role_topics", lambda *args, **kwargs: None)
    monkeypatch.setattr(runner, "_run_session", session)
    monkeypatch.setattr(role_session.SessionBackoff, "after_failure", lambda self, lasted: 0.0)
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        runner.run()
    assert sessions == ["refused"]
