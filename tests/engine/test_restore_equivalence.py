"""A detector stopped and restored (snapshot, changelog replay, or both) judges on as if never stopped.

The Kafka stage restores its index from the newest snapshot and replays the
changelog after it (``worker.replay``): each batch's :class:`IndexedBatch` as
written by ``kafka.changelog``, through ``process_signed`` without texts. For
every method and setting that changes what the index stores (exact
verification's shingle sets, SimHash fingerprints, containment's set sizes,
slots, a hot-bucket cap that binds, retention by count and by event time),
the verdicts after the restore must be those of the run that never stopped.
"""

import itertools
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.engine.snapshot import load_snapshot, save_snapshot
from stream_dedup.engine.verdict import Verdict
from stream_dedup.kafka.changelog import ChangelogEntry, decode_entry, encode_entry, merge_parts
from stream_dedup.lsh import IndexedBatch
from stream_dedup.text import normalize_all
from stream_dedup.text.spool import TextSpool
from tests.corpus import make_clustered_corpus

DOCUMENTS = 160
CORPUS = make_clustered_corpus(DOCUMENTS, seed=41, copies=0.5)
TEXTS = normalize_all(text for text, _ in CORPUS)
IDS = [f"doc-{i}" for i in range(DOCUMENTS)]
SOURCES = np.arange(1, DOCUMENTS + 1, dtype=np.uint64)


@st.composite
def configs(draw: st.DrawFn) -> DetectionConfig:
    method = draw(st.sampled_from(["minhash", "simhash", "combined"]))
    jaccard = method != "simhash"
    return DetectionConfig(
        method=method,
        threshold=draw(st.sampled_from([0.5, 0.7, 0.8])),
        verification=draw(st.sampled_from(["estimate", "exact"])) if jaccard else "estimate",
        containment_threshold=draw(st.sampled_from([None, 0.7])) if jaccard else None,
        index_slots=draw(st.sampled_from([1, 2, 3])),
        max_bucket_size=draw(st.sampled_from([1, 2, 64])),
        max_hamming=draw(st.sampled_from([3, 8])),
        max_documents=draw(st.sampled_from([None, 13, 40])),
        max_age_seconds=draw(st.sampled_from([None, 20.0, 60.0])),
    )


def batches_of(cuts: list[int]) -> list[tuple[int, int]]:
    """Row ranges of the batches the stream is cut into at ``cuts``."""
    return list(itertools.pairwise(sorted({0, DOCUMENTS, *cuts})))


def judge(
    detector: DuplicateDetector, span: tuple[int, int], times: np.ndarray, spool: TextSpool
) -> tuple[list[Verdict], IndexedBatch]:
    start, stop = span
    batch = IndexedBatch(
        IDS[start:stop], detector.sign(TEXTS[start:stop], normalized=True), times[start:stop], SOURCES[start:stop]
    )
    return detector.process_signed(batch, spool), batch


def through_changelog(batch: IndexedBatch, config: DetectionConfig) -> IndexedBatch:
    """What a replay reads back of a batch's changelog records (split into parts when large)."""
    digest = config.signature_fingerprint()
    values = encode_entry(ChangelogEntry(batch, "input", {0: 1}), digest, max_bytes=4096)
    return merge_parts([decode_entry(value, digest) for value in values]).documents


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    config=configs(),
    cuts=st.lists(st.integers(1, DOCUMENTS - 1), min_size=1, max_size=12),
    gaps=st.lists(st.floats(0.0, 6.0), min_size=DOCUMENTS, max_size=DOCUMENTS),
    data=st.data(),
)
def test_a_restored_detector_judges_on_as_the_one_never_stopped(
    tmp_path: Path, config: DetectionConfig, cuts: list[int], gaps: list[float], data: st.DataObject
) -> None:
    times = 1_000_000.0 + np.cumsum(gaps)
    spans = batches_of(cuts)
    stop_at = data.draw(st.integers(1, len(spans)), label="stop after batch")
    snapshot_at = data.draw(st.integers(0, stop_at), label="snapshot after batch (0: none, changelog alone)")
    with TextSpool() as spool:
        spool.add(SOURCES.tolist(), TEXTS)
        never_stopped = make_detector(config)
        expected: list[Verdict] = []
        logged: list[IndexedBatch] = []
        snapshot = tmp_path / "index.snap"
        for number, span in enumerate(spans, start=1):
            verdicts, batch = judge(never_stopped, span, times, spool)
            expected += verdicts
            logged.append(through_changelog(batch, config))
            if number == snapshot_at:
                save_snapshot(never_stopped, snapshot)
        restored = load_snapshot(snapshot, config)[0] if snapshot_at else make_detector(config)
        for batch in logged[snapshot_at:stop_at]:
            restored.process_signed(batch)
        after = [v for span in spans[stop_at:] for v in judge(restored, span, times, spool)[0]]
    assert after == expected[spans[stop_at - 1][1] :]
