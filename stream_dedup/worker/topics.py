"""The topics of the stage, created when missing at the start of each session, and how the changelog is configured.

At the start of each session, not only at start-up: an operator who deletes
a written topic while the stage runs ends the session (its commit names the
topic, :mod:`stream_dedup.kafka.bounded_commit`), and the next session must
find it again rather than fail the same way for ever. Deleted history is
another matter (:func:`refuse_lost_history`).
"""

import logging
from dataclasses import dataclass

from kafka import TopicPartition

from stream_dedup.errors import DeletedInputError, LostHistoryError, TopicConfigError
from stream_dedup.kafka.changelog import MAX_MESSAGE_BYTES, ROW_BYTES_BESIDES_SET, SHINGLE_BYTES, START_OVER
from stream_dedup.kafka.clients import (
    KafkaConnection,
    TopicSpec,
    ensure_topics,
    groupless_consumer,
    log_offsets,
    missing_topics,
)
from stream_dedup.kafka.group_offsets import has_committed
from stream_dedup.kafka.topic_limits import size_limits, topic_configs
from stream_dedup.worker.batch import Destinations
from stream_dedup.worker.settings import WorkerSettings

#: Changelog bytes per document besides its sketch and keys: event time (8),
#: source (8), end of its id (8) and an id of about 48 bytes.
_CHANGELOG_BYTES_BESIDES_SKETCH = 72

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class History:
    """A topic holding the stage's state (the changelog; a sharded stage's sequenced and answers topics), and a
    group whose committed offsets say it holds some.

    The group commits its offsets of ``read_topic`` in the transactions that
    write to ``topic``: offsets committed mean batches were written there.
    """

    setting: str
    topic: str
    group_id: str
    read_topic: str


def ensure_stage_topics(settings: WorkerSettings, deleted_if_missing: bool = False) -> None:
    """Create the stage's topics if missing: the input (one partition), and those written, as wide as the input.

    ``deleted_if_missing``: a session ran before, so a written topic missing
    now was deleted under the stage. It is created again, and named in a
    WARNING: what it held is gone, and an operator's mistake must not pass
    unseen. A missing changelog is refused, there or at start-up, when the
    group's offsets say it held batches (:func:`refuse_lost_history`).
    """
    s = settings
    written = [s.output_topic, s.dead_letter_topic, *([s.unique_topic] if s.unique_topic else [])]
    refuse_lost_history(s.connection(), [History("changelog_topic", s.changelog_topic, s.group_id, s.input_topic)])
    refuse_deleted_input(s.connection(), s.input_topic, "changelog_topic", s.changelog_topic)
    if deleted_if_missing:
        warn_of_deleted(s, written)
    partitions = ensure_topics(s.connection(), [TopicSpec(s.input_topic, 1)])[s.input_topic]
    ensure_topics(
        s.connection(),
        [TopicSpec(name, partitions) for name in written]
        # One partition: the changelog is one ordered history of the index.
        + [TopicSpec(s.changelog_topic, 1, changelog_configs(s))],
    )
    check_history_retention(s, s.changelog_topic, "changelog_topic")
    check_history_record_size(s, s.changelog_topic, "changelog_topic")


def refuse_lost_history(connection: KafkaConnection, histories: list[History]) -> None:
    """Raise :class:`LostHistoryError` for a history topic that is missing while its group has committed offsets.

    The stage rebuilds its state from that topic, and goes on from the
    group's offsets: a history created anew, empty, would have it judge each
    document against an index missing every one before it, wrong verdicts
    with nothing above a WARNING to say so. A missing history whose group
    never committed lost nothing, and is created as at a first start.
    """
    gone = set(missing_topics(connection, [h.topic for h in histories]))
    for history in histories:
        if history.topic in gone and has_committed(connection, history.group_id, history.read_topic):
            raise LostHistoryError(
                f"{history.setting} {history.topic!r} does not exist, but group {history.group_id!r} has committed "
                f"offsets of {history.read_topic!r}: the topic the stage rebuilds its state from was deleted "
                "(while the stage ran, or since). Going on from those offsets would judge each document against "
                f"an index missing every one before it (or wait for answers lost with it). To start over, {START_OVER}"
            )


