"""Creating the stage's topics when several processes create them at once."""

from typing import Any

import pytest
from kafka.errors import TopicAlreadyExistsError

from stream_dedup.kafka import clients
from stream_dedup.kafka.clients import KafkaConnection, TopicSpec, ensure_topics


class _RacingAdmin:
    """An admin client of a process that loses the race: the topic exists, its partitions are described late."""

    descriptions = 0

    def __init__(self, **options: Any) -> None:
        pass

    def list_topics(self) -> list[str]:
        return []

    def create_topics(self, topics: dict[str, Any], wait_for_metadata: bool) -> None:
        raise TopicAlreadyExistsError("created by another process a moment ago")

    def describe_topics(self, names: list[str]) -> list[dict[str, Any]]:
        _RacingAdmin.descriptions += 1
        partitions = [] if _RacingAdmin.descriptions < 3 else [{"partition": p} for p in range(3)]
        return [{"name": name, "partitions": partitions} for name in names]

    def close(self) -> None:
        pass


def test_a_topic_another_process_is_creating_is_waited_for_until_its_partitions_show(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(clients, "KafkaAdminClient", _RacingAdmin)

    counts = ensure_topics(KafkaConnection("broker:9092"), [TopicSpec("stage.answers", 3)])

    assert counts == {"stage.answers": 3}
    assert _RacingAdmin.descriptions == 3
