"""Reading what topics accept and keep when the brokers refuse to describe a topic's configs."""

from typing import Any

import pytest
from kafka.errors import TopicAuthorizationFailedError

from stream_dedup.kafka import topic_limits
from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.topic_limits import topic_configs


class _RefusingAdmin:
    """The admin client of a user without DescribeConfigs on "stage.changelog": kafka-python drops the
    resource's error code and answers it with no configs at all."""

    def __init__(self, **options: Any) -> None:
        pass

    def describe_configs(self, resources: list[Any], config_filter: str) -> dict[str, Any]:
        described = {"stage.verdicts": {"retention.ms": {"value": "-1"}}, "stage.changelog": {}}
        return {"topic": {resource.name: described[resource.name] for resource in resources}}

    def close(self) -> None:
        pass


def test_a_topic_whose_configs_are_refused_is_named_not_taken_for_the_broker_defaults(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Taken for the defaults, a changelog that deletes what the index holds passed the retention check."""
    monkeypatch.setattr(topic_limits, "KafkaAdminClient", _RefusingAdmin)
    connection = KafkaConnection("broker:9092")

    assert topic_configs(connection, ["stage.verdicts"], ["retention.ms"]) == {"stage.verdicts": {"retention.ms": "-1"}}
    with pytest.raises(TopicAuthorizationFailedError, match=r"DescribeConfigs on topic stage\.changelog"):
        topic_configs(connection, ["stage.verdicts", "stage.changelog"], ["retention.ms"])
