"""Stopped at random moments (kill -9, SIGTERM) under every method: one verdict per record, as if never stopped.

``test_crash`` kills a stage of the default settings. Here each setting that
changes what the index and its changelog hold runs the same way: SimHash
fingerprints in a Hamming index, ``combined`` with exact verification
(shingle sets and fingerprints), containment (set sizes, its own banding),
slots with a hot-bucket cap that binds. Some restarts find their snapshots
deleted and rebuild the index from the changelog alone. The published
verdicts are compared with an uninterrupted in-process run under the same
settings (which ``tests/engine/test_restore_equivalence.py`` and the stage's
batch-boundary independence make the truth for any cut of the batches).
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from kafka import KafkaConsumer, TopicPartition

from benchmarks.corpus import containment_stream
from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from stream_dedup.kafka.changelog import ChangelogEntry, decode_entry, merge_parts
from stream_dedup.lsh import IndexedBatch
from stream_dedup.text import normalize_all
from tests.corpus import make_clustered_corpus
from tests.real_text import stdlib_paragraphs

from .stage import Stage, WorkerProcess, document_messages, one_run, produce, read_committed

pytestmark = pytest.mark.kafka

#: What an in-process run predicts of each verdict (the sources are Kafka's).
PREDICTED = ("id", "verdict", "duplicate_of", "similarity", "hamming_distance", "containment")

SETTINGS: dict[str, dict[str, Any]] = {
    "simhash": {"method": "simhash", "max_hamming": 6, "index_slots": 2, "max_bucket_size": 2},
    "combined-exact": {"method": "combined", "max_hamming": 10, "verification": "exact", "threshold": 0.7},
    "containment-exact": {
        "containment_threshold": 0.8,
        "verification": "exact",
        "index_slots": 3,
        "max_bucket_size": 3,
    },
}


def corpus_for(name: str, documents: int, seed: int) -> list[tuple[str, int]]:
    """Near-copies of edited texts; for containment, real prose with planted excerpts and expansions first."""
    if not name.startswith("containment"):
        return make_clustered_corpus(documents, seed=seed, copies=0.5)
    # The standard library's docs make ~400 such documents.
    stream = containment_stream(min(documents, 400), paragraphs=stdlib_paragraphs(), seed=seed)
    rest = make_clustered_corpus(max(0, documents - len(stream)), seed=seed, copies=0.5)
    return [(d.text, 0) for d in stream] + rest


def run_with_stops(stage: Stage, tmp_path: Path, settings: dict[str, Any], stops: int, seed: int) -> None:
    """Run a worker over the input's backlog, stopping it ``stops`` times at random moments, and leave it running.

    Each stop is a kill -9 or a SIGTERM; after some, the snapshots are deleted,
    so that the restore replays the whole changelog.
    """
    rng = random.Random(seed)
    environment = stage.environment(batch_size=25, snapshot_interval_seconds=1, **settings)
    snapshots = Path(environment["STREAM_DEDUP_SNAPSHOT_DIR"])
    worker = WorkerProcess(environment, tmp_path / "worker.log").start()
    for _ in range(stops):
        time.sleep(rng.uniform(0.5, 3.0))
        if rng.random() < 0.5:
            worker.kill()
        else:
            worker.signal(signal.SIGTERM)
            # -SIGTERM: stopped while Python was still importing, before the handler was installed.
            assert worker.wait(60) in (0, -signal.SIGTERM), "a worker stopped by SIGTERM exited with an error"
        if rng.random() < 0.3:
            shutil.rmtree(snapshots, ignore_errors=True)
        worker.start()


def check_one_verdict_each(verdicts: list[dict[str, Any]], documents: int) -> None:
    """One verdict per input record, and every match_source where its match was read."""
    sources = [(v["source"]["partition"], v["source"]["offset"]) for v in verdicts]
    assert len(set(sources)) == len(sources) == documents, "a record got no verdict, or more than one"
    where = {v["id"]: {k: v["source"][k] for k in ("topic", "partition", "offset")} for v in verdicts}
    pointed = [(v["match_source"], where[v["duplicate_of"]]) for v in verdicts if v["duplicate_of"]]
    assert all(source == match for source, match in pointed), "a match_source is not where its match was read"


def check_stopped_run(stage: Stage, tmp_path: Path, name: str, documents: int, stops: int, seed: int) -> None:
    """Feed a backlog, stop the worker ``stops`` times, and compare its verdicts with an uninterrupted run's."""
    corpus = corpus_for(name, documents, seed)
    messages = document_messages(corpus, partitions=3)
    for start in range(0, len(messages), 5000):
        produce(stage.bootstrap, stage.input_topic, messages[start : start + 5000])
    settings = SETTINGS[name]
    run_with_stops(stage, tmp_path, settings, stops, seed)
    records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=max(240, documents // 40))
    verdicts = [json.loads(r.value) for r in records]
    check_one_verdict_each(verdicts, len(corpus))
    expected = {v.id: {k: v.to_dict().get(k) for k in PREDICTED} for v in one_run(corpus, DetectionConfig(**settings))}
    published = {v["id"]: {k: v.get(k) for k in PREDICTED} for v in verdicts}
    wrong = {i: (published[i], expected[i]) for i in expected if published[i] != expected[i]}
    assert not wrong, f"{len(wrong)} verdicts differ from an uninterrupted run, e.g. {next(iter(wrong.items()))}"
    assert sum(v["verdict"] != "unique" for v in expected.values()) > len(corpus) // 10


#: The variant CI runs of each test; the others run with ``-m long``.
SHORT = ("containment-exact", "age-combined")


def in_ci_or_long(names: list[str]) -> list[Any]:
    """``names`` as parameters, those outside :data:`SHORT` marked ``long`` (each run takes about 30 s)."""
    return [name if name in SHORT else pytest.param(name, marks=pytest.mark.long) for name in names]


@pytest.mark.parametrize("name", in_ci_or_long(list(SETTINGS)))
def test_stopped_and_restarted_under_each_method_publishes_an_uninterrupted_runs_verdicts_once(
    stage: Stage, tmp_path: Path, name: str
) -> None:
    check_stopped_run(stage, tmp_path, name, documents=1500, stops=6, seed=51)


@pytest.mark.long
@pytest.mark.parametrize("name", list(SETTINGS))
def test_stopped_and_restarted_many_times_under_each_method_over_a_longer_stream(
    stage: Stage, tmp_path: Path, name: str
) -> None:
    check_stopped_run(stage, tmp_path, name, documents=15_000, stops=20, seed=52)


class _TextsByDocument:
    """Normalised texts by the sources the stage gave the documents (a dict: sources are not in stream order)."""

    def __init__(self, texts: dict[int, str]) -> None:
        self.texts = texts

    def texts_of(self, sources: np.ndarray) -> list[str | None]:
        return [self.texts.get(source) for source in sources.tolist()]


def committed_batches(stage: Stage, config: DetectionConfig) -> list[IndexedBatch]:
    """The batches the stage judged and committed, as its changelog holds them, in order."""
    consumer = KafkaConsumer(
        bootstrap_servers=stage.bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    try:
        partition = TopicPartition(f"{stage.group_id}.changelog", 0)
        consumer.assign([partition])
        consumer.seek_to_beginning(partition)
        end = consumer.end_offsets([partition])[partition]
        entries: list[ChangelogEntry] = []
        while consumer.position(partition) < end:
            for record in consumer.poll(timeout_ms=500).get(partition, []):
                entries.append(decode_entry(record.value, config.signature_fingerprint()))
    finally:
        consumer.close()
    batches, parts = [], []
    for entry in entries:
        parts.append(entry)
        if entry.final:
            batches.append(merge_parts(parts).documents)
            parts = []
    return [batch for batch in batches if batch.ids]


#: Retention that evicts mid-stream: by count (a generation of 40, batches of 25 do not align with it) and by age.
#: No hot-bucket cap that binds: it counts per generation, so an unbounded index (one generation) caps otherwise.
RETENTION: dict[str, dict[str, Any]] = {
    "count": {"max_documents": 160, "index_slots": 2},
    "age-simhash": {"method": "simhash", "max_age_seconds": 16.0, "max_hamming": 6},
    "age-combined": {"method": "combined", "max_age_seconds": 16.0, "containment_threshold": 0.7},
}


@pytest.mark.parametrize("name", in_ci_or_long(list(RETENTION)))
def test_restarted_with_retention_evicting_judges_each_batch_as_its_changelog_replayed_never_stopped(
    stage: Stage, tmp_path: Path, name: str
) -> None:
    """Batches are cut anew at each restart, so retention forgets at other documents than without stops.

    The truth is then twofold: every published verdict is the one a detector
    never stopped gives the batches as the stage cut them (its changelog
    replayed in process, texts near the threshold settled as the stage
    settles them), and it differs from an unbounded index's verdict only
    where that one's match lies beyond what retention promises to keep (the
    newest ``max_documents``, or ``max_age_seconds`` of event time).
    """
    settings = RETENTION[name]
    config = DetectionConfig(**settings)
    corpus = make_clustered_corpus(1200, seed=53, copies=0.5)
    # 0.1 s apart: 16 s of age is the newest 160 documents, a backlog the stage judges in batches of 25.
    first = int(time.time() * 1000) - 200_000
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, 3, first, spacing_ms=100))
    run_with_stops(stage, tmp_path, settings, stops=6, seed=53)
    verdicts = [json.loads(r.value) for r in read_committed(stage.bootstrap, stage.output_topic, len(corpus))]
    check_one_verdict_each(verdicts, len(corpus))
    texts = dict(zip((f"doc-{i}" for i in range(len(corpus))), normalize_all(t for t, _ in corpus), strict=True))
    batches = committed_batches(stage, config)
    by_source = _TextsByDocument(
        {int(s): texts[i] for b in batches for i, s in zip(b.ids, b.sources.tolist(), strict=True)}
    )
    never_stopped = make_detector(config)
    replayed = {v.id: v.to_dict() for b in batches for v in never_stopped.process_signed(b, by_source)}
    published = {v["id"]: {k: v.get(k) for k in PREDICTED} for v in verdicts}
    wrong = {i: (p, replayed[i]) for i, p in published.items() if p != {k: replayed[i].get(k) for k in PREDICTED}}
    assert not wrong, f"{len(wrong)} verdicts differ from the changelog replayed, e.g. {next(iter(wrong.items()))}"
    unbounded = one_run(corpus, replace(config, max_documents=None, max_age_seconds=None))
    position = {f"doc-{i}": i for i in range(len(corpus))}
    forgotten = 0
    for verdict in unbounded:
        if published[verdict.id] == {k: verdict.to_dict().get(k) for k in PREDICTED}:
            continue
        forgotten += 1
        assert verdict.duplicate_of is not None, f"{verdict.id}: retention found a match an unbounded index did not"
        back = position[verdict.id] - position[verdict.duplicate_of]
        kept = config.max_documents if config.max_documents is not None else 10 * (config.max_age_seconds or 0)
        assert back > kept, f"{verdict.id}: its match {back} documents back was forgotten ({settings})"
    assert forgotten > 20, "retention forgot too little to test it"
