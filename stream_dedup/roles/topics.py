"""The topics of a sharded stage, created at start-up when missing, and checked against the settings."""

from stream_dedup.errors import ConfigError, TopicConfigError
from stream_dedup.kafka.clients import TopicSpec, ensure_topics
from stream_dedup.worker.settings import WorkerSettings
from stream_dedup.worker.topics import changelog_configs, check_history_retention


def ensure_role_topics(settings: WorkerSettings) -> None:
    """Create what is missing; every role does it, so that any may start first.

    The sequenced topic is a changelog (one partition, the changelog's
    retention); the answers topic has a partition per shard, kept as long
    (a judge stopped for a while must still find them); the output,
    dead-letter and unique topics are as wide as the input, as in the
    single-process stage.
    """
    s = settings
    connection = s.connection()
    partitions = ensure_topics(connection, [TopicSpec(s.input_topic, 1)])[s.input_topic]
    configs = changelog_configs(s)
    counts = ensure_topics(
        connection,
        [
            TopicSpec(s.output_topic, partitions),
            TopicSpec(s.dead_letter_topic, partitions),
            TopicSpec(s.sequenced_topic, 1, configs),
            TopicSpec(s.answers_topic, s.shards, configs),
            *([TopicSpec(s.unique_topic, partitions)] if s.unique_topic else []),
        ],
    )
    if counts[s.sequenced_topic] != 1:
        raise TopicConfigError(
            f"sequenced_topic {s.sequenced_topic!r} has {counts[s.sequenced_topic]} partitions; it must have one "
            "(its order is the order of the whole stage): point sequenced_topic at a new topic"
        )
    check_history_retention(s, s.sequenced_topic, "sequenced_topic")
    if counts[s.answers_topic] != s.shards:
        raise ConfigError(
            "shards",
            f"answers_topic {s.answers_topic!r} has {counts[s.answers_topic]} partitions but shards={s.shards}: "
            "a new shard count needs a new group_id (new groups and topics, see docs/scale-out.md)",
        )
