"""What topics accept and keep, read from the brokers: ``max.message.bytes``, retention, cleanup policy."""

from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import TopicAuthorizationFailedError

from stream_dedup.errors import TopicConfigError
from stream_dedup.kafka.clients import PRODUCER_TUNING, KafkaConnection
from stream_dedup.kafka.record_fit import BROKER_DEFAULT_MAX_MESSAGE_BYTES, MIN_MESSAGE_BYTES, SizeLimit

_MAX_MESSAGE_BYTES = "max.message.bytes"


def topic_configs(connection: KafkaConnection, topics: list[str], names: list[str]) -> dict[str, dict[str, str]]:
    """The effective value of each of ``names`` for each of ``topics`` (which must exist).

    Effective: a topic without its own value has the broker's default (for
    example ``log.retention.ms``), which is what the topic then does.
    """
    admin = KafkaAdminClient(**connection.options())
    try:
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs=names) for topic in topics],
            config_filter="all",
        )
    finally:
        admin.close()
    configs = described.get("topic", {})
    # kafka-python drops a resource's error: a topic refused (no DescribeConfigs ACL) came back with no
    # configs, taken for the broker's defaults: the retention and record size checks passed unseen.
    refused = sorted(topic for topic in topics if names and not configs.get(topic))
    if refused:
        raise TopicAuthorizationFailedError(
            f"DescribeConfigs on topic {', '.join(refused)} (no configs described: that ACL is missing, or the topic "
            "was deleted a moment ago)"
        )
    return {
        topic: {
            name: str(entry["value"])
            for name, entry in configs.get(topic, {}).items()
            if name in names and entry.get("value") is not None
        }
        for topic in topics
    }


def size_limits(connection: KafkaConnection, topics: list[str]) -> dict[str, SizeLimit]:
    """The size limit of each of ``topics`` (which must exist), with the producer's ``max_request_size``.

    Raises :class:`TopicConfigError` for a topic whose ``max.message.bytes``
    leaves no room for a dead letter's headers: no record could be made to fit.
    """
    configs = topic_configs(connection, topics, [_MAX_MESSAGE_BYTES])
    limits = {}
    for topic in topics:
        message_bytes = int(configs[topic].get(_MAX_MESSAGE_BYTES) or BROKER_DEFAULT_MAX_MESSAGE_BYTES)
        if message_bytes < MIN_MESSAGE_BYTES:
            raise TopicConfigError(
                f"topic {topic!r} has max.message.bytes={message_bytes}; the stage needs at least "
                f"{MIN_MESSAGE_BYTES} to publish any record to it (raise it with kafka-configs.sh --alter)"
            )
        limits[topic] = SizeLimit(
            message_bytes, PRODUCER_TUNING["max_request_size"], PRODUCER_TUNING["compression_type"] is not None
        )
    return limits
