"""A broker refusing our timeouts is a settings error naming ours and theirs; other Kafka errors still restart."""

import pytest
from kafka.errors import (
    InvalidSessionTimeoutError,
    InvalidTransactionTimeoutError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
)

from stream_dedup.errors import ConfigError
from stream_dedup.kafka.broker_limits import raise_if_timeout_refused


@pytest.mark.parametrize(
    ("error", "ours", "theirs"),
    [
        # How kafka-python 3.0 raises each: InitProducerId's answer wrapped, the join's as its class.
        (
            KafkaError(f"Unexpected error in InitProducerIdResponse: {InvalidTransactionTimeoutError()}"),
            "transaction_timeout_seconds",
            "transaction.max.timeout.ms",
        ),
        (InvalidTransactionTimeoutError(), "transaction_timeout_seconds", "transaction.max.timeout.ms"),
        (InvalidSessionTimeoutError(), "session_timeout_seconds", "group.max.session.timeout.ms"),
    ],
)
def test_a_refused_timeout_is_a_settings_error_naming_both_settings(error: KafkaError, ours: str, theirs: str) -> None:
    with pytest.raises(ConfigError, match=theirs) as raised:
        raise_if_timeout_refused(error, 15.0, 10.0)
    assert raised.value.setting == ours


@pytest.mark.parametrize("error", [KafkaError("broker down"), KafkaTimeoutError(), ProducerFencedError()])
def test_other_kafka_errors_are_left_to_restart_the_session(error: KafkaError) -> None:
    raise_if_timeout_refused(error, 15.0, 10.0)
