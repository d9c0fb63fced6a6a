"""The changelog topic's configuration follows the index's retention and holds its largest record."""

import numpy as np
import pytest

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import Detector
from stream_dedup.kafka.changelog import MAX_MESSAGE_BYTES, ChangelogEntry, encode_entry
from stream_dedup.lsh import IndexedBatch
from stream_dedup.lsh.retention import MAX_AGE_SECONDS, MAX_DOCUMENTS
from stream_dedup.worker.settings import WorkerSettings
from stream_dedup.worker.topics import changelog_configs
from tests.corpus import make_corpus


def test_an_index_without_retention_keeps_its_whole_changelog() -> None:
    """Both limits said, not left to the broker's log.retention.* defaults."""
    configs = changelog_configs(WorkerSettings())
    assert configs["cleanup.policy"] == "delete"
    assert configs["retention.ms"] == "-1"
    assert configs["retention.bytes"] == "-1"


def test_age_retention_keeps_the_changelog_twice_as_long() -> None:
    configs = changelog_configs(WorkerSettings(detection=DetectionConfig(max_age_seconds=3600)))
    assert configs["retention.ms"] == str(2 * 3600 * 1000)
    assert configs["retention.bytes"] == "-1", "no count limit: however many documents an hour brings"


@pytest.mark.parametrize(("id_bytes", "times"), [(40, 2), (200, 1)])
def test_count_retention_keeps_the_bytes_of_the_documents_the_index_holds(id_bytes: int, times: int) -> None:
    """Twice over for ids of about 48 bytes; at least once for ids up to ~200 bytes."""
    detection = DetectionConfig(max_documents=10_000)
    kept = int(changelog_configs(WorkerSettings(detection=detection))["retention.bytes"])
    # Measured, not restated: what a batch of 1,000 such documents takes in the changelog.
    ids = [f"{i:0{id_bytes}d}" for i in range(1000)]
    signed = Detector(detection).sign(make_corpus(1000, seed=2))
    documents = IndexedBatch(ids, signed, np.zeros(1000), np.arange(1000, dtype=np.uint64))
    entry = ChangelogEntry(documents, "documents", {0: 1000})
    per_document = sum(len(v) for v in encode_entry(entry, detection.signature_fingerprint())) / 1000
    assert times * 10_000 * per_document <= kept <= 3 * 10_000 * per_document


def test_the_changelog_accepts_the_record_of_the_largest_document_with_exact_verification() -> None:
    settings = WorkerSettings(detection=DetectionConfig(verification="exact"))
    assert int(changelog_configs(settings)["max.message.bytes"]) == MAX_MESSAGE_BYTES
    # Random letters: about as many distinct shingles as characters, the worst case.
    rng = np.random.default_rng(1)
    text = "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz "), settings.max_document_bytes))
    signed = Detector(settings.detection).sign([text])
    documents = IndexedBatch(["largest"], signed, np.zeros(1), np.zeros(1, np.uint64))
    entry = ChangelogEntry(documents, "documents", {0: 1})
    (value,) = encode_entry(entry, settings.detection.signature_fingerprint())
    assert 3 << 20 < len(value) <= MAX_MESSAGE_BYTES


def test_count_retention_with_exact_verification_keeps_the_largest_documents_shingle_sets() -> None:
    """The changelog never drops what the index holds, whatever the documents' sizes."""
    settings = WorkerSettings(detection=DetectionConfig(verification="exact", max_documents=1000))
    kept = int(changelog_configs(settings)["retention.bytes"])
    rng = np.random.default_rng(2)
    text = "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz "), settings.max_document_bytes))
    signed = Detector(settings.detection).sign([text])
    documents = IndexedBatch(["largest"], signed, np.zeros(1), np.zeros(1, np.uint64))
    (value,) = encode_entry(ChangelogEntry(documents, "documents", {0: 1}), settings.detection.signature_fingerprint())
    assert kept >= 2 * 1000 * len(value)


def test_the_largest_retention_allowed_gives_history_topic_configs_kafka_accepts() -> None:
    """The bounds on max_documents, max_age_seconds and max_document_bytes keep both configs in a Kafka long."""
    detection = DetectionConfig(
        num_perm=4096,
        sketch_bits=4096,
        bands=4096,
        rows_per_band=1,
        verification="exact",
        max_documents=MAX_DOCUMENTS,
        max_age_seconds=MAX_AGE_SECONDS,
    )
    configs = changelog_configs(WorkerSettings(detection=detection, max_document_bytes=100 << 20))
    for name in ("retention.ms", "retention.bytes"):
        assert 0 < int(configs[name]) < 2**63, name
