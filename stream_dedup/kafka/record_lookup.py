"""Fetching input records again by their coordinates, to show a verdict's document beside its match.

A verdict says where its document and its match were read (``source`` and
``match_source``, see docs/verdicts.md). :class:`RecordLookup` fetches them
with a consumer of its own: no group (it commits nothing and takes no
partition from the stage), one partition assigned and sought at a time, and
``read_committed`` (the records the stage itself could read). What a fetch
brings back is kept, up to a byte budget: a match is often matched again,
and the records after a document are the next verdicts' documents.

A record may be gone, deleted by its topic's retention or with its topic.
That is an answer (:class:`RecordGone`, saying why), not an error.
"""

import logging
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from kafka import TopicPartition
from kafka.errors import KafkaError

from stream_dedup.kafka.clients import KafkaConnection, groupless_consumer, log_offsets
from stream_dedup.kafka.oversized_batches import BatchBound
from stream_dedup.kafka.sized_lru import SizedLru

log = logging.getLogger(__name__)

#: Bytes of fetched records kept (keys and values); the least recently used go first.
DEFAULT_CACHE_BYTES = 32 << 20
#: Longest wait for one record before giving up on it, and for a first connection to the brokers.
DEFAULT_TIMEOUT_SECONDS = 10.0
#: Records one poll may return: the one asked for and a few after it. Few:
#: kafka-python parses every record it returns, and the records a stage asks
#: for again (the earlier half of a near-duplicate pair) lie anywhere in the
#: partition, seldom next to each other.
_RECORDS_PER_POLL = 8
#: Bytes a fetch asks of a partition: one record batch is returned whatever
#: its size (KIP-74), so this bounds only what comes with it, unread.
FETCH_BYTES = 64 << 10
_POLL_MS = 500
#: How long a listing of the topics is trusted: listing them is a round trip to
#: the broker, which a stage reading texts again would otherwise pay per fetch.
_TOPICS_FRESH_SECONDS = 10.0


class RecordGone(NamedTuple):
    """The record cannot be fetched; ``why`` says so in a sentence.

    ``lasting``: whether asking again cannot help (the record or its topic
    deleted), rather than this fetch having failed (a Kafka error, a timeout).
    """

    why: str
    lasting: bool = True


