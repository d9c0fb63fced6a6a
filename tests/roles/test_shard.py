"""The shard's step without a broker: it refuses batches of another input than the one it reads texts from."""

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from kafka import TopicPartition

from stream_dedup.cli.settings_sources import resolve_settings
from stream_dedup.engine import make_detector
from stream_dedup.errors import ConfigError
from stream_dedup.kafka.changelog import ChangelogEntry, encode_entry
from stream_dedup.lsh import IndexedBatch
from stream_dedup.roles.shard import Shard
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.settings import WorkerSettings
from stream_dedup.worker.snapshot_store import SnapshotStore
from tests.corpus import make_corpus


class Record(NamedTuple):
    offset: int
    value: bytes


def shard_settings(method: str = "minhash") -> WorkerSettings:
    return resolve_settings(
        {}, {"STREAM_DEDUP_ROLE": "shard", "STREAM_DEDUP_INPUT_TOPIC": "documents", "STREAM_DEDUP_METHOD": method}
    )


def sequenced_record(settings: WorkerSettings, input_topic: str) -> Record:
    """A sequenced record of 20 distinct documents (no pair near the threshold: no text is read) of ``input_topic``."""
    detector = make_detector(settings.detection)
    batch = IndexedBatch(
        [f"d{i}" for i in range(20)],
        detector.sign(make_corpus(20, seed=8, copies=0.0)),
        np.full(20, 1.5),
        np.arange(20, dtype=np.uint64),
    )
    (value,) = encode_entry(ChangelogEntry(batch, input_topic, {}), settings.detection.signature_fingerprint())
    return Record(0, value)


def shard(settings: WorkerSettings, directory: Path) -> Shard:
    texts = settings.record_texts(str(directory))
    return Shard(settings, SnapshotStore(directory, settings.snapshots_kept), WorkerEvents(), texts)


def test_a_batch_of_another_input_topic_than_the_shards_stops_it_naming_input_topic(tmp_path: Path) -> None:
    """The shard reads the texts of pairs near the threshold at the batch's sources in its own input_topic: in
    another topic those are other records (the verdicts silently differ from one process's)."""
    settings = shard_settings()
    running = shard(settings, tmp_path)
    partition = TopicPartition(settings.sequenced_topic, 0)

    with pytest.raises(ConfigError, match=r"'input_topic'.*input topic 'elsewhere'.*input_topic 'documents'"):
        running.step({partition: [sequenced_record(settings, "elsewhere")]})


def test_a_batch_of_the_shards_input_topic_is_answered(tmp_path: Path) -> None:
    settings = shard_settings()
    outgoing = shard(settings, tmp_path).step(
        {TopicPartition(settings.sequenced_topic, 0): [sequenced_record(settings, "documents")]}
    )

    assert outgoing is not None and outgoing.report.documents == 20


def test_a_shard_that_reads_no_text_answers_a_batch_of_any_input_topic(tmp_path: Path) -> None:
    """SimHash settles nothing by text: the shard never reads the input, whatever its input_topic."""
    settings = shard_settings("simhash")
    outgoing = shard(settings, tmp_path).step(
        {TopicPartition(settings.sequenced_topic, 0): [sequenced_record(settings, "elsewhere")]}
    )

    assert outgoing is not None and outgoing.report.documents == 20
