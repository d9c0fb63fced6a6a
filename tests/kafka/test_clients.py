"""Creating the stage's topics when several processes create them at once, or when the brokers refuse one."""

from typing import Any

import pytest
from kafka.errors import TopicAlreadyExistsError, TopicAuthorizationFailedError, UnknownTopicOrPartitionError

from stream_dedup.kafka import clients
from stream_dedup.kafka.clients import KafkaConnection, SessionBackoff, TopicSpec, ensure_topics, missing_topics


def _unknown(names: list[str]) -> list[dict[str, Any]]:
    """The brokers' description of topics that do not exist."""
    return [{"name": name, "error_code": UnknownTopicOrPartitionError.errno, "partitions": []} for name in names]


class _RacingAdmin:
    """An admin client of a process that loses the race: the topic exists, its partitions are described late."""

    descriptions = 0

    def __init__(self, **options: Any) -> None:
        pass

    def create_topics(self, topics: dict[str, Any], wait_for_metadata: bool) -> None:
        raise TopicAlreadyExistsError("created by another process a moment ago")

    def describe_topics(self, names: list[str]) -> list[dict[str, Any]]:
        _RacingAdmin.descriptions += 1
        if _RacingAdmin.descriptions == 1:  # asked whether it exists: not yet
            return [
                {"name": name, "error_code": UnknownTopicOrPartitionError.errno, "partitions": []} for name in names
            ]
        partitions = [] if _RacingAdmin.descriptions < 4 else [{"partition": p} for p in range(3)]
        return [{"name": name, "partitions": partitions} for name in names]

    def close(self) -> None:
        pass


def test_a_topic_another_process_is_creating_is_waited_for_until_its_partitions_show(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(clients, "KafkaAdminClient", _RacingAdmin)

    counts = ensure_topics(KafkaConnection("broker:9092"), [TopicSpec("stage.answers", 3)])

    assert counts == {"stage.answers": 3}
    assert _RacingAdmin.descriptions == 4


def test_sessions_failing_at_once_wait_longer_each_time_and_one_that_ran_a_while_starts_over() -> None:
    pause = SessionBackoff(first=1.0, most=30.0)
    assert [pause.after_failure(lasted=0.5) for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    # Hours of healthy running, then a broker restart: not a failing session.
    assert [pause.after_failure(lasted=3600.0), pause.after_failure(lasted=2.0)] == [1, 2]
    pause.after_success()
    assert pause.after_failure(lasted=0.0) == 1


class _RefusingAdmin(_RacingAdmin):
    """An admin client of a user who may create the topic but not describe it (no Write, Read or Describe ACL)."""

    def create_topics(self, topics: dict[str, Any], wait_for_metadata: bool) -> None:
        assert not wait_for_metadata, "kafka-python's wait hides the refusal behind a KafkaTimeoutError after 10 s"

    def describe_topics(self, names: list[str]) -> list[dict[str, Any]]:
        return [{"name": name, "error_code": TopicAuthorizationFailedError.errno, "partitions": []} for name in names]


def test_a_created_topic_the_user_may_not_describe_is_refused_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clients, "KafkaAdminClient", _RefusingAdmin)
    monkeypatch.setattr(clients, "_TOPIC_METADATA_SECONDS", 0.0)

    with pytest.raises(TopicAuthorizationFailedError, match=r"stage\.verdicts"):
        ensure_topics(KafkaConnection("broker:9092"), [TopicSpec("stage.verdicts", 3)])


class _CreateRefusingAdmin(_RacingAdmin):
    """An admin client of a user without Create on the cluster or the topic: kafka-python's error holds the request."""

    def describe_topics(self, names: list[str]) -> list[dict[str, Any]]:
        return _unknown(names)

    def create_topics(self, topics: dict[str, Any], wait_for_metadata: bool) -> None:
        raise TopicAuthorizationFailedError(f"Request 'CreateTopicsRequest(topics={topics!r}...)' failed")


def test_a_topic_the_user_may_not_create_is_refused_naming_the_acl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clients, "KafkaAdminClient", _CreateRefusingAdmin)

    with pytest.raises(TopicAuthorizationFailedError) as refused:
        ensure_topics(KafkaConnection("broker:9092"), [TopicSpec("stage.verdicts", 3), TopicSpec("stage.dead", 3)])
    assert refused.value.args == ("Create on topic stage.verdicts, stage.dead (or on the cluster)",)


class _ListingAdmin(_RacingAdmin):
    """An admin client of a user whose ACLs on "stage.changelog" were lost: the topic list leaves it out."""

    def list_topics(self) -> list[str]:
        return ["stage.input"]

    def describe_topics(self, names: list[str]) -> list[dict[str, Any]]:
        return [{"name": name, "error_code": TopicAuthorizationFailedError.errno, "partitions": []} for name in names]


def test_a_topic_the_user_may_not_describe_is_not_taken_for_a_missing_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """Taken for missing, a changelog the user lost its ACLs on was said deleted, with advice to start over."""
    monkeypatch.setattr(clients, "KafkaAdminClient", _ListingAdmin)

    with pytest.raises(TopicAuthorizationFailedError, match=r"Describe on topic stage\.changelog"):
        missing_topics(KafkaConnection("broker:9092"), ["stage.changelog"])
