"""Committing a transaction without waiting for ever, and naming a written topic deleted under it.

kafka-python's ``commit_transaction()`` waits for the commit with no timeout.
A transaction holding a partition of a topic deleted since it began (an
operator deleted the output topic while the stage ran) never commits: the
broker answers AddPartitionsToTxn with UNKNOWN_TOPIC_OR_PARTITION, which
kafka-python retries every ``retry_backoff_ms`` for ever, holding the
transaction's records (their delivery timeout never starts) and logging
nothing above DEBUG. The stage then published nothing and said nothing.

:func:`commit_transaction` waits in slices instead. When a commit takes
longer than a commit should, it asks the brokers which written topics still
exist, and raises :class:`MissingTopicError` naming a missing one and the
setting that names it; a commit that outlasts any the broker could still
complete raises ``KafkaTimeoutError``. Either ends the session like any
Kafka error: the next ``init_transactions()`` fences this producer and
aborts its transaction, so the batch is judged again and published once.

kafka-python 3.0.12 can also call a commit done that the brokers aborted. A
record of the transaction refused for its producer epoch (the brokers
aborted the transaction meanwhile: it outlived ``transaction_timeout_seconds``
while a broker was away or the process paused) makes the client bump its
epoch (KIP-360), which aborts the transaction, and then skip the commit's
EndTxn as if nothing had been added to it, marking the commit done without
an error (its sender thread logs "Invalid transition attempted from state
READY to state READY"). Nothing of the transaction was committed, its input
offsets neither: a caller taking it for committed would go on past records
that never get a verdict (a signer sequenced a backlog minus such a step).
So a commit under which the producer's id or epoch moved raises
:class:`AbortedCommitError`, and the batch is judged again as after any
failed commit.

``send_offsets_to_transaction()`` waits for ever too, for the group
coordinator to take the offsets: a transaction begun as the brokers went
away (an idle stage committing the offsets past the input's transaction
markers, :mod:`stream_dedup.kafka.processed_lag`) hung its session for good,
and the broker back did not end the wait. :func:`send_offsets` gives up
after the same bound as a commit.
"""

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError, KafkaTimeoutError

from stream_dedup.kafka.clients import KafkaConnection, missing_topics

#: A commit is a few round trips (about 50 ms on a local broker): one still
#: waiting after this long is stuck or the brokers are slow, and it is time to
#: ask them whether the topics it writes still exist.
_LOOK_AFTER_SECONDS = 5.0


class MissingTopicError(KafkaError):
    """A topic the open transaction writes does not exist any more; the message names it and its setting."""


class AbortedCommitError(KafkaError):
    """The brokers aborted the transaction while it committed, though the client called the commit done."""


@dataclass(frozen=True)
class WrittenTopics:
    """The topics a stage's transactions write, each with the setting that names it, and how long a commit may take.

    ``timeout_seconds`` is the longest a commit may wait at all: past the
    transaction timeout the broker has aborted the transaction itself, so a
    commit still waiting well after it will never return on its own.
    """

    connection: KafkaConnection
    #: Topic -> the setting naming it (``output_topic``, ``changelog_topic``, ...).
    settings: Mapping[str, str]
    timeout_seconds: float

    def missing(self) -> dict[str, str]:
        """The written topics the brokers do not know, each with its setting."""
        return {topic: self.settings[topic] for topic in missing_topics(self.connection, list(self.settings))}


def send_offsets(
    producer: KafkaProducer, offsets: Mapping[Any, Any], group_metadata: Any, written: WrittenTopics | None
) -> None:
    """``producer.send_offsets_to_transaction(offsets, group_metadata)``; raise rather than wait for ever.

    Raises ``KafkaTimeoutError`` after ``written.timeout_seconds``, or what
    the call itself raises. Without ``written``, or with a producer other
    than kafka-python's own (a test's fake), the producer's own call.
    """
    if written is None or not isinstance(producer, KafkaProducer):
        producer.send_offsets_to_transaction(offsets, group_metadata)
        return
    # send_offsets_to_transaction() less its unbounded wait (kafka-python 3.0, as for the commit below).
    result = producer._transaction_manager.send_offsets_to_transaction(offsets, group_metadata)
    producer._sender.wakeup()
    if not result.wait(timeout_ms=written.timeout_seconds * 1000):  # raises what the call raised
        raise KafkaTimeoutError(
            f"the group coordinator has not taken the transaction's offsets after {written.timeout_seconds:.0f} s"
        )


def commit_transaction(producer: KafkaProducer, written: WrittenTopics | None) -> None:
    """Commit the open transaction; raise rather than wait for ever (see the module docstring).

    Raises :class:`MissingTopicError` if a topic of ``written`` is gone,
    ``KafkaTimeoutError`` after ``written.timeout_seconds``,
    :class:`AbortedCommitError` if the brokers aborted the transaction while
    the client called it committed, or what the commit itself raises.
    Without ``written``, the producer's own wait; with a producer other than
    kafka-python's own (a test's fake), the producer's own commit.
    """
    if not isinstance(producer, KafkaProducer):
        producer.commit_transaction()
        return
    manager = producer._transaction_manager
    epoch = manager.producer_id_and_epoch
    if written is None:
        producer.commit_transaction()
    else:
        _bounded_commit(producer, written)
    if manager.producer_id_and_epoch != epoch:
        raise AbortedCommitError(
            f"the brokers aborted the transaction while it committed (the producer's epoch went from {epoch} to "
            f"{manager.producer_id_and_epoch}: a record of it was refused, as after the transaction outlived "
            "transaction_timeout_seconds); nothing of it was committed"
        )


def _bounded_commit(producer: KafkaProducer, written: WrittenTopics) -> None:
    """Commit, looking for deleted topics after a while and giving up after ``written.timeout_seconds``."""
    # commit_transaction() less its unbounded wait (kafka-python 3.0, whose minor version pyproject pins).
    result = producer._transaction_manager.begin_commit()
    producer._sender.wakeup()
    started = time.monotonic()
    while not result.wait(timeout_ms=_LOOK_AFTER_SECONDS * 1000):  # raises what the commit raised
        missing = written.missing()
        if missing:
            raise MissingTopicError(
                "the transaction cannot commit: "
                + "; ".join(f"{setting} {topic!r} does not exist (deleted?)" for topic, setting in missing.items())
            )
        waited = time.monotonic() - started
        if waited > written.timeout_seconds:
            raise KafkaTimeoutError(f"the transaction's commit has not completed after {waited:.0f} s")
