"""One batch, one transaction: what publish_batch sends, in which order, and what it leaves on failure."""

import json
import os
from typing import Any

import pytest
import xxhash
from kafka.errors import KafkaTimeoutError

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import Detector
from stream_dedup.kafka.changelog import decode_entry
from stream_dedup.kafka.messages import InputReading
from stream_dedup.kafka.record_fit import SizeLimit
from stream_dedup.worker.batch import CommittedBatch, Destinations
from stream_dedup.worker.signing import read_and_sign
from tests.corpus import make_corpus
from tests.worker.fakes import FakeProducer, document, publish_batch, record

CONFIG = DetectionConfig()
DESTINATIONS = Destinations("verdicts", "dead-letters", "stage.changelog", "uniques")
READING = InputReading(input_format="json", id_field="id", text_field="text", max_document_bytes=1 << 20)


def publish(
    records: list[Any], producer: FakeProducer, positions: dict[int, int], detector: Detector
) -> CommittedBatch:
    return publish_batch(
        read_and_sign(records, READING, detector),
        detector,
        producer,
        positions,
        DESTINATIONS,
        CONFIG.signature_fingerprint(),
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


def test_a_dead_letter_too_large_for_its_topic_goes_as_a_truncated_copy_and_the_batch_commits() -> None:
    texts = make_corpus(1, seed=8)
    huge = os.urandom(300_000)  # fits the input topic (it arrived compressed), not the dead-letter topic
    narrow = Destinations(
        "verdicts", "dead-letters", "stage.changelog", None, {"dead-letters": SizeLimit(message_bytes=100_000)}
    )
    producer = FakeProducer()
    detector = Detector(CONFIG)
    records = [record("documents", 0, 0, huge, b"k"), document("documents", 0, 1, "a", texts[0])]
    publish_batch(
        read_and_sign(records, InputReading(max_document_bytes=1000), detector),
        detector,
        producer,
        {},
        narrow,
        CONFIG.signature_fingerprint(),
    )
    (letter,) = to(producer, "dead-letters")
    headers = dict(letter.headers or [])
    assert headers["stream-dedup-reason"] == b"too_large"
    assert headers["stream-dedup-truncated"] == b"value"
    assert headers["stream-dedup-original-bytes"] == b"300000"
    assert headers["stream-dedup-original-xxh3-128"] == xxhash.xxh3_128_hexdigest(huge).encode()
    assert letter.key == b"k" and huge.startswith(letter.value or b"") and len(letter.value or b"") < 100_000
    # A topic narrower than the producer's batch gets its records one batch each.
    assert producer.calls[producer.calls.index("send") + 1 :].count("flush") == 1
    assert len(to(producer, "verdicts")) == 1 and producer.calls[-1] == "commit_transaction"


def test_a_unique_document_too_large_to_forward_gets_its_verdict_and_a_dead_letter_instead_of_a_forward() -> None:
    text = make_corpus(1, seed=9)[0]
    big_headers = [("trace", os.urandom(40_000))]
    forwarded = record("documents", 0, 0, json.dumps({"id": "a", "text": text}).encode(), b"a")._replace(
        headers=big_headers
    )
    small = Destinations(
        "verdicts", "dead-letters", "stage.changelog", "uniques", {"uniques": SizeLimit(message_bytes=32_000)}
    )
    producer, detector = FakeProducer(), Detector(CONFIG)
    committed = publish_batch(
        read_and_sign([forwarded], READING, detector),
        detector,
        producer,
        {},
        small,
        CONFIG.signature_fingerprint(),
    )
    assert to(producer, "uniques") == []
    (verdict,) = to(producer, "verdicts")
    assert json.loads(verdict.value or b"")["verdict"] == "unique"
    (letter,) = to(producer, "dead-letters")
    assert dict(letter.headers or [])["stream-dedup-reason"] == b"unique_too_large"
    assert letter.value == forwarded.value and ("trace", big_headers[0][1]) in (letter.headers or [])
    assert committed.report.dead_letters == {"unique_too_large": 1}


def test_the_report_lists_each_duplicate_published_with_its_record_in_the_order_judged() -> None:
    texts = make_corpus(1, seed=6) + make_corpus(1, seed=16)  # two unrelated texts
    records = [
        document("documents", 0, 10, "a", texts[0]),
        document("documents", 1, 3, "b", texts[1]),
        document("documents", 2, 7, "a-copy", texts[0]),
        record("documents", 1, 4, b"not json"),
        document("documents", 0, 11, "b-copy", texts[1]),
    ]

    committed = publish(records, FakeProducer(), {}, Detector(CONFIG))

    listed = [(d.verdict.id, d.verdict.duplicate_of, d.source[:3]) for d in committed.report.duplicates]
    assert listed == [("a-copy", "a", ("documents", 2, 7)), ("b-copy", "b", ("documents", 0, 11))]
    assert all(d.verdict.verdict == "duplicate" for d in committed.report.duplicates)
