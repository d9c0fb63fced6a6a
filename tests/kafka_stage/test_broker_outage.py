"""The broker away: what a replica reports meanwhile, and how it comes back."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from kafka import TopicPartition

from stream_dedup.kafka.clients import KafkaConnection, partition_reader
from stream_dedup.kafka.processed_lag import ProcessedLag

from .broker import JarBroker
from .stage import produce, wait_until
from .test_failover import own_stage

pytestmark = pytest.mark.kafka


def test_measuring_the_lag_waits_for_no_broker(own_broker: JarBroker, tmp_path: Path) -> None:
    """kafka-python's ``position()`` settles a position being reset or validated (KIP-320, which it starts by
    itself once a connection to a leader breaks) with the brokers, for as long as they stay away when given no
    timeout: a signer hung there through a broker outage, "active" and ready, its loop stopped. An unsettled
    position counts nothing past the last commit instead."""
    stage = own_stage(own_broker, tmp_path)
    partition = TopicPartition(stage.input_topic, 0)
    produce(stage.bootstrap, stage.input_topic, [(None, b"record", 0)] * 10)
    consumer = partition_reader(KafkaConnection(stage.bootstrap), partition, 0, "earliest")
    lag = ProcessedLag()
    lag.start({partition: 0})
    polled: list[object] = []
    wait_until(lambda: polled.extend(consumer.poll(200).get(partition, [])) or len(polled) == 10, 30, "a fetch")
    lag.given({partition: polled})
    lag.committed({partition: 10})
    assert lag.measure(consumer) == {(stage.input_topic, 0): 0}  # the position has passed the feeder's marker
    own_broker.stop()
    consumer.seek_to_beginning(partition)  # a position only the brokers can settle
    measured: list[dict[tuple[str, int], int]] = []
    measuring = threading.Thread(target=lambda: measured.append(lag.measure(consumer)), daemon=True)
    measuring.start()
    measuring.join(10)
    # (If it hangs, the consumer is left to the daemon thread: closing it under the call could hang too.)
    assert not measuring.is_alive(), "measuring the lag waits for the brokers"
    assert measured == [{(stage.input_topic, 0): 1}]  # the marker: nothing is known past the commit
    consumer.close(timeout_ms=1000)