class RecordLookup:
    """Fetch committed records by topic, partition and offset, remembering what was fetched.

    Example (``connection`` a :class:`~stream_dedup.kafka.clients.KafkaConnection`)::

        with RecordLookup(connection) as lookup:
            found = lookup.fetch("documents", 1, 12)  # a ConsumerRecord, or RecordGone(why)
    """

    def __init__(
        self,
        connection: KafkaConnection,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        fetch_bytes: int = FETCH_BYTES,
        bound: BatchBound | None = None,
    ) -> None:
        """``fetch_bytes``: what one fetch asks of a partition; more for reading spans (:meth:`records_between`).

        ``bound``: how far a fetched batch is decompressed (the input's, to read documents as the stage did).

        Raises ``KafkaError`` if no broker answers within ``timeout_seconds``
        (kafka-python's own wait, 30 s, would hold a caller's batch past its
        own deadline).
        """
        self._consumer = groupless_consumer(
            connection,
            # Seeking below the partition's start (records deleted) moves to
            # the start; the offset check in fetch() then finds the gap.
            "earliest",
            bound,
            bootstrap_timeout_ms=int(timeout_seconds * 1000),
            max_poll_records=_RECORDS_PER_POLL,
            max_partition_fetch_bytes=fetch_bytes,
        )
        self._topics: set[str] = set()
        self._topics_listed = float("-inf")
        self._cache: SizedLru[tuple[str, int, int], Any] = SizedLru(cache_bytes, _size)
        self._timeout = timeout_seconds

    def __enter__(self) -> "RecordLookup":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._consumer.close()

    def fetch(self, topic: str, partition: int, offset: int) -> Any:
        """The committed record at ``offset`` (kafka-python's ``ConsumerRecord``), or :class:`RecordGone`.

        Never raises for one record: a Kafka error while fetching it (a
        timeout, an ACL) is its answer too, so that showing one record never
        stops the reader showing the next.
        """
        cached = self._cache.get((topic, partition, offset))
        if cached is not None:
            return cached
        try:
            return self._fetch(topic, partition, offset)
        except KafkaError as error:
            return RecordGone(f"could not be fetched ({type(error).__name__}: {error})", lasting=False)

    def _fetch(self, topic: str, partition: int, offset: int) -> Any:
        if not self._exists(topic):
            return RecordGone(f"topic {topic} does not exist (any more)")
        if not self._has_partition(topic, partition):
            return RecordGone(f"topic {topic} has no partition {partition}")
        where = TopicPartition(topic, partition)
        self._consumer.assign([where])
        self._consumer.seek(where, offset)
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            records = self._consumer.poll(timeout_ms=_POLL_MS).get(where, [])
            if records:
                self.keep(records)
                return records[0] if records[0].offset == offset else self._missing(where, offset)
            # Nothing fetched: past the end, or the offset held a transaction marker, which moves the
            # position on without a record.
            if self._consumer.position(where) > offset or offset >= log_offsets(self._consumer, [where])[where]:
                return self._missing(where, offset)
        return RecordGone(f"not fetched from {topic} partition {partition} within {self._timeout:g} s", lasting=False)

    def records_between(self, topic: str, partition: int, start: int, end: int) -> list[Any]:
        """The committed records of offsets ``start`` to ``end - 1`` still held, read in order: one read for many.

        Records deleted, transaction markers and aborted records leave gaps.
        Never raises: a Kafka error, or ``timeout_seconds`` spent, ends the
        read with the records read so far. They are not kept here: the
        caller asked for all of them at once.
        """
        found: list[Any] = []
        try:
            self._read_between(TopicPartition(topic, partition), start, end, found)
        except KafkaError as error:
            log.warning("reading %s partition %d again from offset %d stopped: %r", topic, partition, start, error)
        return found

    def _read_between(self, where: TopicPartition, start: int, end: int, found: list[Any]) -> None:
        if not self._exists(where.topic) or not self._has_partition(where.topic, where.partition):
            return
        self._consumer.assign([where])
        self._consumer.seek(where, start)
        deadline = time.monotonic() + self._timeout
        while time.monotonic() < deadline:
            records = self._consumer.poll(timeout_ms=_POLL_MS, max_records=end - start).get(where, [])
            found.extend(record for record in records if record.offset < end)
            position = self._consumer.position(where)
            if position >= end or (not records and position >= log_offsets(self._consumer, [where])[where]):
                return

    def _exists(self, topic: str) -> bool:
        """Whether ``topic`` exists, by a listing of every topic (a topic missing from it is listed again).

        A listing, not the metadata of the one topic: asking for a topic by
        name may create it again, with the broker's defaults, on brokers that
        create topics on demand.
        """
        now = time.monotonic()
        if topic not in self._topics or now - self._topics_listed > _TOPICS_FRESH_SECONDS:
            self._topics = set(self._consumer.topics())
            self._topics_listed = now
        return topic in self._topics

    def _has_partition(self, topic: str, partition: int) -> bool:
        """Whether ``topic`` has ``partition``, asking the brokers again before saying no.

        The consumer's metadata is as old as its last listing: a partition
        added to the topic since (``kafka-topics --alter --partitions``) was
        missing from it for up to 10 s, and its records were answered "no
        partition" for good: a judge dead-lettered unique documents read there
        as ``unique_record_gone`` instead of forwarding them.
        """
        if partition in self._consumer.partitions_for_topic(topic):
            return True
        self._topics_listed = float("-inf")  # a listing fetches every topic's metadata, their partitions too
        return self._exists(topic) and partition in self._consumer.partitions_for_topic(topic)

    def _missing(self, where: TopicPartition, offset: int) -> RecordGone:
        """Why no record is at ``offset``: deleted, not written yet, or not a committed record."""
        start = log_offsets(self._consumer, [where], end=False)[where]
        name = f"{where.topic} partition {where.partition}"
        if offset < start:
            return RecordGone(f"deleted by the topic's retention ({name} now starts at offset {start})")
        end = log_offsets(self._consumer, [where])[where]
        if offset >= end:
            return RecordGone(f"{name} has no offset {offset} yet (it ends at offset {end})", lasting=False)
        # Within the log, yet nothing to read there: a compacted topic's cleaner removed it (a later record of
        # its key stays), or the offset holds a transaction's marker or an aborted transaction's record.
        return RecordGone(
            f"no committed record at offset {offset} of {name} (compacted away, or a transaction's marker "
            "or aborted record)"
        )

    def keep(self, records: Sequence[Any]) -> None:
        """Remember ``records`` (consumed elsewhere) as if fetched: fetching one of them then asks nothing of Kafka."""
        for record in records:
            self._cache.put((record.topic, record.partition, record.offset), record)


def _size(record: Any) -> int:
    return len(record.value or b"") + len(record.key or b"")
