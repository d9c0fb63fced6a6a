"""Retention on a real broker: a copy is caught while its original is retained, and not long after.

The truth is the documented rule, not the code: the index keeps at least the
newest ``max_documents`` documents and at most a quarter more, so an exact
copy of a document 21 back is a duplicate and one of a document 120 back is
unique, whatever ``batch_size`` says; and it forgets what is older than
``max_age_seconds`` by event time (give or take a quarter of it, as whole
generations go), so a copy 30 s after its original is a duplicate and one
300 s after it unique, even when both wait in one backlog, and one after a
quiet spell longer than it unique.
"""

from __future__ import annotations

import contextlib
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
MAX_AGE_SECONDS = 60
#: Distinct documents first, then two exact copies: of the first (120 back) and of the 101st (21 back).
DISTINCT = 120


class _IndexSizes(WorkerEvents):
    """The documents the index held after each batch."""

    def __init__(self) -> None:
        self.held: list[int] = []

    def batch_committed(self, report: BatchReport) -> None:
        self.held.append(report.indexed_documents)


def _backlog() -> list[tuple[bytes, bytes, int, int]]:
    """The documents on 3 partitions, stamped in order: ``doc-120`` copies ``doc-0``, ``doc-121`` ``doc-100``."""
    texts = make_corpus(DISTINCT, seed=57, copies=0.0)
    texts += [texts[0], texts[100]]
    first = int(time.time() * 1000)
    return [
        (f"doc-{i}".encode(), json.dumps({"id": f"doc-{i}", "text": text}).encode(), i % 3, first + i)
        for i, text in enumerate(texts)
    ]


def _spread_in_time() -> list[tuple[bytes, bytes, int, int]]:
    """A backlog of a document a second for 300 s, stamped two days ago; ``doc-300`` copies ``doc-0``,
    ``doc-301`` copies ``doc-270``."""
    texts = make_corpus(300, seed=58, copies=0.0)
    texts += [texts[0], texts[270]]
    first = int(time.time() * 1000) - 2 * 86_400_000
    stamps = [first + 1000 * i for i in range(300)] + [first + 300_000, first + 300_000]
    return [
        (f"doc-{i}".encode(), json.dumps({"id": f"doc-{i}", "text": text}).encode(), i % 3, stamp)
        for i, (text, stamp) in enumerate(zip(texts, stamps, strict=True))
    ]


def _judged(
    stage: Stage, messages: list[tuple[bytes, bytes, int, int]], sharded: bool, events: WorkerEvents, **settings: Any
) -> dict[str, dict[str, Any]]:
    """The verdicts of a backlog of ``messages``, by document id: from one worker, or a signer, 2 shards and a judge."""
    produce(stage.bootstrap, stage.input_topic, messages)
    with contextlib.ExitStack() as running:
        if sharded:
            roles = dict(settings, index_slots=6, shards=2)
            running.enter_context(
                role_threads(
                    stage.settings("signer-1", role="signer", **roles),
                    *(stage.settings(f"shard-{k}", role="shard", shard_index=k, **roles) for k in range(2)),
                    stage.settings("judge-1", role="judge", **roles),
                )
            )
        else:
            running.enter_context(worker_thread(stage.settings(**settings), events=events))
        records = read_committed(stage.bootstrap, stage.output_topic, len(messages))
    return {v["id"]: v for v in (json.loads(r.value) for r in records)}


@pytest.mark.parametrize("sharded", [False, True], ids=["one-worker", "sharded"])
def test_a_batch_larger_than_a_generation_keeps_no_more_than_a_quarter_past_max_documents(
    stage: Stage, sharded: bool
) -> None:
    sizes = _IndexSizes()
    verdicts = _judged(stage, _backlog(), sharded, sizes, batch_size=BATCH_SIZE, max_documents=MAX_DOCUMENTS)

    assert verdicts["doc-121"]["duplicate_of"] == "doc-100"
    assert verdicts["doc-120"]["verdict"] == "unique"  # 120 documents back: forgotten
    assert max(sizes.held, default=0) <= MAX_DOCUMENTS * 5 // 4


@pytest.mark.parametrize("sharded", [False, True], ids=["one-worker", "sharded"])
def test_a_backlog_spanning_more_than_max_age_forgets_by_event_time_within_one_batch_size(
    stage: Stage, sharded: bool
) -> None:
    """All 302 records fit one batch of 1,000: yet ``doc-0`` is 300 s older than its copy, five times max_age."""
    messages = _spread_in_time()
    verdicts = _judged(stage, messages, sharded, WorkerEvents(), max_age_seconds=MAX_AGE_SECONDS)

    assert verdicts["doc-301"]["duplicate_of"] == "doc-270"
    assert verdicts["doc-300"]["verdict"] == "unique"
    # No match lies more than max_age and a half back (whole generations go), whatever the batch.
    stamps = {f"doc-{i}": stamp for i, (_, _, _, stamp) in enumerate(messages)}
    for verdict in verdicts.values():
        if verdict["verdict"] == "duplicate":
            assert stamps[verdict["id"]] - stamps[verdict["duplicate_of"]] <= 1500 * MAX_AGE_SECONDS


@pytest.mark.parametrize("sharded", [False, True], ids=["one-worker", "sharded"])
def test_a_copy_after_a_quiet_spell_meets_nothing_the_spell_outlived(stage: Stage, sharded: bool) -> None:
    """``doc-0`` two days ago, its copies an hour and two hours later, and one 30 s after that: only the last is a
    duplicate (of the one before it), although each spell's first record finds the index as the spell left it."""
    texts = make_corpus(10, seed=59, copies=0.0)
    first = int(time.time() * 1000) - 2 * 86_400_000
    stamps = [first + 1000 * i for i in range(10)] + [first + 3_600_000, first + 7_200_000, first + 7_230_000]
    messages = [
        (f"doc-{i}".encode(), json.dumps({"id": f"doc-{i}", "text": texts[i if i < 10 else 0]}).encode(), i % 3, stamp)
        for i, stamp in enumerate(stamps)
    ]
    verdicts = _judged(stage, messages, sharded, WorkerEvents(), max_age_seconds=MAX_AGE_SECONDS)

    assert [verdicts[f"doc-{i}"].get("duplicate_of") for i in (10, 11, 12)] == [None, None, "doc-11"]
