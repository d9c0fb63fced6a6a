"""Changing the number of shards as docs/scale-out.md says, while documents keep arriving: one verdict each,
one process's."""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, TopicPartition

from stream_dedup.config import DetectionConfig
from stream_dedup.errors import ConfigError, LostHistoryError
from stream_dedup.kafka.sequenced import SequencedBatch
from stream_dedup.roles.topics import ensure_role_topics
from tests.corpus import make_clustered_corpus

from .stage import (
    Message,
    Stage,
    document_messages,
    produce,
    read_committed,
    role_processes,
    role_threads,
    verdicts_by_source,
    wait_until,
)
from .test_deleted_topics import delete_topic
from .test_roles import commit_offset, committed_offset, one_process_verdicts, sequenced_batches
from .test_roles_crash import holds_partitions

pytestmark = pytest.mark.kafka

#: Divisible by every shard count tried here.
SLOTS = 12


@contextlib.contextmanager
def feeding(
    stage: Stage,
    messages: Sequence[Message],
    chunk: int = 20,
    pause: float = 0.05,
    held_back: int = 0,
    released: threading.Event | None = None,
) -> Iterator[Future[None]]:
    """A producer sending ``messages`` in transactions of ``chunk`` throughout; the future is done once all are.

    The last ``held_back`` are sent once ``released`` is set (or the block ends): a switch waited for must find
    documents still to come, however long a loaded machine took to get there.
    """
    gate = released or threading.Event()

    def feed() -> None:
        for start in range(0, len(messages), chunk):
            if start >= len(messages) - held_back:
                gate.wait(120)
            produce(stage.bootstrap, stage.input_topic, messages[start : start + chunk])
            time.sleep(pause)

    with ThreadPoolExecutor(1, thread_name_prefix="feeder") as pool:
        sent = pool.submit(feed)
        try:
            yield sent
        finally:
            gate.set()
        sent.result(120)


def sequenced_end(stage: Stage, sequenced: TopicPartition) -> int:
    consumer = KafkaConsumer(bootstrap_servers=stage.bootstrap, isolation_level="read_committed")
    try:
        return int(consumer.end_offsets([sequenced])[sequenced])
    finally:
        consumer.close()


def shard_set(stage: Stage, name: str, **settings: Any) -> contextlib.AbstractContextManager[Any]:
    return role_threads(
        *(
            stage.settings(f"{name}-shard-{k}", role="shard", shard_index=k, **settings)
            for k in range(settings["shards"])
        )
    )


