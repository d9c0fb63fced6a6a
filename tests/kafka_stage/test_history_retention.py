"""A history topic (changelog, sequenced) made by hand that keeps less than the index holds stops start-up.

A restore from such a topic would rebuild a smaller index with no error at
all, and give other verdicts than an uninterrupted run: the check is on the
real broker, which reports each topic's effective retention, broker defaults
included. So does one that refuses the record of a document the stage
accepts (exact verification: its shingle set), which would fail its batch
after every restart.
"""

from collections.abc import Callable
from pathlib import Path

import pytest

from stream_dedup.errors import TopicConfigError
from stream_dedup.roles.topics import ensure_role_topics
from stream_dedup.worker.topics import changelog_configs, ensure_stage_topics

from .stage import Stage, WorkerProcess

pytestmark = pytest.mark.kafka

HOUR_MS = 3_600_000


def test_a_changelog_left_to_the_brokers_retention_stops_start_up_naming_the_fix(
    stage: Stage, topic_factory: Callable[..., str]
) -> None:
    """No configs of its own: the broker's default retention (an hour on the test broker, a week on most)."""
    changelog = topic_factory(partitions=1)
    settings = stage.settings(changelog_topic=changelog)  # the index keeps everything: no age or count limit
    with pytest.raises(TopicConfigError) as raised:
        ensure_stage_topics(settings)
    message = str(raised.value)
    assert f"changelog_topic {changelog!r}" in message
    assert "retention.ms=" in message and "it must be -1" in message
    assert f"--entity-name {changelog} --add-config " in message and "retention.ms=-1" in message


@pytest.mark.parametrize(
    ("configs", "refused"),
    [
        ({"retention.ms": str(HOUR_MS), "retention.bytes": "-1"}, None),  # an hour is what the index keeps
        ({"retention.ms": str(HOUR_MS - 1), "retention.bytes": "-1"}, "retention.ms=3599999"),
        ({"retention.ms": str(HOUR_MS), "retention.bytes": "1000000"}, "retention.bytes=1000000"),
        ({"retention.ms": "-1", "retention.bytes": "-1", "cleanup.policy": "compact,delete"}, "cleanup.policy"),
    ],
)
def test_a_changelog_is_refused_only_when_it_keeps_less_than_the_index(
    stage: Stage, topic_factory: Callable[..., str], configs: dict[str, str], refused: str | None
) -> None:
    changelog = topic_factory(partitions=1, configs=configs)
    settings = stage.settings(changelog_topic=changelog, max_age_seconds=3600)
    if refused is None:
        ensure_stage_topics(settings)
        return
    with pytest.raises(TopicConfigError, match=refused):
        ensure_stage_topics(settings)


def test_the_stage_accepts_the_changelog_it_created(stage: Stage) -> None:
    """The twice-over the stage creates passes its own check, count limits included, on a second start."""
    settings = stage.settings(max_documents=10_000, max_age_seconds=600)
    ensure_stage_topics(settings)
    ensure_stage_topics(settings)
    assert changelog_configs(settings)["retention.bytes"] != "-1"


def test_a_sequenced_topic_that_keeps_too_little_stops_a_role(stage: Stage, topic_factory: Callable[..., str]) -> None:
    sequenced = topic_factory(partitions=1, configs={"retention.ms": str(HOUR_MS)})
    settings = stage.settings("shard-0", role="shard", shards=1, sequenced_topic=sequenced)
    with pytest.raises(TopicConfigError, match=f"sequenced_topic {sequenced!r}"):
        ensure_role_topics(settings)


def test_run_exits_1_with_the_message(stage: Stage, topic_factory: Callable[..., str], tmp_path: Path) -> None:
    changelog = topic_factory(partitions=1, configs={"retention.ms": str(HOUR_MS)})
    worker = WorkerProcess(stage.environment(changelog_topic=changelog), tmp_path / "worker.log").start()
    assert worker.wait(timeout=60) == 1
    output = (tmp_path / "worker.log").read_text()
    assert f"stream-dedup: changelog_topic {changelog!r} would delete documents" in output
    assert "Traceback" not in output


@pytest.mark.parametrize(
    ("max_document_bytes", "refused"),
    [(1 << 20, True), (200_000, False)],  # a 1 MiB document's shingle set takes up to 4 MiB; 200 KB's 800 KB
)
def test_a_history_topic_refusing_one_documents_record_stops_start_up_under_exact_verification(
    stage: Stage, topic_factory: Callable[..., str], max_document_bytes: int, refused: bool
) -> None:
    """The broker's default 1 MB: a document's record of its shingle set failed its batch after every restart."""
    configs = {"retention.ms": "-1", "retention.bytes": "-1", "max.message.bytes": str(1_000_000)}
    changelog, sequenced = topic_factory(partitions=1, configs=configs), topic_factory(partitions=1, configs=configs)
    exact = {"verification": "exact", "max_document_bytes": max_document_bytes}
    stage_settings = stage.settings(changelog_topic=changelog, **exact)
    role_settings = stage.settings("shard-0", role="shard", shards=1, sequenced_topic=sequenced, **exact)
    for ensure, settings, setting, topic in [
        (ensure_stage_topics, stage_settings, "changelog_topic", changelog),
        (ensure_role_topics, role_settings, "sequenced_topic", sequenced),
    ]:
        if not refused:
            ensure(settings)
            continue
        with pytest.raises(TopicConfigError) as raised:
            ensure(settings)
        assert f"{setting} {topic!r} accepts records of at most 1000000 bytes" in str(raised.value)
        assert f"--entity-name {topic} --add-config max.message.bytes=" in str(raised.value)


def test_a_history_topic_of_the_brokers_record_size_is_fine_without_exact_verification(
    stage: Stage, topic_factory: Callable[..., str]
) -> None:
    changelog = topic_factory(
        partitions=1, configs={"retention.ms": "-1", "retention.bytes": "-1", "max.message.bytes": "1000000"}
    )
    ensure_stage_topics(stage.settings(changelog_topic=changelog))
