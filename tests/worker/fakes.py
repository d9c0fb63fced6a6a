"""Fakes at the Kafka client edge only: the producer and the records a consumer returns."""

import json
import time
from dataclasses import dataclass, field
from typing import Any

import zstandard
from kafka.consumer.fetcher import ConsumerRecord

from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.kafka.value_blocks import ValueBlock
from stream_dedup.worker.batch import CommittedBatch, Destinations, commit_batch, judge_batch
from stream_dedup.worker.signing import SignedRecords


def record(topic: str, partition: int, offset: int, value: bytes | None, key: bytes | None = None) -> Any:
    """A record as kafka-python's consumer returns it."""
    return ConsumerRecord(topic, partition, -1, offset, 1_700_000_000_000 + offset, 0, key, value, [], None, -1, -1, -1)


def document(topic: str, partition: int, offset: int, doc_id: str, text: str) -> Any:
    return record(topic, partition, offset, json.dumps({"id": doc_id, "text": text}).encode(), doc_id.encode())


@dataclass
class Sent:
    topic: str
    key: bytes | None
    value: bytes | None
    partition: int | None
    headers: list[tuple[str, bytes]] | None


class _Future:
    def __init__(self, offset: int) -> None:
        self.offset = offset

    def get(self, timeout: float | None = None) -> "_Future":
        return self


@dataclass
class FakeProducer:
    """Records what a transactional KafkaProducer is asked to do; ``fail_on`` makes that call raise."""

    fail_on: str | None = None
    error: Exception | None = None
    calls: list[str] = field(default_factory=list)
    sent: list[Sent] = field(default_factory=list)
    offsets: dict[Any, Any] = field(default_factory=dict)
    committed: list[list[Sent]] = field(default_factory=list)
    _open: list[Sent] = field(default_factory=list)
    _next_offset: dict[str, int] = field(default_factory=dict)

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if name == self.fail_on:
            assert self.error is not None
            raise self.error

    def begin_transaction(self) -> None:
        self._call("begin_transaction")
        self._open = []

    def send(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        partition: int | None = None,
    ) -> _Future:
        self._call("send")
        sent = Sent(topic, key, value, partition, headers)
        self.sent.append(sent)
        self._open.append(sent)
        offset = self._next_offset.get(topic, 0)
        self._next_offset[topic] = offset + 1
        return _Future(offset)

    def flush(self, timeout: float | None = None) -> None:
        self._call("flush")

    def partitions_for(self, topic: str) -> set[int]:
        """Every topic has three partitions."""
        return {0, 1, 2}

    def send_offsets_to_transaction(self, offsets: dict[Any, Any], group: Any) -> None:
        self._call("send_offsets_to_transaction")
        self.offsets = dict(offsets)

    def commit_transaction(self) -> None:
        self._call("commit_transaction")
        self.committed.append(self._open)


def publish_batch(
    batch: SignedRecords,
    detector: DuplicateDetector,
    producer: "FakeProducer",
    positions: dict[int, int],
    destinations: Destinations,
    digest: str,
) -> CommittedBatch:
    """Judge ``batch`` and commit it, in turn, as the worker does over two batches; ``positions`` move on commit."""
    judged = judge_batch(batch, detector, positions, destinations, digest, time.perf_counter())
    committed = commit_batch(judged, producer, "group-metadata", destinations)
    positions.update(judged.after)
    return committed


def block_values(blocks: list[ValueBlock]) -> dict[int, bytes]:
    """Every value ``blocks`` hold, by key (decompressed: what a reader of them gets)."""
    values: dict[int, bytes] = {}
    for block in blocks:
        data = zstandard.ZstdDecompressor().decompress(block.data)
        for key, start, end in zip(block.keys, [0, *block.ends[:-1]], block.ends, strict=True):
            assert key not in values, "a key held by two blocks"
            values[key] = data[start:end]
    return values
