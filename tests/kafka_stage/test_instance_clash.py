"""A fencing is a settings error only when the group's member for our instance id is another process."""

import time
import uuid
from collections.abc import Callable

import pytest
from kafka import KafkaConsumer
from kafka.errors import FencedInstanceIdError, KafkaError, ProducerFencedError

from stream_dedup.errors import ConfigError
from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.coordinator_silence import CoordinatorSilentError
from stream_dedup.kafka.instance_clash import raise_if_instance_taken

pytestmark = pytest.mark.kafka


def test_only_a_fencing_by_another_member_of_our_instance_id_is_a_settings_error(
    kafka_bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    group = f"clash-{uuid.uuid4().hex[:8]}"
    consumer = KafkaConsumer(topic_factory(), bootstrap_servers=kafka_bootstrap, group_id=group, group_instance_id="a")
    try:
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(200)
        holder = consumer.group_metadata().member_id
        connection = KafkaConnection(kafka_bootstrap)
        # Fenced, but the member is still ours (the brokers timed our transaction out): a new session cures it.
        raise_if_instance_taken(ProducerFencedError(), connection, group, "a", holder)
        # Not a fencing; no member under the id; no member id of ours to compare with.
        raise_if_instance_taken(KafkaError("broker down"), connection, group, "a", "an-earlier-member")
        raise_if_instance_taken(ProducerFencedError(), connection, group, "b", "an-earlier-member")
        raise_if_instance_taken(ProducerFencedError(), connection, group, "a", None)
        for fencing in (ProducerFencedError(), FencedInstanceIdError(), CoordinatorSilentError()):
            with pytest.raises(ConfigError, match=f"as instance_id 'a' and fenced this one .* now {holder}") as raised:
                raise_if_instance_taken(fencing, connection, group, "a", "an-earlier-member")
            assert raised.value.setting == "instance_id"
    finally:
        consumer.close()
