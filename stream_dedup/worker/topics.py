"""The topics of the stage, created at start-up when missing, and how the changelog is configured."""

from stream_dedup.kafka.clients import TopicSpec, ensure_topics
from stream_dedup.kafka.topic_limits import size_limits
from stream_dedup.worker.batch import Destinations
from stream_dedup.worker.settings import WorkerSettings

#: Largest changelog record the broker accepts. A record holds at least one
#: document, and with exact verification a 1 MiB document's shingle set alone
#: takes up to 4 MiB.
CHANGELOG_MAX_MESSAGE_BYTES = 8 << 20

#: Changelog bytes per shingle of a document's shingle set (exact verification).
_SHINGLE_BYTES = 4
#: Changelog bytes per document besides its sketch and keys: event time (8),
#: source (8), end of its id (8) and an id of about 48 bytes.
_CHANGELOG_BYTES_BESIDES_SKETCH = 72


def ensure_stage_topics(settings: WorkerSettings) -> None:
    """Create the stage's topics if missing: the input (one partition), and those written, as wide as the input."""
    s = settings
    partitions = ensure_topics(s.connection(), [TopicSpec(s.input_topic, 1)])[s.input_topic]
    written = [s.output_topic, s.dead_letter_topic, *([s.unique_topic] if s.unique_topic else [])]
    ensure_topics(
        s.connection(),
        [TopicSpec(name, partitions) for name in written]
        # One partition: the changelog is one ordered history of the index.
        + [TopicSpec(s.changelog_topic, 1, changelog_configs(s))],
    )


def stage_destinations(settings: WorkerSettings) -> Destinations:
    """Where a batch's records go, with what each topic accepts, read from the brokers.

    Read at the start of every session: a record refused for its size aborts
    the session, and the next one then works with the topic's current limit.
    """
    s = settings
    written = [s.output_topic, s.dead_letter_topic, *([s.unique_topic] if s.unique_topic else [])]
    return Destinations(
        s.output_topic, s.dead_letter_topic, s.changelog_topic, s.unique_topic, size_limits(s.connection(), written)
    )


def changelog_configs(settings: WorkerSettings) -> dict[str, str]:
    """Retention of the changelog follows the index's: keep what the index still holds, twice over.

    Twice over, so that ids of up to ~200 bytes on average still fit in the
    retained bytes. With exact verification each record also holds its
    documents' shingle sets, 4 bytes a shingle, whose size the stage cannot
    know before it reads them: they are counted at their largest
    (``max_document_bytes`` shingles a document), since a changelog that
    drops what the index still holds would restore a smaller index, and
    verdicts that differ from the uninterrupted run's.
    """
    retention = settings.detection.retention()
    configs = {"cleanup.policy": "delete", "max.message.bytes": str(CHANGELOG_MAX_MESSAGE_BYTES)}
    if retention.max_age_seconds is not None:
        configs["retention.ms"] = str(int(retention.max_age_seconds * 2000))
    else:
        configs["retention.ms"] = "-1"
    if retention.max_documents is not None:
        detection = settings.detection
        keys = 4 * (detection.banding().bands + 1)
        per_document = detection.sketch_bits // 8 + keys + _CHANGELOG_BYTES_BESIDES_SKETCH
        if detection.verification == "exact":
            per_document += _SHINGLE_BYTES * settings.max_document_bytes
        configs["retention.bytes"] = str(2 * retention.max_documents * per_document)
    return configs