def refuse_deleted_input(connection: KafkaConnection, input_topic: str, setting: str, history_topic: str) -> None:
    """Raise :class:`DeletedInputError` if ``input_topic`` is missing while ``history_topic`` holds batches of it.

    A missing input is created (one partition) only at a first start. The
    group's committed offsets cannot tell, since Kafka drops them with the
    topic: the history can (a record ever written, even one retention
    deleted since, leaves its end offset above 0). A stage whose input was
    deleted under it stood by for good ("another replica holds the
    partitions"), or created the input again with one partition.
    """
    if not missing_topics(connection, [input_topic]):
        return
    where = TopicPartition(history_topic, 0)
    if missing_topics(connection, [history_topic]):
        return
    consumer = groupless_consumer(connection, "earliest")
    try:
        if log_offsets(consumer, [where])[where] == 0:
            return
    finally:
        consumer.close()
    raise DeletedInputError(
        f"input_topic {input_topic!r} does not exist, but {setting} {history_topic!r} holds batches judged of it: "
        "the input was deleted (while the stage ran, or since), and the stage does not create it again (a new "
        "topic under the old name is not the one its offsets are of). Point input_topic at the topic to judge; "
        f"to judge a new topic of this name, {START_OVER}"
    )


def warn_of_deleted(settings: WorkerSettings, written: list[str]) -> None:
    """Name in a WARNING each of the ``written`` topics that is missing: it was deleted while the stage ran."""
    names = settings.topic_settings()
    for topic in missing_topics(settings.connection(), written):
        log.warning(
            "%s %r was deleted while the stage ran: creating it again (what it held is gone; records of "
            "batches not yet committed are published to the new topic)",
            names[topic],
            topic,
        )


def stage_destinations(settings: WorkerSettings) -> Destinations:
    """Where a batch's records go, with what each topic accepts, read from the brokers.

    Read at the start of every session: a record refused for its size aborts
    the session, and the next one then works with the topic's current limit.
    """
    s = settings
    written = [s.output_topic, s.dead_letter_topic, *([s.unique_topic] if s.unique_topic else [])]
    return Destinations(
        s.output_topic,
        s.dead_letter_topic,
        s.changelog_topic,
        s.unique_topic,
        size_limits(s.connection(), written),
        s.written_topics([*written, s.changelog_topic]),
    )


def changelog_configs(settings: WorkerSettings) -> dict[str, str]:
    """Retention of the changelog follows the index's: keep what the index still holds, twice over.

    Twice over, so that ids of up to ~200 bytes on average still fit in the
    retained bytes. With exact verification each record also holds its
    documents' shingle sets, 4 bytes a shingle, whose size the stage cannot
    know before it reads them: they are counted at their largest
    (``max_document_bytes`` shingles a document), since a changelog that
    drops what the index still holds would restore a smaller index, and
    verdicts that differ from the uninterrupted run's. A limit the index does
    not have is ``-1`` on the topic too, not left to the broker's default
    (``log.retention.ms`` and ``log.retention.bytes`` may be set).
    """
    configs = {"cleanup.policy": "delete", "max.message.bytes": str(MAX_MESSAGE_BYTES)}
    least = _least_retention(settings)
    configs["retention.ms"] = str(2 * least["retention.ms"]) if least["retention.ms"] >= 0 else "-1"
    if least["retention.bytes"] >= 0:
        per_document = 0
        if settings.detection.verification == "exact":
            per_document = SHINGLE_BYTES * settings.max_document_bytes
        kept = least["retention.bytes"] + (settings.detection.max_documents or 0) * per_document
        configs["retention.bytes"] = str(2 * kept)
    else:
        configs["retention.bytes"] = "-1"
    return configs


