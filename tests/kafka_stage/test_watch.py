"""``watch`` against a real broker and worker: texts fetched by coordinates, gone ones said so; summaries add up."""

from __future__ import annotations

import json
import math
import re
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import KafkaTimeoutError

from stream_dedup.cli.main import main
from stream_dedup.cli.produce_sample_command import sample_documents
from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.record_lookup import RecordGone, RecordLookup

from .stage import Stage, produce, read_committed, worker_thread

pytestmark = pytest.mark.kafka

A = "Sunny two-room flat near the park with a lift, rent 900 euro per month, no agencies please, call after six."
B = "Quiet studio in Testaccio, 35 square metres, close to the metro, fully furnished, utilities included, no pets."
X = "Office space for rent in Prati with air conditioning and natural light, available from next month, email only."
#: (id, text, partition): the originals on partitions 0 and 1, their near-copies on 2, in this event-time order.
DOCUMENTS = [
    ("m1", A, 0),
    ("x", X, 0),
    ("m2", B, 1),
    ("dA", A.replace("900", "950"), 2),
    ("dB", B + " Pets allowed.", 2),
]
#: Bad records, each dead-lettered with this reason.
BAD_RECORDS = {b"{not json": "invalid_json", b'{"id": "e1", "text": "   "}': "empty_text", b"[1, 2]": "not_an_object"}


