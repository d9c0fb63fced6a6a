"""Building kafka-python clients with the connection and security settings, and creating topics.

Every client of the stage (the group consumer, the changelog reader, the
transactional producer, the admin client) connects the same way, so the
SASL and SSL settings are passed through in one place. The stage's two main
clients, and their tuning, are built here too, so that the benchmarks' bare
relay uses the very same options.
"""

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka import errors as kafka_errors
from kafka.admin import MemberToRemove
from kafka.consumer.group import KafkaConsumer as _KafkaPythonConsumer  # kafka-python's own, whatever stands in
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
from kafka.errors import KafkaError, KafkaTimeoutError, TopicAlreadyExistsError, TopicAuthorizationFailedError

from stream_dedup.kafka.assignor import SingleActiveAssignor
from stream_dedup.kafka.fetched_records import read_fetches_quickly
from stream_dedup.kafka.oversized_batches import LARGEST_RECORD_SENT, BatchBound

log = logging.getLogger(__name__)

_Client = TypeVar("_Client", KafkaConsumer, KafkaProducer)

#: Longest wait between a client's attempts to reconnect to a broker (kafka-python's default is 30 s, the Java
#: clients' 1 s): after a broker's return each client of a chain (signer, shard, judge) waited up to 30 s in turn,
#: and roles mode took 52 s to publish again; 5 s keeps an outage's reconnect log lines few.
RECONNECT_BACKOFF_MAX_MS = 5_000
#: Longest wait for the partitions of a topic that exists to be described.
_TOPIC_METADATA_SECONDS = 30.0

#: The transactional producer's tuning (kafka-python's defaults in brackets).
PRODUCER_TUNING: dict[str, Any] = {
    # Wait up to 5 ms for more records before sending a request [0]: a batch's
    # verdicts then go out in a few large requests instead of one per record.
    "linger_ms": 5,
    # Bytes per partition per request [16 KiB]: room for about a thousand verdicts.
    "batch_size": 256 * 1024,
    # Largest request [1 MiB]: above the largest single record the stage sends, a
    # forwarded document of max_document_bytes (1 MiB) or a changelog record.
    "max_request_size": LARGEST_RECORD_SENT,
    # Compress every batch [none]: a ~1 MiB value that arrived compressed must
    # fit a dead-letter topic of the same max.message.bytes (which the broker
    # checks on the compressed batch). zstd at its default level (3), which
    # kafka.record_fit's size check mirrors: the changelog's sketches do not
    # compress, and gzip at kafka-python's level 9 spent more CPU on them, in
    # this process and in the broker, than the loop spends on a document's
    # probe and insert. Readers need a client with zstd (Kafka 2.1 on;
    # kafka-python with the zstandard package).
    "compression_type": "zstd",
    # Wait before a retried request [100 ms]. kafka-python sleeps this long before
    # every retried transactional request, and a transaction begun as the one before
    # it completes has its first AddPartitionsToTxn or AddOffsetsToTxn refused
    # (CONCURRENT_TRANSACTIONS) while the broker writes the commit markers, which
    # takes a few ms: one batch in seven paid 100 ms for that. Java's producer
    # waits 20 ms there too.
    "retry_backoff_ms": 20,
}


@dataclass(frozen=True)
class KafkaConnection:
    """Where the brokers are and how to authenticate (kafka-python's option names)."""

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = field(default=None, repr=False)
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    client_id: str = "stream-dedup"

    def servers(self) -> list[str]:
        """Each ``host:port`` of ``bootstrap_servers``, as the clients are given them."""
        return [s.strip() for s in self.bootstrap_servers.split(",") if s.strip()]

    def options(self) -> dict[str, Any]:
        """Keyword arguments for any kafka-python client (its defaults for unset options, but the reconnect backoff)."""
        given = {
            "bootstrap_servers": self.servers(),
            "security_protocol": self.security_protocol,
            "sasl_mechanism": self.sasl_mechanism,
            "sasl_plain_username": self.sasl_plain_username,
            "sasl_plain_password": self.sasl_plain_password,
            "ssl_cafile": self.ssl_cafile,
            "ssl_certfile": self.ssl_certfile,
            "ssl_keyfile": self.ssl_keyfile,
            "ssl_password": self.ssl_password,
            "client_id": self.client_id,
        }
        return {name: value for name, value in given.items() if value is not None} | {
            "reconnect_backoff_max_ms": RECONNECT_BACKOFF_MAX_MS
        }


