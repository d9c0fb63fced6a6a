"""Batch reports: what the metrics are computed from."""

from collections import Counter

import numpy as np
import pytest

from stream_dedup.worker.events import BatchReport


def report(committed_at: float, timestamps_ms: list[int]) -> BatchReport:
    return BatchReport(
        verdicts=Counter(unique=len(timestamps_ms)),
        dead_letters=Counter(),
        seconds=0.1,
        committed_at=committed_at,
        timestamps_ms=np.array(timestamps_ms, dtype=np.int64),
        candidates=np.zeros(len(timestamps_ms), dtype=np.int64),
        candidate_pairs=0,
        verified_pairs=0,
        indexed_documents=0,
        index_bytes=0,
        evicted_documents=0,
        hot_bucket_skips=0,
    )


def test_latency_is_commit_time_minus_record_timestamp_leaving_out_records_without_one() -> None:
    committed_at = 1_800_000_000.0
    stamps = [1_800_000_000_000 - 4, 1_800_000_000_000 - 2000, -1]
    assert report(committed_at, stamps).latencies == pytest.approx([0.004, 2.0], abs=1e-6)
