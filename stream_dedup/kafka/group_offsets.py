"""A consumer group's committed offsets, read with a bound on the wait.

A ``read_committed`` consumer asks for stable offsets (KIP-447): while a
transaction that commits offsets for a partition is open, the broker answers
UNSTABLE_OFFSET_COMMIT and kafka-python asks again, by default forever. A
transaction ends within its timeout, committed or aborted by the broker, so
an offset still unstable well past it is held by a *hanging* transaction:
one the brokers never completed, which a broker that crashed during the
transaction's commit can leave behind (its marker missing in
``__consumer_offsets``). Nothing the stage does clears it, and waiting
silently would publish nothing, for ever; so the wait ends with a
``KafkaError`` saying so (the session restarts, and logs it again), and
``docs/operating.md`` ("A hanging transaction") says how to abort it.
"""

import time

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError

from stream_dedup.kafka.clients import KafkaConnection

#: Beyond the transaction timeout, how long an unstable offset is waited for.
_MARGIN_SECONDS = 30.0


def committed_offset(
    consumer: KafkaConsumer, partition: TopicPartition, transaction_timeout_seconds: float
) -> int | None:
    """The group's committed offset of ``partition`` (``None`` if never committed).

    Raises ``KafkaError`` if it is still held by a transaction
    ``transaction_timeout_seconds`` + 30 s on (see the module docstring).
    """
    wait = transaction_timeout_seconds + _MARGIN_SECONDS
    try:
        committed = consumer.committed(partition, timeout_ms=int(wait * 1000))
    except KafkaTimeoutError as error:
        # The same timeout when the brokers are away: the message must not send the operator after a
        # transaction to abort while they are (the Kafka errors logged before it tell the two apart).
        raise KafkaError(
            f"the committed offset of {partition.topic} partition {partition.partition} is not given after "
            f"{wait:g} s: either the brokers are unreachable (see the Kafka errors logged before this), or it is "
            "still held by a transaction, a hanging one (a broker that crashed while one committed can leave "
            "one): abort that with kafka-transactions.sh (docs/operating.md, 'A hanging transaction')"
        ) from error
    return None if committed is None else int(committed)


def has_committed(connection: KafkaConnection, group_id: str, topic: str) -> bool:
    """Whether ``group_id`` has committed an offset of any partition of ``topic``: it has processed some of it.

    Retried for up to 30 s while the brokers cannot answer yet: a new cluster
    has no group coordinator until its offsets topic is made, which the
    first question about a group starts.
    """
    deadline = time.monotonic() + _MARGIN_SECONDS
    admin = KafkaAdminClient(**connection.options())
    try:
        while True:
            try:
                offsets = admin.list_group_offsets({group_id: None})[group_id]
                return any(partition.topic == topic for partition in offsets)
            except KafkaError as error:
                if not error.retriable or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
    finally:
        admin.close()
