"""Input records deleted before the stage read them: the gap is named and counted, never skipped in silence."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError
from kafka.structs import OffsetAndMetadata

from stream_dedup.errors import DeletedInputError, RecreatedInputError
from stream_dedup.kafka.clients import KafkaConnection, missing_topics
from stream_dedup.kafka.input_identity import InputIdentity
from stream_dedup.roles.launch import role_runner
from stream_dedup.worker.events import WorkerEvents

from .clear_corpus import brute_force_verdicts, clear_corpus
from .stage import (
    Stage,
    WorkerProcess,
    failure_of,
    produce,
    read_committed,
    role_threads,
    wait_until,
    worker_thread,
)
from .test_deleted_topics import delete_topic
from .test_roles import sequenced_batches

pytestmark = pytest.mark.kafka


class DeletedCount(WorkerEvents):
    """The worker's ``input_deleted`` reports, by partition."""

    def __init__(self) -> None:
        self.by_partition: dict[int, int] = {}

    def input_deleted(self, topic: str, partition: int, records: int) -> None:
        self.by_partition[partition] = self.by_partition.get(partition, 0) + records


def messages(corpus: list[tuple[str, int]], ids: range, now: int) -> list[tuple[bytes, bytes, int, int]]:
    return [
        (f"doc-{i}".encode(), json.dumps({"id": f"doc-{i}", "text": corpus[i][0]}).encode(), i % 3, now + i)
        for i in ids
    ]


def delete_unread_records(stage: Stage, corpus: list[tuple[str, int]], now: int) -> None:
    """Send 60 more documents, then delete partition 0 up to offset 31, past the stopped stage's offset 20.

    Partition 0: 20 originals (offsets 0-19), a marker (20), 20 copies (21-40), a marker (41): the marker
    and the first ten copies are deleted before the stage reads them.
    """
    produce(stage.bootstrap, stage.input_topic, messages(corpus, range(60, 120), now))
    admin = KafkaAdminClient(bootstrap_servers=stage.bootstrap)
    try:
        admin.delete_records({TopicPartition(stage.input_topic, 0): 31})
    finally:
        admin.close()


def check_the_loss_said(caplog: pytest.LogCaptureFixture, deleted: DeletedCount) -> None:
    """What was lost is said once: the partition, the offsets, and a count (markers included: an upper bound)."""
    warnings = [r.getMessage() for r in caplog.records if "deleted before the stage read them" in r.getMessage()]
    assert len(warnings) == 1 and "partition 0: offsets 20 to 30" in warnings[0], caplog.text
    assert "up to 11 records get no verdict" in warnings[0]
    assert deleted.by_partition == {0: 11}


def first_sixty_judged(stage: Stage, corpus: list[tuple[str, int]]) -> int:
    """The corpus's first 60 documents produced and judged by a stage that then stops; their time base (ms)."""
    now = int(time.time() * 1000)
    produce(stage.bootstrap, stage.input_topic, messages(corpus, range(60), now))
    with worker_thread(stage.settings(batch_size=20)):
        read_committed(stage.bootstrap, stage.output_topic, 60, settle=1)
    return now


