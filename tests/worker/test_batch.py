"""One batch, one transaction: what publish_batch sends, in which order, and what it leaves on failure."""

import json
import time
from typing import Any

import pytest
from kafka.errors import KafkaTimeoutError

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import Detector
from stream_dedup.kafka.changelog import decode_entry
from stream_dedup.kafka.messages import InputReading
from stream_dedup.worker.batch import CommittedBatch, Destinations, publish_batch
from tests.corpus import make_corpus
from tests.worker.fakes import FakeProducer, document, record

CONFIG = DetectionConfig()
DESTINATIONS = Destinations("verdicts", "dead-letters", "stage.changelog", "uniques")
READING = InputReading(input_format="json", id_field="id", text_field="text", max_document_bytes=1 << 20)


def publish(
    records: list[Any], producer: FakeProducer, positions: dict[int, int], detector: Detector
) -> CommittedBatch:
    return publish_batch(
        records,
        detector,
        producer,  # type: ignore[arg-type]
        "group-metadata",
        positions,
        READING,
        DESTINATIONS,
        CONFIG.signature_fingerprint(),
        time.perf_counter(),
    )


def to(producer: FakeProducer, topic: str) -> list[Any]:
    return [sent for sent in producer.sent if sent.topic == topic]


def test_one_transaction_holds_verdicts_dead_letters_changelog_and_offsets_last() -> None:
    texts = make_corpus(3, seed=5)
    records = [
        document("documents", 0, 10, "a", texts[0]),
        record("documents", 1, 4, b"not json"),
        document("documents", 0, 11, "b", texts[0]),  # an exact copy of "a"
        document("documents", 1, 5, "c", texts[1]),
    ]
    producer, positions = FakeProducer(), {0: 10, 2: 7}
    committed = publish(records, producer, positions, Detector(CONFIG))

    assert producer.calls[0] == "begin_transaction"
    assert producer.calls[-2:] == ["send_offsets_to_transaction", "commit_transaction"]
    assert len(producer.committed) == 1 and producer.committed[0] == producer.sent
    verdicts = {json.loads(sent.value)["id"]: json.loads(sent.value) for sent in to(producer, "verdicts")}
    assert verdicts["a"]["verdict"] == "unique" and verdicts["c"]["verdict"] == "unique"
    assert verdicts["b"]["verdict"] == "duplicate" and verdicts["b"]["duplicate_of"] == "a"
    assert [sent.key for sent in to(producer, "uniques")] == [b"a", b"c"]
    (letter,) = to(producer, "dead-letters")
    assert letter.value == b"not json" and dict(letter.headers or [])["stream-dedup-reason"] == b"invalid_json"
    # Offsets: the next record to read, for the partitions of this batch only.
    assert {tp.partition: meta.offset for tp, meta in producer.offsets.items()} == {0: 12, 1: 6}
    assert positions == {0: 12, 1: 6, 2: 7}
    (changelog,) = to(producer, "stage.changelog")
    entry = decode_entry(changelog.value, CONFIG.signature_fingerprint())
    assert entry.documents.ids == ["a", "b", "c"] and entry.positions == positions
    assert committed.changelog_offset == 1
    assert committed.report.verdicts == {"unique": 2, "duplicate": 1}
    assert committed.report.dead_letters == {"invalid_json": 1}


def test_a_batch_of_only_dead_letters_still_writes_its_positions_to_the_changelog() -> None:
    producer, positions = FakeProducer(), {}
    publish([record("documents", 2, 0, b"\xff\xfe")], producer, positions, Detector(CONFIG))
    (changelog,) = to(producer, "stage.changelog")
    entry = decode_entry(changelog.value, CONFIG.signature_fingerprint())
    assert entry.documents.ids == [] and entry.positions == {2: 1} == positions


@pytest.mark.parametrize("failing", ["send", "send_offsets_to_transaction", "commit_transaction"])
def test_a_failed_transaction_leaves_the_positions_and_commits_nothing(failing: str) -> None:
    producer = FakeProducer(fail_on=failing, error=KafkaTimeoutError("broker gone"))
    positions = {0: 10}
    with pytest.raises(KafkaTimeoutError):
        publish([document("documents", 0, 10, "a", make_corpus(1)[0])], producer, positions, Detector(CONFIG))
    assert producer.committed == []
    assert positions == {0: 10}