def check_history_retention(settings: WorkerSettings, topic: str, setting: str) -> None:
    """Refuse to start on a history topic (changelog or sequenced) that deletes what the index still holds.

    The stage creates these topics with :func:`changelog_configs`; one made by
    hand, or by a tool that left the broker's defaults (often 7 days), may
    keep less. A restore from it would rebuild a smaller index without any
    error, and verdicts would differ from an uninterrupted run's: so start-up
    stops with :class:`TopicConfigError`, naming the topic, what it keeps,
    what it must keep, and the command that fixes it. Only a topic certain to
    lose documents is refused: the floor is what the index holds once, not
    the twice-over the stage itself creates.
    """
    least = _least_retention(settings)
    names = ["cleanup.policy", *least]
    configs = topic_configs(settings.connection(), [topic], names)[topic]
    problems = []
    policy = configs.get("cleanup.policy", "delete")
    if "delete" not in policy or "compact" in policy:
        problems.append(f"cleanup.policy={policy} (it must be delete: compaction drops records by key)")
    for name, floor in least.items():
        kept = int(configs.get(name, "-1"))
        if kept >= 0 and (floor < 0 or kept < floor):
            needed = "-1 (the index has no such limit)" if floor < 0 else f"at least {floor}"
            problems.append(f"{name}={kept} (it must be {needed})")
    if problems:
        fix = ",".join(f"{name}={value}" for name, value in changelog_configs(settings).items() if name in names)
        raise TopicConfigError(
            f"{setting} {topic!r} would delete documents the index still holds: {'; '.join(problems)}. "
            "A restore from it would rebuild a smaller index and give other verdicts. Fix the topic with "
            f"kafka-configs.sh --alter --entity-type topics --entity-name {topic} --add-config {fix}, "
            f"or {START_OVER}"
        )


def check_history_record_size(settings: WorkerSettings, topic: str, setting: str) -> None:
    """Refuse to start, with exact verification, on a history topic that refuses a record of one document.

    Such a record holds the document's shingle set, 4 bytes a shingle, up to
    4 bytes a byte of text: a 1 MiB document's can take 4 MiB. The stage
    creates these topics accepting :data:`MAX_MESSAGE_BYTES`, and
    signing dead-letters a document whose set is larger still; a topic made
    by hand (the broker's default is 1 MB) refuses smaller ones, and the
    batch holding one failed after every restart: the stage stalled on it
    for ever. So start-up stops with :class:`TopicConfigError`, naming the
    topic and the command that fixes it, when the topic cannot take the
    largest document ``max_document_bytes`` lets through.
    """
    if settings.detection.verification != "exact":
        return
    needed = min(MAX_MESSAGE_BYTES, SHINGLE_BYTES * settings.max_document_bytes + ROW_BYTES_BESIDES_SET)
    configs = topic_configs(settings.connection(), [topic], ["max.message.bytes"])[topic]
    accepted = int(configs.get("max.message.bytes", str(MAX_MESSAGE_BYTES)))
    if accepted < needed:
        raise TopicConfigError(
            f"{setting} {topic!r} accepts records of at most {accepted} bytes (max.message.bytes), and with "
            f'verification = "exact" a record of one document of max_document_bytes={settings.max_document_bytes} '
            f"can take {needed}: the batch holding it would fail after every restart. Fix the topic with "
            f"kafka-configs.sh --alter --entity-type topics --entity-name {topic} --add-config "
            f"max.message.bytes={MAX_MESSAGE_BYTES}, lower max_document_bytes, or {START_OVER}"
        )


def _least_retention(settings: WorkerSettings) -> dict[str, int]:
    """What a history topic must keep to hold the index once: ``retention.ms`` and ``retention.bytes``, -1 for all.

    The bytes count each document's sketch, band keys, and about 72 bytes of
    event time, source and id; not the shingle sets of exact verification,
    whose size is known only once read.
    """
    retention = settings.detection.retention()
    least_ms = -1 if retention.max_age_seconds is None else int(retention.max_age_seconds * 1000)
    least_bytes = -1
    if retention.max_documents is not None:
        detection = settings.detection
        keys = 4 * (detection.banding().bands + 1)
        per_document = detection.sketch_bits // 8 + keys + _CHANGELOG_BYTES_BESIDES_SKETCH
        least_bytes = retention.max_documents * per_document
    return {"retention.ms": least_ms, "retention.bytes": least_bytes}
