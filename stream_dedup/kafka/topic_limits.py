"""What the topics the stage writes to accept: their ``max.message.bytes``, read from the brokers."""

from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType

from stream_dedup.errors import TopicConfigError
from stream_dedup.kafka.clients import PRODUCER_TUNING, KafkaConnection
from stream_dedup.kafka.record_fit import BROKER_DEFAULT_MAX_MESSAGE_BYTES, MIN_MESSAGE_BYTES, SizeLimit

_MAX_MESSAGE_BYTES = "max.message.bytes"


def size_limits(connection: KafkaConnection, topics: list[str]) -> dict[str, SizeLimit]:
    """The size limit of each of ``topics`` (which must exist), with the producer's ``max_request_size``.

    Raises :class:`TopicConfigError` for a topic whose ``max.message.bytes``
    leaves no room for a dead letter's headers: no record could be made to fit.
    """
    admin = KafkaAdminClient(**connection.options())
    try:
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic, configs=[_MAX_MESSAGE_BYTES]) for topic in topics],
            config_filter="all",
        )
    finally:
        admin.close()
    configs = described.get("topic", {})
    limits = {}
    for topic in topics:
        entry = configs.get(topic, {}).get(_MAX_MESSAGE_BYTES) or {}
        message_bytes = int(entry.get("value") or BROKER_DEFAULT_MAX_MESSAGE_BYTES)
        if message_bytes < MIN_MESSAGE_BYTES:
            raise TopicConfigError(
                f"topic {topic!r} has max.message.bytes={message_bytes}; the stage needs at least "
                f"{MIN_MESSAGE_BYTES} to publish any record to it (raise it with kafka-configs.sh --alter)"
            )
        limits[topic] = SizeLimit(
            message_bytes, PRODUCER_TUNING["max_request_size"], PRODUCER_TUNING["compression_type"] is not None
        )
    return limits
