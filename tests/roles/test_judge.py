"""The judge's step without a broker: it waits for every shard, merges, and commits only what it used up."""

import logging
from dataclasses import replace
from typing import Any, NamedTuple

import numpy as np
import pytest
from kafka import TopicPartition

from stream_dedup.cli.settings_sources import resolve_settings
from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from stream_dedup.engine.sharding import ShardAnswer, ShardDetector, sequence_keys
from stream_dedup.errors import ChangelogError, ConfigError
from stream_dedup.kafka.answers import AnswerRecord, encode_answers
from stream_dedup.kafka.changelog import ChangelogEntry, encode_entry
from stream_dedup.lsh import IndexedBatch
from stream_dedup.roles.judge import Judge
from stream_dedup.worker.events import WorkerEvents
from tests.corpus import make_corpus

CONFIG = DetectionConfig(index_slots=2)
DIGEST = CONFIG.signature_fingerprint()
SETTINGS = resolve_settings(
    {}, {"STREAM_DEDUP_ROLE": "judge", "STREAM_DEDUP_SHARDS": "2", "STREAM_DEDUP_INDEX_SLOTS": "2"}
)
SEQUENCED = TopicPartition(SETTINGS.sequenced_topic, 0)
ANSWERS = [TopicPartition(SETTINGS.answers_topic, k) for k in range(2)]


class Record(NamedTuple):
    offset: int
    value: bytes


def batches(texts: list[str], size: int) -> list[IndexedBatch]:
    detector = make_detector(CONFIG)
    return [
        IndexedBatch(
            [f"d{i}" for i in range(start, start + size)],
            detector.sign(texts[start : start + size]),
            np.full(size, 1.5),
            np.arange(start, start + size, dtype=np.uint64),
        )
        for start in range(0, len(texts), size)
    ]


def answer_record(
    shard: int, first: int, end: int, answers: list[ShardAnswer], config: DetectionConfig | None = None
) -> bytes:
    """Shard ``shard``'s record; it says the verdict settings of ``config``, if given."""
    settings = config.verdict_settings() if config is not None else None
    (value,) = encode_answers(AnswerRecord(shard, 2, first, end, ShardAnswer.concat(answers), settings), DIGEST)
    return value


def test_the_judge_waits_for_every_shard_then_commits_what_it_used_up() -> None:
    texts = make_corpus(90, seed=4, copies=0.5)
    three = batches(texts, 30)
    shards = [ShardDetector(CONFIG, k, 2) for k in range(2)]
    answers = [[shard.answer(b, sequence_keys(offset, 30)) for offset, b in enumerate(three)] for shard in shards]
    judge = Judge(SETTINGS)
    sequenced = [Record(o, encode_entry(ChangelogEntry(b, "documents", {}), DIGEST)[0]) for o, b in enumerate(three)]
    polled: dict[TopicPartition, list[Any]] = {
        SEQUENCED: sequenced,
        ANSWERS[0]: [Record(40, answer_record(0, 0, 3, answers[0]))],
    }

    assert judge.step(polled) is None  # shard 1 has said nothing yet

    outgoing = judge.step({ANSWERS[1]: [Record(7, answer_record(1, 0, 2, answers[1][:2]))]})

    assert outgoing is not None and outgoing.report.documents == 60  # batches 0 and 1: shard 1 got past them only
    single = make_detector(CONFIG)
    expected = [v for b in three[:2] for v in single.process_signed(b)]
    assert [s.record.key for s in outgoing.sends] == [v.id.encode() for v in expected]
    assert outgoing.report.verdicts["duplicate"] == sum(v.verdict == "duplicate" for v in expected) > 5
    # Shard 0's record still holds batch 2's answers: committed at it, to be read again after a restart.
    assert outgoing.offsets == {SEQUENCED: 2, ANSWERS[0]: 40, ANSWERS[1]: 8}

    last = judge.step({ANSWERS[1]: [Record(8, answer_record(1, 2, 3, answers[1][2:]))]})

    assert last is not None and last.report.documents == 30
    assert last.offsets == {SEQUENCED: 3, ANSWERS[0]: 41, ANSWERS[1]: 9}


class _Consumer:
    """What a take-over asks of the consumer: the answers' partitions, committed offsets, seeks."""

    def __init__(self) -> None:
        self.seeks: dict[TopicPartition, int] = {}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0, 1}

    def committed(self, partition: TopicPartition, timeout_ms: int | None = None) -> int:
        assert timeout_ms is not None  # never a wait without end (kafka.group_offsets)
        return 5

    def seek(self, partition: TopicPartition, offset: int) -> None:
        self.seeks[partition] = offset