def change_shard_count(
    stage: Stage,
    old_shards: int,
    new_shards: int,
    documents: int,
    old_slots: int = SLOTS,
    new_slots: int = SLOTS,
    **detection: Any,
) -> None:
    """The procedure of docs/scale-out.md, "Changing the number of shards", step by step, with a producer feeding
    throughout; then every record's verdict is checked against one process over the same sequenced input (under
    the new set's ``index_slots`` from the switch on)."""
    corpus = make_clustered_corpus(documents, seed=40 + 10 * old_shards + new_shards)
    messages = document_messages(corpus, partitions=3)
    old = dict(batch_size=20, index_slots=old_slots, shards=old_shards, **detection)
    sequenced = TopicPartition(f"{stage.group_id}.sequenced", 0)
    new_group = f"{stage.group_id}-{new_shards}"
    new = dict(old, shards=new_shards, index_slots=new_slots, group_id=new_group, sequenced_topic=sequenced.topic)
    with contextlib.ExitStack() as running:
        running.enter_context(role_threads(stage.settings("signer-1", role="signer", **old)))
        running.enter_context(shard_set(stage, "old", **old))
        old_judge = contextlib.ExitStack()
        old_judge.enter_context(role_threads(stage.settings("old-judge", role="judge", **old)))
        switched = threading.Event()
        fed = running.enter_context(feeding(stage, messages, held_back=documents // 4, released=switched))
        read_committed(stage.bootstrap, stage.output_topic, documents // 4, settle=0)
        # 1. The new set rebuilds from the sequenced topic while the old one keeps publishing; wait for its lag.
        running.enter_context(shard_set(stage, "new", **new))
        caught_up = [f"{new_group}.shard-{k}" for k in range(new_shards)]
        while not all((committed_offset(stage.bootstrap, g, sequenced) or 0) > documents // 40 for g in caught_up):
            time.sleep(0.2)
        # 2. Stop every replica of the old judge; its committed offset is X.
        old_judge.close()
        switch_at = committed_offset(stage.bootstrap, f"{stage.group_id}.judge", sequenced)
        assert switch_at is not None and switch_at > 0
        # 3. The new judge starts at X.
        commit_offset(stage.bootstrap, f"{new_group}.judge", sequenced, switch_at)
        running.enter_context(role_threads(stage.settings("new-judge", role="judge", **new)))
        assert not fed.done(), "the producer stopped before the switch: feed more documents"
        switched.set()
        records = read_committed(stage.bootstrap, stage.output_topic, documents, timeout=180)
        # 4. The old shards stop (here with everything else).

    before = DetectionConfig(index_slots=old_slots, **detection)
    after = DetectionConfig(index_slots=new_slots, **detection)
    batches = check_verdicts_of_one_process_once(stage, records, sequenced.topic, documents, before, after, switch_at)
    # The switch happened mid-stream.
    assert 0 < switch_at < batches[-1].offset


def check_verdicts_of_one_process_once(
    stage: Stage,
    records: list[Any],
    sequenced: str,
    documents: int,
    before: DetectionConfig | None = None,
    after: DetectionConfig | None = None,
    switch_at: int = 0,
) -> list[SequencedBatch]:
    """Each of ``documents`` records got one verdict, one process's on the sequenced input, with ``before`` (default:
    ``SLOTS`` slots) for the batches before ``switch_at`` and ``after`` (default: ``before``) from it on; returns
    the batches."""
    published = [json.loads(r.value) for r in records]
    twice = {source: vs for source, vs in verdicts_by_source(published).items() if len(vs) > 1}
    assert not twice, f"{len(twice)} records judged twice, e.g. {next(iter(twice.values()))}"
    assert len(published) == documents
    before = before or DetectionConfig(index_slots=SLOTS)
    batches = sequenced_batches(stage.bootstrap, sequenced, before)
    expected = one_process_verdicts(batches, before, stage)
    if after is not None and after != before:
        later = one_process_verdicts(batches, after, stage)
        changed = {
            i for b in batches if b.offset >= switch_at for i in b.entry.documents.ids if later[i] != expected[i]
        }
        # Beyond the fingerprint: the new slots changed verdicts, and the check below tells which applies.
        assert any(later[i]["duplicate_of"] != expected[i]["duplicate_of"] for i in changed)
        expected.update((i, later[i]) for b in batches if b.offset >= switch_at for i in b.entry.documents.ids)
    by_id = {v["id"]: v for v in published}
    wrong = {i: (by_id.get(i), v) for i, v in expected.items() if by_id.get(i) != v}
    assert not wrong, f"{len(wrong)} verdicts differ from one process's, e.g. {next(iter(wrong.items()))}"
    assert sum(v["verdict"] == "duplicate" for v in published) > documents // 10
    return batches


def test_going_from_three_shards_to_two_while_documents_arrive(stage: Stage) -> None:
    change_shard_count(stage, 3, 2, 1200)


def test_going_from_one_shard_of_one_slot_to_four_on_a_new_index_slots_while_documents_arrive(stage: Stage) -> None:
    """The default index_slots (1) admits no other shard count: the new set takes another one, a multiple of
    N' (caps binding here, so that verdicts from the switch on are the new setting's)."""
    change_shard_count(stage, 1, 4, 1200, old_slots=1, new_slots=4, max_bucket_size=4)


@pytest.mark.long
@pytest.mark.parametrize(("old_shards", "new_shards"), [(1, 4), (2, 3), (3, 2)])
def test_changing_the_shard_count_while_documents_arrive(stage: Stage, old_shards: int, new_shards: int) -> None:
    change_shard_count(stage, old_shards, new_shards, 4000)


@pytest.mark.parametrize(
    "backlog", [pytest.param(2_400, id="short"), pytest.param(12_000, id="many-steps", marks=pytest.mark.long)]
)
def test_a_new_set_shard_killed_9_during_its_rebuild_is_finished_by_its_standby_or_its_restart(
    stage: Stage, tmp_path: Path, backlog: int
) -> None:
    """Step 1 of the procedure with kill -9 of new shards mid-rebuild: shard 1's standby takes over, shard 2 is
    restarted (from a snapshot it wrote on the way, if any: a step answers up to 10,000 documents, so only the
    long run's rebuild commits several times); the new judge's verdicts are still one process's."""
    documents = backlog + backlog // 6
    corpus = make_clustered_corpus(documents, seed=77)
    messages = document_messages(corpus, partitions=3)
    old = dict(batch_size=20, index_slots=SLOTS, shards=2)
    sequenced = TopicPartition(f"{stage.group_id}.sequenced", 0)
    new_group = f"{stage.group_id}-3"
    every = backlog // 4
    new = dict(old, shards=3, group_id=new_group, sequenced_topic=sequenced.topic, snapshot_every_documents=every)
    with contextlib.ExitStack() as running:
        running.enter_context(role_threads(stage.settings("signer-1", role="signer", **old)))
        running.enter_context(shard_set(stage, "old", **old))
        old_judge = contextlib.ExitStack()
        old_judge.enter_context(role_threads(stage.settings("old-judge", role="judge", **old)))
        produce(stage.bootstrap, stage.input_topic, messages[:backlog])
        read_committed(stage.bootstrap, stage.output_topic, backlog, settle=0, timeout=300)
        running.enter_context(feeding(stage, messages[backlog:], pause=0.2))
        rebuilt_at = sequenced_end(stage, sequenced)
        shards = role_processes(
            stage,
            tmp_path,
            {
                "new-shard-0": {"shard_index": 0},
                "new-shard-1a": {"shard_index": 1},
                "new-shard-1b": {"shard_index": 1},
                "new-shard-2": {"shard_index": 2},
            },
            role="shard",
            **new,
        )
        rng = random.Random(5)
        mid_rebuild = []
        for index, names in ((1, ("new-shard-1a", "new-shard-1b")), (2, ("new-shard-2",))):
            wait_until(lambda names=names: any(holds_partitions(shards[n]) for n in names), 60, f"shard {index} active")
            active, *standby = sorted(names, key=lambda n: not holds_partitions(shards[n]))
            time.sleep(rng.uniform(0.0, 0.5))
            shards[active].kill()
            rebuilt = committed_offset(stage.bootstrap, f"{new_group}.shard-{index}", sequenced) or 0
            mid_rebuild.append(rebuilt < rebuilt_at)
            if standby:
                wait_until(lambda name=standby[0]: holds_partitions(shards[name]), 60, "the standby shard taking over")
            else:
                shards[active].start()
        assert any(mid_rebuild), "no kill came before its shard had rebuilt: kill sooner"
        groups = [f"{new_group}.shard-{k}" for k in range(3)]
        while not all((committed_offset(stage.bootstrap, g, sequenced) or 0) > rebuilt_at for g in groups):
            time.sleep(0.2)
        old_judge.close()
        switch_at = committed_offset(stage.bootstrap, f"{stage.group_id}.judge", sequenced)
        assert switch_at is not None
        commit_offset(stage.bootstrap, f"{new_group}.judge", sequenced, switch_at)
        running.enter_context(role_threads(stage.settings("new-judge", role="judge", **new)))
        records = read_committed(stage.bootstrap, stage.output_topic, documents, timeout=300)
    check_verdicts_of_one_process_once(stage, records, sequenced.topic, documents)


def test_a_signer_starts_whatever_became_of_the_old_shard_sets_answers(stage: Stage) -> None:
    """Step 4 keeps the signers: restarted with the new set's ``shards``, or once the old set's answers topic was
    deleted (its shards' offsets still there), a signer must start, not be told to take a new ``group_id``,
    which would sign the whole input again."""
    old = dict(index_slots=SLOTS, shards=2)
    ensure_role_topics(stage.settings("old-shard-0", role="shard", **old))
    sequenced = TopicPartition(f"{stage.group_id}.sequenced", 0)
    commit_offset(stage.bootstrap, f"{stage.group_id}.shard-0", sequenced, 1)

    ensure_role_topics(stage.settings("signer-1", role="signer", **dict(old, shards=3)))

    delete_topic(stage.bootstrap, f"{stage.group_id}.answers")
    ensure_role_topics(stage.settings("signer-1", role="signer", **old))
    # The shards' history is still guarded.
    with pytest.raises(LostHistoryError, match="answers_topic"):
        ensure_role_topics(stage.settings("old-shard-0", role="shard", **old))


@pytest.mark.parametrize("role", ["shard", "judge"])
def test_a_role_of_another_shard_count_than_its_sets_answers_topic_stops_naming_shards(stage: Stage, role: str) -> None:
    """The old group_id reused for the new count, or one role of a set given another count: refused at start."""
    ensure_role_topics(stage.settings("shard-0", role="shard", index_slots=SLOTS, shards=2))

    with pytest.raises(ConfigError, match=r"'shards'.*has 2 partitions but shards=3.*new group_id"):
        ensure_role_topics(stage.settings("new-0", role=role, index_slots=SLOTS, shards=3))