def transactional_producer(
    connection: KafkaConnection, transactional_id: str, transaction_timeout_seconds: float
) -> KafkaProducer:
    """The stage's producer; call ``init_transactions()`` before the first transaction.

    It never has the brokers create a topic it asks about: a topic deleted
    while the stage runs would come back with the broker's defaults (one
    partition, the broker's retention for a changelog) and nothing said. The
    stage creates its topics itself, at the start of each session
    (:mod:`stream_dedup.worker.topics`).
    """
    producer = KafkaProducer(
        **connection.options(),
        transactional_id=transactional_id,
        transaction_timeout_ms=int(transaction_timeout_seconds * 1000),
        **PRODUCER_TUNING,
    )
    return never_creating_topics(producer)


def never_creating_topics(client: _Client) -> _Client:
    """``client``, made never to have the brokers create a topic it asks about (returned for chaining).

    kafka-python 3.0 takes ``allow_auto_create_topics`` and drops it: its
    metadata requests always ask for creation, so with the brokers'
    ``auto.create.topics.enable`` on (Kafka's default) any consumer or
    producer of a deleted topic made it again within a second, with the
    broker's defaults (one partition, a 7-day retention) and empty. A standby
    tailing a changelog deleted under it did so: the stage judged on, wrote
    the new changelog, and never stopped as a lost history must
    (:func:`~stream_dedup.worker.topics.refuse_lost_history`); its next
    restore rebuilt an index missing every document before the deletion.
    """
    if isinstance(client, KafkaProducer):
        client._metadata.config["allow_auto_create_topics"] = False
    elif isinstance(client, _KafkaPythonConsumer):
        client._client.cluster.config["allow_auto_create_topics"] = False
    # Anything else stands in for a client (the tests' fakes) and asks the brokers nothing.
    return client


def close_producer(producer: KafkaProducer, timeout_seconds: float) -> None:
    """Close ``producer``, also one holding records it can never deliver.

    kafka-python's ``close()`` flushes first, and raises if the flush times
    out before stopping anything: a producer stuck on a transaction that
    cannot commit (see :mod:`stream_dedup.kafka.bounded_commit`) would keep
    its thread retrying the broker for the life of the process. Such a
    producer is closed without sending; its transaction is aborted by the
    next ``init_transactions()`` of its transactional id, or by the broker
    after the transaction timeout.
    """
    try:
        producer.close(timeout=timeout_seconds)
    except KafkaTimeoutError:
        producer._sender.force_close()  # fails the records still held, so the next flush returns
        producer.close(timeout=timeout_seconds)


#: How often a group consumer refreshes its topics' metadata, and so finds partitions added to them.
INPUT_METADATA_MAX_AGE_MS = 10_000


def group_consumer(
    connection: KafkaConnection,
    group_id: str,
    instance_id: str,
    session_timeout_seconds: float,
    max_poll_records: int,
    single_active: bool = True,
    bound: BatchBound | None = None,
) -> KafkaConsumer:
    """The stage's input consumer: static member of ``group_id``, one member holding every partition.

    It commits nothing itself (offsets go into the producer's transactions) and
    reads only committed records, so a batch of an aborted transaction upstream
    is never judged. ``single_active=False`` (``parallel_signers``) spreads the
    partitions over the members with Kafka's own assignors instead. ``bound``:
    how far a fetched batch is decompressed (:mod:`stream_dedup.kafka.oversized_batches`).
    """
    assignors = [SingleActiveAssignor()] if single_active else [RangePartitionAssignor, RoundRobinPartitionAssignor]
    consumer = KafkaConsumer(
        **connection.options(),
        group_id=group_id,
        group_instance_id=instance_id,
        enable_auto_commit=False,
        isolation_level="read_committed",
        auto_offset_reset="earliest",
        partition_assignment_strategy=assignors,
        session_timeout_ms=int(session_timeout_seconds * 1000),
        # Three heartbeats per session timeout, Kafka's usual ratio.
        heartbeat_interval_ms=max(100, int(session_timeout_seconds * 1000 / 3)),
        max_poll_records=max_poll_records,
        # Partitions added to the input are found by a metadata refresh [5 min]: until then their
        # records wait unread, and an original there is judged after its copy on an old partition.
        metadata_max_age_ms=INPUT_METADATA_MAX_AGE_MS,
    )
    return read_fetches_quickly(never_creating_topics(consumer), bound)