@pytest.fixture
def environment(stage: Stage, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """The stage's ``STREAM_DEDUP_*`` settings in the environment, as watch would find them beside a worker."""
    environment = stage.environment()
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    yield environment


def _judge(stage: Stage, verdicts: int, dead_letters: int = 0) -> tuple[list[Any], list[Any]]:
    """Run a worker until ``verdicts`` verdicts and ``dead_letters`` dead letters are committed; return them."""
    with worker_thread(stage.settings()):
        return (
            read_committed(stage.bootstrap, stage.output_topic, verdicts, timeout=90),
            read_committed(stage.bootstrap, stage.dead_letter_topic, dead_letters, timeout=90, settle=0.5),
        )


def _watch(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[list[str], str]:
    assert main(["watch", "--idle-seconds", "15", "--color", "never", *argv]) == 0
    captured = capsys.readouterr()
    return captured.out.splitlines(), captured.err


def test_texts_show_a_duplicate_beside_its_match_and_say_when_the_match_is_gone(
    stage: Stage, environment: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    now = int(time.time() * 1000)
    messages = [
        (doc_id.encode(), json.dumps({"id": doc_id, "text": text}).encode(), partition, now + i)
        for i, (doc_id, text, partition) in enumerate(DOCUMENTS)
    ]
    produce(stage.bootstrap, stage.input_topic, messages)
    verdicts = [json.loads(r.value) for r in _judge(stage, len(DOCUMENTS))[0]]
    assert {v["id"]: v["duplicate_of"] for v in verdicts if v["duplicate_of"]} == {"dA": "m1", "dB": "m2"}
    # Retention deletes m1 (offset 0 of partition 0): dA's match is gone, dB's is there.
    admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap)
    try:
        admin.delete_records({TopicPartition(stage.input_topic, 0): 1})
    finally:
        admin.close()

    lines, _ = _watch(capsys, "--format", "text", "--texts", "--count", str(len(DOCUMENTS)))

    def shown(doc_id: str) -> list[str]:
        at = next(i for i, line in enumerate(lines) if line.startswith(f"duplicate  {doc_id} "))
        return lines[at : at + 3]

    line, document, match = shown("dB")
    assert re.fullmatch(r"duplicate  dB +of m2 +0\.\d{3}  at 2:1", line), line
    assert document.startswith("    document  dB  «quiet studio in testaccio,") and document.endswith("» pets allowed.")
    assert match == f"    match     m2  «{B.lower()}»"
    line, document, match = shown("dA")
    assert re.fullmatch(r"duplicate  dA +of m1 +0\.\d{3}  at 2:0", line), line
    assert document == "    document  dA  " + A.replace("900", "950").lower()
    assert match == (
        f"    match     m1  (record 0:0 is gone: deleted by the topic's retention "
        f"({stage.input_topic} partition 0 now starts at offset 1))"
    )
    assert sum(line.startswith("unique     ") for line in lines) == 3
    assert len(lines) == len(DOCUMENTS) + 2 * 2


def test_fetched_records_are_kept_and_missing_ones_are_answered(stage: Stage, monkeypatch: pytest.MonkeyPatch) -> None:
    produce(stage.bootstrap, stage.input_topic, [(b"k", b"first", 0), (b"k", b"second", 0)])
    admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap)
    with RecordLookup(KafkaConnection(stage.bootstrap), timeout_seconds=20) as lookup:
        assert lookup.fetch(stage.input_topic, 0, 0).value == b"first"
        try:
            admin.delete_records({TopicPartition(stage.input_topic, 0): 1})
        finally:
            admin.close()
        assert lookup.fetch(stage.input_topic, 0, 0).value == b"first"  # fetched before: kept
        assert lookup.fetch(stage.input_topic, 0, 1).value == b"second"
        assert lookup.fetch(stage.input_topic, 0, 2) == RecordGone(
            f"no committed record at offset 2 of {stage.input_topic} partition 0 (compacted away, or a "
            "transaction's marker or aborted record)"
        )  # the transaction's commit marker
        assert lookup.fetch(stage.input_topic, 0, 50) == RecordGone(
            f"{stage.input_topic} partition 0 has no offset 50 yet (it ends at offset 3)", lasting=False
        )  # it may come: asking again may find it
        assert lookup.fetch(stage.input_topic, 7, 0) == RecordGone(f"topic {stage.input_topic} has no partition 7")
        assert lookup.fetch("no-such-topic-here", 0, 0) == RecordGone(
            "topic no-such-topic-here does not exist (any more)"
        )
    with RecordLookup(KafkaConnection(stage.bootstrap), timeout_seconds=20) as fresh:
        assert fresh.fetch(stage.input_topic, 0, 0) == RecordGone(
            f"deleted by the topic's retention ({stage.input_topic} partition 0 now starts at offset 1)"
        )

        def time_out() -> set[str]:
            raise KafkaTimeoutError("no metadata within 60 s")

        monkeypatch.setattr(fresh._consumer, "topics", time_out)
        answer = fresh.fetch("a-topic-not-listed-yet", 0, 0)  # a topic missing from the listing: listed again
        assert isinstance(answer, RecordGone) and answer.why.startswith("could not be fetched (KafkaTimeoutError")
        assert not answer.lasting


def test_the_summary_adds_up_to_the_verdicts_read_directly(
    stage: Stage, environment: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    documents = sample_documents()
    assert main(["produce-sample", "--topic", stage.input_topic]) == 0
    produce(stage.bootstrap, stage.input_topic, [(None, value, 1) for value in BAD_RECORDS])
    records, dead_letters = _judge(stage, len(documents), len(BAD_RECORDS))
    verdicts = [json.loads(r.value) for r in records]
    duplicates = sum(v["verdict"] == "duplicate" for v in verdicts)
    assert len(verdicts) == len(documents) and len(dead_letters) == len(BAD_RECORDS) and duplicates > 100
    latencies = sorted(r.timestamp - json.loads(r.value)["source"]["timestamp"] for r in records)
    span = (max(r.timestamp for r in records) - min(v["source"]["timestamp"] for v in verdicts)) / 1000

    count = len(verdicts) + len(BAD_RECORDS)
    lines, _ = _watch(
        capsys, "--format", "text", "--summary", "--dead-letters", "--count", str(count), "--max-lines", "5"
    )

    summary = lines[lines.index("summary") :]
    rate = 100 * duplicates / len(verdicts)
    unique = len(verdicts) - duplicates
    assert f"  documents     {len(verdicts)} judged: {unique} unique, {duplicates} duplicates ({rate:.1f}%)" in summary
    reasons = Counter(BAD_RECORDS.values())
    assert sum(reasons.values()) == len(dead_letters)
    assert any(line.startswith(f"  dead letters  {len(dead_letters)} (") for line in summary)
    assert all(f"{reason} 1" in next(s for s in summary if "dead letters" in s) for reason in reasons)
    p50, p99 = latencies[math.ceil(0.5 * len(latencies)) - 1], latencies[math.ceil(0.99 * len(latencies)) - 1]
    assert f"  latency       p50 {p50} ms, p99 {p99} ms (a document's Kafka timestamp to its verdict's)" in summary
    assert f"{len(verdicts) / span:,.0f} docs/s over {span:.1f} s" in next(s for s in summary if "throughput" in s)
    bars = [line for line in summary if "█" in line]
    assert sum(int(line.split()[-1]) for line in bars) == duplicates
    assert sum(line.startswith("    document  ") for line in summary) == 3
    assert "  next          the worker's metrics are off (metrics_port = 0)" in summary
    assert len(lines) < 40, "the demo's output must stay short"


def test_watching_the_dead_letter_topic_shows_each_reason(
    stage: Stage, environment: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    produce(stage.bootstrap, stage.input_topic, [(None, value, 0) for value in BAD_RECORDS] + [(b"tombstone", None, 0)])
    _judge(stage, 0, len(BAD_RECORDS) + 1)
    lines, _ = _watch(
        capsys, "--topic", stage.dead_letter_topic, "--format", "text", "--count", str(len(BAD_RECORDS) + 1)
    )
    shown = sorted(re.sub(r": .*", "", line) for line in lines)
    assert shown == sorted(f"dead letter  {reason}" for reason in [*BAD_RECORDS.values(), "missing_text"])
    assert all(re.search(r"  from 0:\d+$", line) for line in lines)


def test_watching_a_topic_that_does_not_exist_says_so_and_creates_nothing(
    stage: Stage, environment: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    missing = f"{stage.output_topic}-missing"
    assert main(["watch", "--topic", missing, "--idle-seconds", "2", "--count", "1"]) == 1
    assert f"stream-dedup: topic {missing} does not exist (waited 2 s)" in capsys.readouterr().err
    admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap)
    try:
        assert missing not in admin.list_topics()
    finally:
        admin.close()


def test_a_topic_listed_once_is_not_listed_again_for_every_fetch(stage: Stage) -> None:
    """Listing the topics is a broker round trip: a stage reading texts again would pay it per fetch."""
    produce(stage.bootstrap, stage.input_topic, [(b"k", b"first", 0)])
    with RecordLookup(KafkaConnection(stage.bootstrap), timeout_seconds=20) as lookup:
        listings = []
        list_topics = lookup._consumer.topics

        def counted() -> set[str]:
            listings.append(1)
            return set(list_topics())

        lookup._consumer.topics = counted
        assert lookup.fetch(stage.input_topic, 0, 0).value == b"first"
        assert isinstance(lookup.fetch(stage.input_topic, 0, 50), RecordGone)  # not kept: fetched again
        assert isinstance(lookup.fetch("no-such-topic-either", 0, 0), RecordGone)  # missing: listed again
    assert len(listings) == 2