def test_a_take_over_forgets_what_was_read_and_reads_again_from_the_committed_offsets() -> None:
    judge = Judge(SETTINGS)
    batch = batches(make_corpus(30, seed=5), 30)[0]
    judge.step({SEQUENCED: [Record(0, encode_entry(ChangelogEntry(batch, "documents", {}), DIGEST)[0])]})
    assert len(judge.batches) == 1
    consumer = _Consumer()

    judge.take_over(consumer, [SEQUENCED, *ANSWERS])  # type: ignore[arg-type]

    assert not judge.batches and not judge.progress
    assert consumer.seeks == dict.fromkeys([SEQUENCED, *ANSWERS], 5)


def test_a_shard_answering_under_other_settings_is_named_in_a_warning_each_time_that_changes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    judge = Judge(SETTINGS)
    other = replace(CONFIG, threshold=0.795, max_bucket_size=50)  # the same signatures
    records = {
        ANSWERS[0]: [Record(o, answer_record(0, o, o + 1, [], CONFIG)) for o in range(3)],
        ANSWERS[1]: [
            Record(o, answer_record(1, o, o + 1, [], config)) for o, config in enumerate([other, other, CONFIG])
        ],
    }

    with caplog.at_level(logging.WARNING, logger="stream_dedup.roles.judge"):
        judge.step(records)
        judge.step({ANSWERS[1]: [Record(3, answer_record(1, 3, 4, [], other))]})

    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 2, warnings  # shard 1 differs, agrees again, differs again; shard 0 always agrees
    assert all(w.startswith("shard 1 answers under other detection settings") for w in warnings)
    assert "(threshold 0.795 -> 0.8, max_bucket_size 50 -> 64)" in warnings[0]


def test_a_damaged_record_names_its_topic_partition_and_offset() -> None:
    judge = Judge(SETTINGS)
    value = answer_record(1, 0, 1, [])

    with pytest.raises(ChangelogError, match=f"topic '{SETTINGS.answers_topic}' partition 1 offset 12: .*truncated"):
        judge.step({ANSWERS[1]: [Record(12, value[:-1])]})
    with pytest.raises(ChangelogError, match=f"topic '{SETTINGS.sequenced_topic}' partition 0 offset 3: .*sequenced"):
        judge.step({SEQUENCED: [Record(3, b"SDCL\x02" + b"\xff" * 4)]})


class _EndingConsumer(_Consumer):
    """A consumer whose sequenced topic ends at ``end`` (the fetches have seen ``highwater`` of it)."""

    def __init__(self, end: int, highwater: int | None = None) -> None:
        super().__init__()
        self.end = end
        self.seen = highwater

    def highwater(self, partition: TopicPartition) -> int | None:
        return self.seen

    def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict.fromkeys(partitions, self.end)


def test_answers_past_the_end_of_the_judges_sequenced_topic_stop_it_naming_sequenced_topic() -> None:
    """A judge given another sequenced topic than its shards' (a new shard set's judge started with the new
    group_id alone reads an empty ``G'.sequenced``) would wait for ever for batches that never come."""
    judge = Judge(SETTINGS)
    judge.take_over(_EndingConsumer(end=0), [SEQUENCED, *ANSWERS])  # type: ignore[arg-type]

    with pytest.raises(ConfigError, match=r"sequenced_topic.*shard 0 has answered sequenced offsets up to 7"):
        judge.step({ANSWERS[0]: [Record(0, answer_record(0, 0, 7, []))]})


def test_answers_within_the_judges_sequenced_topic_are_read_as_ever() -> None:
    """Shards ahead of what the judge has fetched are not refused: the topic's end is asked before refusing."""
    judge = Judge(SETTINGS)
    judge.take_over(_EndingConsumer(end=9, highwater=3), [SEQUENCED, *ANSWERS])  # type: ignore[arg-type]

    assert judge.step({ANSWERS[k]: [Record(0, answer_record(k, 0, 9, []))] for k in range(2)}) is None
    assert judge.progress == {0: 9, 1: 9}


def test_a_shard_that_never_answers_is_named_by_its_shard_index_once_batches_waited_a_minute(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Two shards given one shard_index leave another index unrun: the judge says which one it waits for."""
    judge = Judge(SETTINGS)
    batch = batches(make_corpus(30, seed=6), 30)[0]
    judge.step(
        {
            SEQUENCED: [Record(0, encode_entry(ChangelogEntry(batch, "documents", {}), DIGEST)[0])],
            ANSWERS[0]: [Record(0, answer_record(0, 0, 1, []))],
        }
    )
    assert judge.waiting_since is not None
    judge.observe(WorkerEvents())
    assert not caplog.records  # a moment's wait is ordinary

    judge.waiting_since -= 61
    judge.observe(WorkerEvents())
    judge.observe(WorkerEvents())

    (warning,) = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert "shard 1 of 2" in warning and "shard_index=1" in warning and ".shard-1" in warning