def groupless_consumer(
    connection: KafkaConnection, reset: str, bound: BatchBound | None = None, **options: Any
) -> KafkaConsumer:
    """A consumer of no group, committing nothing: committed records only, fetches read quickly.

    ``reset`` is kafka-python's ``auto_offset_reset`` (where to go from an
    offset the partition no longer holds); ``bound``: how far a fetched batch
    is decompressed; ``options`` are more of its settings.
    """
    return read_fetches_quickly(
        never_creating_topics(
            KafkaConsumer(
                **connection.options(),
                group_id=None,
                enable_auto_commit=False,
                isolation_level="read_committed",
                auto_offset_reset=reset,
                **options,
            )
        ),
        bound,
    )


def partition_reader(
    connection: KafkaConnection, partition: TopicPartition, offset: int, reset: str, **options: Any
) -> KafkaConsumer:
    """A :func:`groupless_consumer` reading ``partition`` from ``offset``."""
    consumer = groupless_consumer(connection, reset, **options)
    consumer.assign([partition])
    consumer.seek(partition, offset)
    return consumer


def topic_id(consumer: KafkaConsumer, topic: str) -> str | None:
    """Kafka's id of ``topic`` (a topic deleted and created again under its name gets a new one); None if unknown.

    From the consumer's metadata, fetched for the topic if it has none (brokers
    older than Kafka 2.8 send no ids).
    """
    consumer.partitions_for_topic(topic)
    found = consumer._client.cluster.topic_id(topic)  # kafka-python keeps the ids of its metadata here only
    return None if found is None else str(found)


def end_offsets_reader(connection: KafkaConnection) -> KafkaConsumer:
    """A consumer of no group, for asking end offsets only (read_committed: the last stable offsets).

    The group consumer cannot ask them quickly. A broker answers one
    connection's requests in order, and the group consumer's fetch for a
    partition it has read to the end is parked on the broker for up to
    ``fetch_max_wait_ms`` (500 ms) waiting for new records: a ListOffsets sent
    behind it waited that long, once per batch whenever the merge had fetched
    a partition to its end (the live edge, or a backlog the buffers hold
    whole). On a connection of its own the answer takes one round trip.
    """
    return never_creating_topics(
        KafkaConsumer(**connection.options(), isolation_level="read_committed", enable_auto_commit=False)
    )


def log_offsets(
    consumer: KafkaConsumer, partitions: list[TopicPartition], end: bool = True
) -> dict[TopicPartition, int]:
    """The end (else the beginning) offsets of ``partitions``, partitions added since the last metadata included.

    kafka-python 3.0 leaves out a partition its metadata does not know yet
    (one added to the topic since its last refresh, up to
    ``metadata_max_age_ms`` ago) and then fails with a ``KeyError`` for it:
    a stage whose input grew partitions crashed. The metadata is then fetched
    again (``topics()``: one request) and the offsets asked again; a partition
    still unknown is a Kafka error (the session restarts).
    """
    ask = consumer.end_offsets if end else consumer.beginning_offsets
    try:
        return dict(ask(partitions))
    except KeyError:
        consumer.topics()
    try:
        return dict(ask(partitions))
    except KeyError as missing:
        raise KafkaError(f"{missing.args[0]} is not in the brokers' metadata") from missing


@dataclass(frozen=True)
class TopicSpec:
    """A topic the stage writes to, created if missing."""

    name: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)


