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

from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError, KafkaTimeoutError

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
        raise KafkaError(
            f"the committed offset of {partition.topic} partition {partition.partition} is still held by a "
            f"transaction after {wait:g} s: a hanging transaction (a broker that crashed while one committed can "
            "leave one); abort it with kafka-transactions.sh (docs/operating.md, 'A hanging transaction')"
        ) from error
    return None if committed is None else int(committed)
