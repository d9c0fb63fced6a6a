"""Retention by count on a real broker: a copy is caught within ``max_documents`` and never a quarter past it.

The truth is the documented rule, not the code: the index keeps at least the
newest ``max_documents`` documents and at most a quarter more, so an exact
copy of a document 21 back is a duplicate and one of a document 120 back is
unique, whatever ``batch_size`` says.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from stream_dedup.worker.events import BatchReport, WorkerEvents
from tests.corpus import make_corpus

from .stage import Stage, produce, read_committed, role_threads, worker_thread

pytestmark = pytest.mark.kafka

MAX_DOCUMENTS = 40
#: Far more than a generation (10 documents): a backlog is judged in batches of up to this many records.
BATCH_SIZE = 100
#: Distinct documents first, then two exact copies: of the first (120 back) and of the 101st (21 back).
DISTINCT = 120


class _IndexSizes(WorkerEvents):
    """The documents the index held after each batch."""

    def __init__(self) -> None:
        self.held: list[int] = []

    def batch_committed(self, report: BatchReport) -> None:
        self.held.append(report.indexed_documents)


def _backlog(stage: Stage) -> list[tuple[bytes, bytes, int, int]]:
    """The documents on 3 partitions, stamped in order: ``doc-120`` copies ``doc-0``, ``doc-121`` ``doc-100``."""
    texts = make_corpus(DISTINCT, seed=57, copies=0.0)
    texts += [texts[0], texts[100]]
    first = int(time.time() * 1000)
    return [
        (f"doc-{i}".encode(), json.dumps({"id": f"doc-{i}", "text": text}).encode(), i % 3, first + i)
        for i, text in enumerate(texts)
    ]


def _verdicts(records: list[Any]) -> dict[str, dict[str, Any]]:
    return {v["id"]: v for v in (json.loads(r.value) for r in records)}


def test_a_batch_larger_than_a_generation_keeps_no_more_than_a_quarter_past_max_documents(stage: Stage) -> None:
    messages = _backlog(stage)
    produce(stage.bootstrap, stage.input_topic, messages)
    sizes = _IndexSizes()
    with worker_thread(stage.settings(batch_size=BATCH_SIZE, max_documents=MAX_DOCUMENTS), events=sizes):
        verdicts = _verdicts(read_committed(stage.bootstrap, stage.output_topic, len(messages)))

    assert verdicts["doc-121"]["duplicate_of"] == "doc-100"
    assert verdicts["doc-120"]["verdict"] == "unique"  # 120 documents back: forgotten
    assert max(sizes.held) <= MAX_DOCUMENTS * 5 // 4


def test_sharded_roles_batch_no_more_than_a_generation_either(stage: Stage) -> None:
    messages = _backlog(stage)
    produce(stage.bootstrap, stage.input_topic, messages)
    roles = dict(batch_size=BATCH_SIZE, max_documents=MAX_DOCUMENTS, index_slots=6, shards=2)
    with role_threads(
        stage.settings("signer-1", role="signer", **roles),
        *(stage.settings(f"shard-{k}", role="shard", shard_index=k, **roles) for k in range(2)),
        stage.settings("judge-1", role="judge", **roles),
    ):
        verdicts = _verdicts(read_committed(stage.bootstrap, stage.output_topic, len(messages)))

    assert verdicts["doc-121"]["duplicate_of"] == "doc-100"
    assert verdicts["doc-120"]["verdict"] == "unique"
