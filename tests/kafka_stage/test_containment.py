"""Containment on the Kafka stage, against the real broker: excerpts get ``contained`` with their match's source.

The stream is real prose with planted excerpts and expansions
(``benchmarks.corpus.containment_stream``); the published verdicts are
compared with an uninterrupted in-process run, and each containment verdict's
``match_source`` with where its match was read; sharded roles publish the
same verdicts as one process.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchmarks.corpus import containment_stream
from stream_dedup.config import DetectionConfig
from tests.real_text import stdlib_paragraphs

from .stage import Stage, document_messages, one_run, produce, read_committed, verdicts_by_source, worker_thread
from .test_roles import a_signer_two_shards_and_a_judge, check_one_process_verdicts_once

pytestmark = pytest.mark.kafka

CONFIG = DetectionConfig(containment_threshold=0.8)
#: What an in-process run predicts of each verdict (the sources are Kafka's).
PREDICTED = ("id", "verdict", "duplicate_of", "similarity", "hamming_distance", "containment", "format_version")


def planted_corpus() -> tuple[list[tuple[str, int]], dict[str, str | None]]:
    """``(text, 0)`` per document, in stream order, and each ``doc-N``'s edit (excerpt, expansion or None)."""
    documents = containment_stream(240, paragraphs=stdlib_paragraphs(), seed=31)
    return [(d.text, 0) for d in documents], {f"doc-{i}": d.edit for i, d in enumerate(documents)}


def predicted(corpus: list[tuple[str, int]]) -> dict[str, dict[str, Any]]:
    verdicts = one_run(corpus, CONFIG)
    return {v.id: {k: v.to_dict().get(k) for k in PREDICTED} for v in verdicts}


def check_containment_verdicts(records: list[Any], corpus: list[tuple[str, int]], edits: dict[str, str | None]) -> None:
    verdicts = [json.loads(r.value) for r in records]
    assert all(len(group) == 1 for group in verdicts_by_source(verdicts).values())
    assert {v["id"]: {k: v.get(k) for k in PREDICTED} for v in verdicts} == predicted(corpus)
    where = {v["id"]: {k: v["source"][k] for k in ("topic", "partition", "offset")} for v in verdicts}
    contained = [v for v in verdicts if v["verdict"] == "contained"]
    contains = [v for v in verdicts if v["verdict"] == "contains"]
    assert sum(edits[v["id"]] == "excerpt" for v in contained) >= 10
    assert sum(edits[v["id"]] == "expansion" for v in contains) >= 10
    for verdict in contained + contains:
        assert verdict["match_source"] == where[verdict["duplicate_of"]]
        assert verdict["format_version"] == 3 and verdict["containment"] >= 0.8
        assert verdict["params_fingerprint"] == CONFIG.fingerprint()
    assert {v["format_version"] for v in verdicts if v["verdict"] in ("unique", "duplicate")} == {2}


def test_a_contained_excerpt_gets_verdict_contained_with_its_matchs_source(stage: Stage) -> None:
    corpus, edits = planted_corpus()
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    with worker_thread(stage.settings(batch_size=40, containment_threshold=0.8)):
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
    assert len(records) == len(corpus)
    check_containment_verdicts(records, corpus, edits)


def test_a_restarted_stage_still_finds_containment_of_documents_judged_before(stage: Stage) -> None:
    corpus, edits = planted_corpus()
    messages = document_messages(corpus, partitions=3)
    produce(stage.bootstrap, stage.input_topic, messages[:120])
    with worker_thread(stage.settings(batch_size=30, containment_threshold=0.8)):
        read_committed(stage.bootstrap, stage.output_topic, 120)
    assert list((stage.snapshot_root / "worker-1").glob("snapshot-*.sds")), "a stopping worker leaves a snapshot"
    produce(stage.bootstrap, stage.input_topic, messages[120:])
    with worker_thread(stage.settings(batch_size=30, containment_threshold=0.8)):
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
    assert len(records) == len(corpus)
    check_containment_verdicts(records, corpus, edits)


def test_a_signer_two_shards_and_a_judge_publish_one_process_s_containment_verdicts(stage: Stage) -> None:
    corpus, edits = planted_corpus()
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    with a_signer_two_shards_and_a_judge(stage, containment_threshold=0.8) as runners:
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
        sequenced = runners[0].settings.sequenced_topic
        config = runners[0].settings.detection

    published, _ = check_one_process_verdicts_once(stage, records, sequenced, len(corpus), config)
    assert sum(v["verdict"] == "contained" and edits[v["id"]] == "excerpt" for v in published) >= 10
    assert sum(v["verdict"] == "contains" and edits[v["id"]] == "expansion" for v in published) >= 10
