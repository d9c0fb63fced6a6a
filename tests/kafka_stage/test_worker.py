"""The Kafka stage end to end, against the real broker: verdicts, dead letters, forwarding, restarts."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from stream_dedup.engine.detection import DuplicateDetector
from stream_dedup.errors import ChangelogError
from tests.corpus import make_clustered_corpus

from .stage import (
    VERDICT_CORE,
    Stage,
    document_messages,
    expected_verdicts,
    failure_of,
    produce,
    read_committed,
    verdicts_by_source,
    wait_until,
    worker_thread,
)

pytestmark = pytest.mark.kafka


def comparable(verdict: dict[str, object]) -> dict[str, object]:
    return {k: verdict[k] for k in VERDICT_CORE}


def test_every_document_gets_exactly_one_verdict_with_its_source(stage: Stage) -> None:
    corpus = make_clustered_corpus(900, seed=11)
    messages = document_messages(corpus, partitions=3)
    produce(stage.bootstrap, stage.input_topic, messages)
    with worker_thread(stage.settings(batch_size=100)):
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
    grouped = verdicts_by_source([json.loads(r.value) for r in records])
    assert len(records) == len(corpus)
    assert all(len(verdicts) == 1 for verdicts in grouped.values())
    expected = expected_verdicts(corpus)
    assert sum(v["verdict"] == "duplicate" for v in expected.values()) > 100
    for record in records:
        verdict = json.loads(record.value)
        assert record.key == verdict["id"].encode()
        assert comparable(verdict) == expected[verdict["id"]]
        assert verdict["params_fingerprint"] == DetectionConfig().fingerprint()
        assert verdict["source"]["topic"] == stage.input_topic
        assert isinstance(verdict["source"]["timestamp"], int)
    # The source coordinates point at the record that carried the document.
    sent_partition = {f"doc-{i}": message[2] for i, message in enumerate(messages)}
    assert all(json.loads(r.value)["source"]["partition"] == sent_partition[json.loads(r.value)["id"]] for r in records)


def test_restart_resumes_without_republishing_and_remembers_earlier_documents(stage: Stage) -> None:
    corpus = make_clustered_corpus(800, seed=12)
    messages = document_messages(corpus, partitions=3)
    produce(stage.bootstrap, stage.input_topic, messages[:400])
    with worker_thread(stage.settings(batch_size=50)):
        read_committed(stage.bootstrap, stage.output_topic, 400)
    assert list((stage.snapshot_root / "worker-1").glob("snapshot-*.sds")), "a stopping worker leaves a snapshot"
    produce(stage.bootstrap, stage.input_topic, messages[400:])
    with worker_thread(stage.settings(batch_size=50)):
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
    assert len(records) == len(corpus)
    expected = expected_verdicts(corpus)
    assert {json.loads(r.value)["id"]: comparable(json.loads(r.value)) for r in records} == expected


@pytest.mark.parametrize("method", ["simhash", "combined"])
def test_the_seed_002_methods_survive_a_restart_with_the_verdicts_of_one_run(stage: Stage, method: str) -> None:
    corpus = make_clustered_corpus(600, seed=21)
    messages = document_messages(corpus, partitions=3)
    produce(stage.bootstrap, stage.input_topic, messages[:300])
    with worker_thread(stage.settings(batch_size=40, method=method, max_hamming=8)):
        read_committed(stage.bootstrap, stage.output_topic, 300)
    produce(stage.bootstrap, stage.input_topic, messages[300:])
    with worker_thread(stage.settings(batch_size=40, method=method, max_hamming=8)):
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
    config = DetectionConfig(method=method, max_hamming=8)  # type: ignore[arg-type]
    expected = expected_verdicts(corpus, config)
    assert sum(v["verdict"] == "duplicate" for v in expected.values()) > 50
    assert all(v["hamming_distance"] is not None for v in expected.values() if v["verdict"] == "duplicate")
    assert {json.loads(r.value)["id"]: comparable(json.loads(r.value)) for r in records} == expected
    assert {json.loads(r.value)["params_fingerprint"] for r in records} == {config.fingerprint()}


def test_a_lost_snapshot_directory_costs_only_a_full_replay(stage: Stage, tmp_path: Path) -> None:
    corpus = make_clustered_corpus(600, seed=13)
    messages = document_messages(corpus, partitions=3)
    produce(stage.bootstrap, stage.input_topic, messages[:300])
    with worker_thread(stage.settings(batch_size=50)):
        read_committed(stage.bootstrap, stage.output_topic, 300)
    produce(stage.bootstrap, stage.input_topic, messages[300:])
    with worker_thread(stage.settings(batch_size=50, snapshot_dir=tmp_path / "empty-disk")):
        records = read_committed(stage.bootstrap, stage.output_topic, len(corpus))
    assert {json.loads(r.value)["id"]: comparable(json.loads(r.value)) for r in records} == expected_verdicts(corpus)


BAD_MESSAGES: dict[str, tuple[bytes | None, str]] = {
    "not JSON": (b'{"id": "x", "text": ', "invalid_json"),
    "invalid UTF-8": (b'{"id": "x", "text": "caf\xe9"}', "invalid_utf8"),
    "not an object": (b'["a", "list"]', "not_an_object"),
    "missing text": (b'{"id": "x"}', "missing_text"),
    "text not a string": (b'{"id": "x", "text": 42}', "invalid_text"),
    "empty text": (b'{"id": "x", "text": "  \\n "}', "empty_text"),
    "id of a wrong type": (b'{"id": {"nested": 1}, "text": "some text"}', "invalid_id"),
    "too large": (json.dumps({"id": "big", "text": "word " * 400}).encode(), "too_large"),
    "no value (tombstone)": (None, "missing_text"),
}


def test_bad_messages_go_unchanged_to_dead_letters_with_reason_and_source(stage: Stage) -> None:
    good = make_clustered_corpus(20, seed=14)
    messages: list[tuple[bytes | None, bytes | None, int | None]] = []
    for i, (value, _) in enumerate(BAD_MESSAGES.values()):
        messages.append((f"good-{i}".encode(), json.dumps({"text": good[i][0]}).encode(), 0))
        messages.append((f"bad-{i}".encode(), value, 0))
    produce(stage.bootstrap, stage.input_topic, messages)
    with worker_thread(stage.settings(max_document_bytes=1000)):
        letters = read_committed(stage.bootstrap, stage.dead_letter_topic, len(BAD_MESSAGES))
        verdicts = read_committed(stage.bootstrap, stage.output_topic, len(BAD_MESSAGES))
    # The stage went on past every bad message: each good one has its verdict, keyed by the record key.
    assert sorted(r.key for r in verdicts) == sorted(f"good-{i}".encode() for i in range(len(BAD_MESSAGES)))
    assert len(letters) == len(BAD_MESSAGES)
    for i, (letter, (value, reason)) in enumerate(zip(letters, BAD_MESSAGES.values(), strict=True)):
        headers = {name: data.decode() for name, data in letter.headers}
        assert (letter.key, letter.value) == (f"bad-{i}".encode(), value)
        assert headers["stream-dedup-reason"] == reason
        assert headers["stream-dedup-error"]
        assert headers["stream-dedup-source-topic"] == stage.input_topic
        assert (headers["stream-dedup-source-partition"], headers["stream-dedup-source-offset"]) == (
            "0",
            str(2 * i + 1),
        )


def test_unique_documents_are_forwarded_to_the_unique_topic(stage: Stage, topic_factory: Callable[..., str]) -> None:
    unique_topic = topic_factory(partitions=1)
    corpus = make_clustered_corpus(300, seed=15)
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    with worker_thread(stage.settings(unique_topic=unique_topic)):
        forwarded = read_committed(stage.bootstrap, unique_topic, 1)
    expected_unique = {i for i, v in expected_verdicts(corpus).items() if v["verdict"] == "unique"}
    assert {json.loads(r.value)["id"] for r in forwarded} == expected_unique
    # Forwarded as they came: same key, same bytes.
    assert all(r.key == json.loads(r.value)["id"].encode() for r in forwarded)


def test_plain_text_values_use_the_key_as_id(stage: Stage) -> None:
    produce(
        stage.bootstrap,
        stage.input_topic,
        [(b"first", b"A plain text about Kafka.", 0), (b"second", b"a plain text about kafka", 0)],
    )
    with worker_thread(stage.settings(input_format="text", shingle_size=3)):
        records = read_committed(stage.bootstrap, stage.output_topic, 2)
    verdicts = {json.loads(r.value)["id"]: json.loads(r.value) for r in records}
    assert verdicts["first"]["verdict"] == "unique"
    assert (verdicts["second"]["verdict"], verdicts["second"]["duplicate_of"]) == ("duplicate", "first")


def test_snapshots_follow_the_document_count_not_only_the_clock(stage: Stage) -> None:
    corpus = make_clustered_corpus(600, seed=16)
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    snapshots = stage.snapshot_root / "worker-1"
    settings = stage.settings(batch_size=50, snapshot_every_documents=200, snapshots_kept=10)
    with worker_thread(settings):
        read_committed(stage.bootstrap, stage.output_topic, len(corpus), settle=1)
        taken_while_running = sorted(snapshots.glob("snapshot-*.sds"))
    # The clock (300 s) never fired: every snapshot while running came from the count.
    assert len(taken_while_running) >= 2


def test_a_signature_parameter_changed_with_no_snapshot_stops_start_up_naming_it(stage: Stage, tmp_path: Path) -> None:
    # A new pod with an empty disk meets the changelog's refusal first, not the snapshot's: it too names the setting.
    corpus = make_clustered_corpus(200, seed=14)
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    with worker_thread(stage.settings(batch_size=50)):
        read_committed(stage.bootstrap, stage.output_topic, len(corpus))
    changed = stage.settings(batch_size=50, shingle_size=4, snapshot_dir=tmp_path / "empty-disk")
    failure = failure_of(changed)
    assert isinstance(failure, ChangelogError)
    assert "shingle_size=5 but this run uses shingle_size=4" in str(failure)
    assert "new group_id" in str(failure)


def test_a_stop_asked_for_during_a_restore_ends_it_at_once_without_a_snapshot(
    stage: Stage, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = make_clustered_corpus(300, seed=15)
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, partitions=3))
    with worker_thread(stage.settings(batch_size=10)):
        read_committed(stage.bootstrap, stage.output_topic, len(corpus))
    disk = tmp_path / "empty-disk"
    replaying, stop_asked = threading.Event(), threading.Event()

    def stopped_while_restoring(config: DetectionConfig) -> DuplicateDetector:
        replaying.set()  # the full replay begins with this index
        stop_asked.wait(30)
        return make_detector(config)

    started = time.monotonic()
    settings = stage.settings(batch_size=10, snapshot_dir=disk)
    restoring = worker_thread(settings, stopped_while_restoring)
    with caplog.at_level(logging.INFO, logger="stream_dedup"), restoring as worker:
        assert replaying.wait(30)
        worker.request_stop()  # SIGTERM in a rolling update
        stop_asked.set()
        wait_until(lambda: "stopped while replaying" in caplog.text, 30, "the replay cut short")
    assert time.monotonic() - started < 20  # not the grace period's end
    assert not list(disk.glob("snapshot-*.sds")), "a snapshot of a partial index"