def test_records_deleted_before_a_restart_are_named_in_a_warning_and_counted(
    stage: Stage, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = clear_corpus(60, 60)
    now = first_sixty_judged(stage, corpus)
    delete_unread_records(stage, corpus, now)
    deleted = DeletedCount()
    with (
        caplog.at_level(logging.WARNING, logger="stream_dedup"),
        worker_thread(stage.settings(batch_size=20), events=deleted),
    ):
        records = read_committed(stage.bootstrap, stage.output_topic, 110, settle=3)
    verdicts = {json.loads(r.value)["id"]: json.loads(r.value)["verdict"] for r in records}
    gone = {f"doc-{i}" for i in range(60, 90, 3)}
    truth = brute_force_verdicts([(f"doc-{i}", text) for i, (text, _) in enumerate(corpus)])
    assert len(records) == 110 and set(verdicts) == set(truth) - gone
    assert all(verdicts[d] == truth[d] for d in verdicts)
    check_the_loss_said(caplog, deleted)


def test_a_signer_names_and_counts_records_deleted_before_it_read_them(
    stage: Stage, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = clear_corpus(60, 60)
    now = int(time.time() * 1000)
    config = stage.settings().detection
    signer = stage.settings("signer-1", role="signer", batch_size=20)

    def signed() -> int:
        return sum(
            len(b.entry.documents.ids) for b in sequenced_batches(stage.bootstrap, signer.sequenced_topic, config)
        )

    produce(stage.bootstrap, stage.input_topic, messages(corpus, range(60), now))
    with role_threads(signer):
        wait_until(lambda: signed() == 60, 60, "60 documents signed")
    delete_unread_records(stage, corpus, now)
    deleted = DeletedCount()
    with caplog.at_level(logging.WARNING, logger="stream_dedup"), role_threads(signer, events=deleted):
        wait_until(lambda: signed() == 110 and bool(deleted.by_partition), 60, "the rest signed and the loss counted")
    check_the_loss_said(caplog, deleted)


def test_a_reset_of_the_groups_offsets_back_is_not_taken_and_says_so(
    stage: Stage, caplog: pytest.LogCaptureFixture
) -> None:
    corpus = clear_corpus(60, 30)
    now = int(time.time() * 1000)
    produce(
        stage.bootstrap,
        stage.input_topic,
        [
            (f"doc-{i}".encode(), json.dumps({"id": f"doc-{i}", "text": text}).encode(), i % 3, now + i)
            for i, (text, _) in enumerate(corpus)
        ],
    )
    with worker_thread(stage.settings(batch_size=20)):
        read_committed(stage.bootstrap, stage.output_topic, 90, settle=1)
    # What kafka-consumer-groups.sh --reset-offsets --to-earliest does to the stopped stage's group.
    consumer = KafkaConsumer(bootstrap_servers=stage.bootstrap, group_id=stage.group_id, enable_auto_commit=False)
    try:
        consumer.commit({TopicPartition(stage.input_topic, p): OffsetAndMetadata(0, "", -1) for p in range(3)})
    finally:
        consumer.close()
    with caplog.at_level(logging.WARNING, logger="stream_dedup"), worker_thread(stage.settings(batch_size=20)):
        records = read_committed(stage.bootstrap, stage.output_topic, 90, settle=5)
    # No document is judged again (it would be its own duplicate), and the operator is told why.
    assert len(records) == 90
    warnings = [r.getMessage() for r in caplog.records if "committed offsets" in r.getMessage()]
    assert len(warnings) == 1 and "0: 0, 30" in warnings[0] and "new group_id" in warnings[0], caplog.text


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        return int(consumer.end_offsets([TopicPartition(topic, 0)])[TopicPartition(topic, 0)])
    finally:
        consumer.close()


def recreate_topic(bootstrap: str, topic: str, partitions: int) -> None:
    """Delete ``topic`` and create it again under its name, as soon as the brokers let go of the old one."""
    delete_topic(bootstrap, topic)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                admin.create_topics([NewTopic(topic, partitions, 1)])
                return
            except TopicAlreadyExistsError:  # still being deleted
                assert time.monotonic() < deadline, f"{topic} not created again"
                time.sleep(0.2)
    finally:
        admin.close()


def test_an_input_topic_created_again_under_its_name_is_told_by_its_id(stage: Stage) -> None:
    consumer = KafkaConsumer(bootstrap_servers=stage.bootstrap)
    identity = InputIdentity(stage.input_topic)
    try:
        identity.check(consumer)
        identity.check(consumer)  # the same topic
        recreate_topic(stage.bootstrap, stage.input_topic, 3)
        consumer.topics()  # the metadata a rebalance brings
        with pytest.raises(RecreatedInputError, match="was deleted and created again under its name"):
            identity.check(consumer)
    finally:
        consumer.close()


@pytest.mark.long
def test_an_input_topic_created_again_under_the_stage_stops_it_rather_than_skip_its_first_records(
    stage: Stage, tmp_path: Path
) -> None:
    # Before: the stage read the new topic from its old positions (offset 20 of each partition), and 60 of the
    # 90 new documents never got a verdict, with nothing said.
    corpus = clear_corpus(150, 0)
    worker = WorkerProcess(stage.environment(batch_size=20), tmp_path / "worker.log").start()
    now = int(time.time() * 1000)
    produce(stage.bootstrap, stage.input_topic, messages(corpus, range(60), now))
    read_committed(stage.bootstrap, stage.output_topic, 60, settle=1, timeout=60)
    recreate_topic(stage.bootstrap, stage.input_topic, 3)
    produce(stage.bootstrap, stage.input_topic, messages(corpus, range(60, 150), now))
    assert worker.wait(90) == 1
    assert f"input_topic {stage.input_topic!r} was deleted and created again" in worker.log_path.read_text()
    assert len(read_committed(stage.bootstrap, stage.output_topic, 60, settle=2, timeout=10)) == 60


@pytest.mark.parametrize("snapshots", ["kept", "lost"])
def test_a_stage_started_after_its_input_was_created_again_stops_rather_than_skip_its_first_records(
    stage: Stage, tmp_path: Path, snapshots: str
) -> None:
    # Before: only a running process knew the old id. One started later read the new topic from the old
    # positions (offset 20 of each partition): 60 of the 150 new documents never got a verdict.
    corpus = clear_corpus(210, 0)
    now = first_sixty_judged(stage, corpus)
    recreate_topic(stage.bootstrap, stage.input_topic, 3)
    produce(stage.bootstrap, stage.input_topic, messages(corpus, range(60, 210), now))
    # Kept: the final snapshot covers every batch, so the id comes from it; lost: from the changelog.
    lost: dict[str, Any] = {"snapshot_dir": tmp_path / "empty-disk"} if snapshots == "lost" else {}
    failure = failure_of(stage.settings(batch_size=20, **lost))
    assert isinstance(failure, RecreatedInputError)
    assert f"input_topic {stage.input_topic!r} was deleted and created again" in str(failure)
    assert len(read_committed(stage.bootstrap, stage.output_topic, 60, settle=2, timeout=10)) == 60


def test_a_group_moved_to_another_input_topic_stops_saying_that_input_topic_may_have_changed(
    stage: Stage, topic_factory: Callable[..., str]
) -> None:
    """``input_topic`` changed under the same ``group_id``, the final snapshot covering every batch: the ids
    differ as for a topic created again, and the message must name the change an operator most likely made
    (it said only "deleted and created again", which they had not done)."""
    corpus = clear_corpus(90, 0)
    now = first_sixty_judged(stage, corpus)
    moved = replace(stage, input_topic=topic_factory(partitions=3))
    produce(stage.bootstrap, moved.input_topic, messages(corpus, range(60, 90), now))
    failure = failure_of(moved.settings(batch_size=20))
    assert isinstance(failure, RecreatedInputError)
    assert "input_topic was changed under this group_id" in str(failure)


def test_an_input_topic_deleted_under_the_stage_stops_it_naming_the_topic_and_is_not_created_again(
    stage: Stage,
) -> None:
    # Before: the sole replica said "standby: another replica holds the partitions" for good, logging 12
    # "Topic ... not found" ERRORs a second; or, its join never completing, it created the input again, one
    # partition wide, at the next session.
    corpus = clear_corpus(60, 0)
    with concurrent.futures.ThreadPoolExecutor(1) as running:
        stopped = running.submit(failure_of, stage.settings(batch_size=20), 90)
        produce(stage.bootstrap, stage.input_topic, messages(corpus, range(60), int(time.time() * 1000)))
        read_committed(stage.bootstrap, stage.output_topic, 60, settle=1, timeout=60)
        delete_topic(stage.bootstrap, stage.input_topic)
        failure = stopped.result()
    assert isinstance(failure, DeletedInputError)
    assert f"input_topic {stage.input_topic!r} does not exist" in str(failure)
    assert missing_topics(KafkaConnection(stage.bootstrap), [stage.input_topic]) == [stage.input_topic]


def test_a_stage_or_signer_started_after_its_input_was_deleted_stops_and_creates_nothing(stage: Stage) -> None:
    corpus = clear_corpus(60, 0)
    produce(stage.bootstrap, stage.input_topic, messages(corpus, range(60), int(time.time() * 1000)))
    signer = stage.settings("signer-1", role="signer", batch_size=20)
    with worker_thread(stage.settings(batch_size=20)), role_threads(signer):
        read_committed(stage.bootstrap, stage.output_topic, 60, settle=1)
        wait_until(lambda: end_offset(stage.bootstrap, signer.sequenced_topic) > 0, 60, "a sequenced batch")
    delete_topic(stage.bootstrap, stage.input_topic)
    for failure in (failure_of(stage.settings(batch_size=20)), failure_of(signer, runner=role_runner)):
        assert isinstance(failure, DeletedInputError), failure
    assert missing_topics(KafkaConnection(stage.bootstrap), [stage.input_topic]) == [stage.input_topic]


def test_an_input_created_again_under_a_stage_in_its_second_session_stops_it(stage: Stage, tmp_path: Path) -> None:
    """A stage in its second session (its output topic deleted ended the first) was no longer the member that
    computed the group's assignment, and kafka-python rejoins only on metadata changes its own assignment saw:
    the input deleted and created again brought no rebalance, and the stage judged the new topic against the
    old one's index, with nothing said. It must stop, naming the recreated input."""
    corpus = clear_corpus(120, 0)
    worker = WorkerProcess(stage.environment(batch_size=20), tmp_path / "worker.log").start()
    now = int(time.time() * 1000)
    produce(stage.bootstrap, stage.input_topic, messages(corpus, range(30), now))
    read_committed(stage.bootstrap, stage.output_topic, 30, settle=1, timeout=60)
    delete_topic(stage.bootstrap, stage.output_topic)
    produce(stage.bootstrap, stage.input_topic, messages(corpus, range(30, 60), now))
    delete_topic(stage.bootstrap, stage.output_topic, present=True)
    read_committed(stage.bootstrap, stage.output_topic, 30, settle=1, timeout=60)
    assert "was deleted while the stage ran" in worker.log_path.read_text()
    recreate_topic(stage.bootstrap, stage.input_topic, 3)
    produce(stage.bootstrap, stage.input_topic, messages(corpus, range(60, 120), now))
    assert worker.wait(60) == 1
    assert f"input_topic {stage.input_topic!r} was deleted and created again" in worker.log_path.read_text()
