"""The topics of a sharded stage, created at start-up when missing, and checked against the settings."""

from stream_dedup.errors import ConfigError, TopicConfigError
from stream_dedup.kafka.clients import TopicSpec, ensure_topics
from stream_dedup.worker.settings import WorkerSettings
from stream_dedup.worker.topics import (
    History,
    changelog_configs,
    check_history_record_size,
    check_history_retention,
    refuse_deleted_input,
    refuse_lost_history,
    warn_of_deleted,
)


def ensure_role_topics(settings: WorkerSettings, deleted_if_missing: bool = False) -> None:
    """Create what is missing; every role does it, at the start of each session, so that any may start first.

    The sequenced topic is a changelog (one partition, the changelog's
    retention); the answers topic has a partition per shard, kept as long
    (a judge stopped for a while must still find them); the output,
    dead-letter and unique topics are as wide as the input, as in the
    single-process stage. As there (:func:`~stream_dedup.worker.topics.ensure_stage_topics`),
    ``deleted_if_missing`` names a written topic deleted under a running
    session in a WARNING, and the two history topics are refused when
    missing while the groups writing them have committed offsets: the
    shards' indexes are rebuilt from the sequenced topic, and the judge
    waits for the answers of every document the shards' offsets say they answered.

    A signer leaves the answers topic alone: it neither reads nor writes
    it, and a new shard count is a new shard set under another ``group_id``
    while the signers run on under theirs (docs/scale-out.md). Checked
    against the signer's ``shards``, the old set's answers topic, narrower
    than the new count or deleted once that set stopped, refused the
    signer's restart with advice to take a new ``group_id``, which signs the
    whole input again.
    """
    s = settings
    connection = s.connection()
    answered = s.role != "signer"
    answers = [
        History("answers_topic", s.answers_topic, s.group_of("shard", k), s.sequenced_topic)
        for k in range(s.shards if answered else 0)
    ]
    refuse_lost_history(
        connection, [History("sequenced_topic", s.sequenced_topic, s.group_of("signer"), s.input_topic), *answers]
    )
    refuse_deleted_input(connection, s.input_topic, "sequenced_topic", s.sequenced_topic)
    written = [s.output_topic, s.dead_letter_topic, *([s.unique_topic] if s.unique_topic else [])]
    if deleted_if_missing:
        warn_of_deleted(s, written)
    partitions = ensure_topics(connection, [TopicSpec(s.input_topic, 1)])[s.input_topic]
    configs = changelog_configs(s)
    counts = ensure_topics(
        connection,
        [
            TopicSpec(s.output_topic, partitions),
            TopicSpec(s.dead_letter_topic, partitions),
            TopicSpec(s.sequenced_topic, 1, configs),
            *([TopicSpec(s.answers_topic, s.shards, configs)] if answered else []),
            *([TopicSpec(s.unique_topic, partitions)] if s.unique_topic else []),
        ],
    )
    if counts[s.sequenced_topic] != 1:
        raise TopicConfigError(
            f"sequenced_topic {s.sequenced_topic!r} has {counts[s.sequenced_topic]} partitions; it must have one "
            "(its order is the order of the whole stage): point sequenced_topic at a new topic"
        )
    check_history_retention(s, s.sequenced_topic, "sequenced_topic")
    check_history_record_size(s, s.sequenced_topic, "sequenced_topic")
    if answered and counts[s.answers_topic] != s.shards:
        raise ConfigError(
            "shards",
            f"answers_topic {s.answers_topic!r} has {counts[s.answers_topic]} partitions but shards={s.shards}: "
            "a new shard count needs a new group_id (new groups and topics, see docs/scale-out.md)",
        )
