"""A transaction the brokers aborted while it committed is never taken for committed.

kafka-python 3.0.12 bumps its producer epoch when a record of the
transaction is refused for its epoch (the brokers aborted the transaction,
here because it outlived its timeout), then skips the commit's EndTxn and
calls the commit done (see ``kafka.bounded_commit``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence

import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.errors import KafkaError

from stream_dedup.kafka.bounded_commit import WrittenTopics, commit_transaction
from stream_dedup.kafka.clients import KafkaConnection, transactional_producer
from stream_dedup.kafka.record_fit import SizeLimit
from stream_dedup.kafka.sending import Send, keyed_partitions, send_all
from tests.corpus import make_clustered_corpus

from .stage import Stage, document_messages, produce, read_committed
from .test_broker import read_to_end
from .test_roles import a_signer_two_shards_and_a_judge, check_one_process_verdicts_once

pytestmark = pytest.mark.kafka

#: The transaction timeout of the producer under test; the test broker looks for timed-out ones every second.
TIMEOUT_SECONDS = 2.0


@pytest.mark.parametrize("bounded", [True, False], ids=["bounded", "unbounded"])
def test_a_commit_the_brokers_aborted_raises_instead_of_returning(
    kafka_bootstrap: str, topic_factory: Callable[..., str], bounded: bool
) -> None:
    topic = topic_factory(partitions=1)
    connection = KafkaConnection(kafka_bootstrap)
    written = WrittenTopics(connection, {topic: "output_topic"}, 60) if bounded else None
    producer = transactional_producer(connection, f"test-aborted-{uuid.uuid4().hex}", TIMEOUT_SECONDS)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, b"before").get(30)
        # A broker away, or the process paused, past the transaction's timeout: the brokers abort it.
        time.sleep(TIMEOUT_SECONDS + 3)
        refused = producer.send(topic, b"after")
        with pytest.raises(KafkaError, match="aborted the transaction"):
            commit_transaction(producer, written)
        assert refused.failed()
        # The producer goes on: the next transaction commits.
        producer.begin_transaction()
        producer.send(topic, b"next")
        commit_transaction(producer, written)
    finally:
        producer.close(timeout=5)
    assert read_to_end(kafka_bootstrap, TopicPartition(topic, 0), "read_committed") == [b"next"]


def test_a_judge_paused_mid_transaction_past_its_timeout_publishes_that_step_once_all_the_same(
    stage: Stage, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A judge's step: a verdict to each partition and the offsets sent, then a pause past the transaction
    timeout (a broker away, a frozen VM), then the other verdicts, and the commit.

    The brokers aborted the step, and the client called its commit done: the
    judge went on from the next step, and the step's verdicts were never
    published (its offsets, committed past by the next step, were lost too).
    """
    #: The judge's producer -> the verdicts it holds back; with one judge, at most one entry, once.
    held: dict[int, list[Send]] = {}

    def sending_part(producer: KafkaProducer, sends: Sequence[Send], limits: Mapping[str, SizeLimit]) -> None:
        if held or len(sends) < 4 or any(send.topic != stage.output_topic for send in sends):
            send_all(producer, sends, limits)
            return
        # The first record of each partition now: the rest go to partitions already in the transaction.
        partitions = keyed_partitions(producer, sends)
        early = {partitions.index(partition) for partition in set(partitions)}
        send_all(producer, [send for i, send in enumerate(sends) if i in early], limits)
        producer.flush()
        held[id(producer)] = [send for i, send in enumerate(sends) if i not in early]

    def committing_after_a_pause(producer: KafkaProducer, written: WrittenTopics | None) -> None:
        if id(producer) in held and not paused:
            paused.append(True)
            time.sleep(TIMEOUT_SECONDS + 3)
            send_all(producer, held[id(producer)], {})
        commit_transaction(producer, written)

    paused: list[bool] = []
    monkeypatch.setattr("stream_dedup.roles.session.send_all", sending_part)
    monkeypatch.setattr("stream_dedup.roles.session.commit_transaction", committing_after_a_pause)
    corpus = make_clustered_corpus(600, seed=71)
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    with a_signer_two_shards_and_a_judge(stage, transaction_timeout_seconds=TIMEOUT_SECONDS) as runners:
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=60, settle=3)
        sequenced = runners[0].settings.sequenced_topic
    assert paused
    check_one_process_verdicts_once(stage, records, sequenced, len(corpus))