def ensure_topics(connection: KafkaConnection, topics: list[TopicSpec]) -> dict[str, int]:
    """Create the missing topics; return the partition count of every topic asked for."""
    admin = KafkaAdminClient(**connection.options())
    try:
        absent = set(_absent(admin, [t.name for t in topics]))
        missing = [t for t in topics if t.name in absent]
        if missing:
            try:
                with contextlib.suppress(TopicAlreadyExistsError):  # another replica created it first
                    admin.create_topics(
                        {
                            t.name: {"num_partitions": t.partitions, "replication_factor": -1, "configs": t.configs}
                            for t in missing
                        },
                        # Waited for below: kafka-python's wait stalled 10 s on a topic we may create but not
                        # describe (no Write or Read ACL), then a KafkaTimeoutError hid the authorization error.
                        wait_for_metadata=False,
                    )
            except TopicAuthorizationFailedError as error:
                # kafka-python's error holds the whole request: name what was refused instead.
                names = ", ".join(t.name for t in missing)
                raise TopicAuthorizationFailedError(f"Create on topic {names} (or on the cluster)") from error
            for topic in missing:
                log.info("created topic %s (%d partitions)", topic.name, topic.partitions)
        # A topic another process is creating at this very moment exists, but its
        # partitions may not be described yet: wait for them (the roles of a sharded
        # stage start together and all create the same topics).
        deadline = time.monotonic() + _TOPIC_METADATA_SECONDS
        while True:
            described = admin.describe_topics([t.name for t in topics])
            _raise_if_refused(described)
            counts = {entry["name"]: len(entry["partitions"]) for entry in described}
            if all(counts.get(t.name) for t in topics) or time.monotonic() > deadline:
                return counts
            time.sleep(0.2)
    finally:
        admin.close()


def _raise_if_refused(described: list[dict[str, Any]]) -> None:
    """Raise the authorization error of a topic the brokers refused to describe, naming it.

    ``describe_topics`` returns a refused topic with its error code and no
    partitions: waiting for its partitions would wait for nothing.
    """
    for entry in described:
        error = kafka_errors.for_code(entry.get("error_code", 0))
        if issubclass(error, kafka_errors.AuthorizationError):
            raise error(f"Describe on topic {entry['name']} (implied by Read or Write)")


def missing_topics(connection: KafkaConnection, topics: list[str]) -> list[str]:
    """Those of ``topics`` the brokers do not know, in order.

    Raises the authorization error of a topic the user may not describe: the
    brokers' topic list leaves it out as if it did not exist, and a changelog
    whose ACLs were lost was taken for one deleted, the stage then advising to
    start over (exit 1) where an ACL was missing.
    """
    admin = KafkaAdminClient(**connection.options())
    try:
        return _absent(admin, topics)
    finally:
        admin.close()


def _absent(admin: KafkaAdminClient, topics: list[str]) -> list[str]:
    """Those of ``topics`` the brokers answer do not exist (named: a topic list leaves out those refused too)."""
    if not topics:
        return []
    described = admin.describe_topics(topics)
    _raise_if_refused(described)
    known = {
        entry["name"]
        for entry in described
        if kafka_errors.for_code(entry.get("error_code", 0)) is not kafka_errors.UnknownTopicOrPartitionError
    }
    return [topic for topic in topics if topic not in known]


def leave_group(connection: KafkaConnection, group_id: str, instance_id: str) -> None:
    """Remove a static member from its group at once (closing it does not), so that a standby takes over.

    A failure is logged, not raised: the member's session then times out instead.
    """
    try:
        admin = KafkaAdminClient(**connection.options())
        try:
            admin.remove_group_members(group_id, [MemberToRemove(group_instance_id=instance_id)])
        finally:
            admin.close()
    except KafkaError as error:
        log.warning("could not leave the group (the session times out instead): %r", error)


class SessionBackoff:
    """How long to wait after a session ended in a Kafka error: 1 s, doubling up to 30 s while sessions keep
    failing at once; 1 s again after one that ran a while (or ended well).

    A session that ran for hours before a broker restart is not a failing
    one: its successor must not wait the 30 s that errors long past built up.
    """

    def __init__(self, first: float = 1.0, most: float = 30.0) -> None:
        self.first = first
        self.most = most
        self._next = first

    def after_failure(self, lasted: float) -> float:
        """The pause before the next session, after one that ran ``lasted`` seconds (the one after doubles)."""
        if lasted >= self.most:
            self._next = self.first
        seconds = self._next
        self._next = min(2 * seconds, self.most)
        return seconds

    def after_success(self) -> None:
        self._next = self.first
