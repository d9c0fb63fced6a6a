"""Documents' texts by the source pointers the index keeps, read again from the input topic.

The index keeps no text (it would not fit the memory budget), but it keeps
where each document was read: input partition and offset. A pair whose
estimated similarity is too near the threshold to judge
(:mod:`stream_dedup.engine.text_verification`) is settled by the two
documents' texts, so the stage reads those records again, committed ones
only, and reads them as it read them the first time (same JSON field, same
normalisation). A record the topic no longer holds leaves its pairs to the
estimate.

What is read again is most often recent: the batch being judged, and the
earlier documents its near-copies match. So the text of every document judged
is kept, compressed in blocks of 16 records read together
(:mod:`stream_dedup.kafka.value_blocks`), up to the ``text_cache_mb``
budget, the least recently used first out: about twice as many records as
their own bytes would fill it with. Those let go are kept on local disk, up
to the ``text_spool_mb`` budget (:mod:`stream_dedup.kafka.block_spool`),
and read from there (tens of µs). An earlier document held in neither
costs a fetch, a round trip and kafka-python parsing the records before
it in its record batch (about 2 ms in all, on the worker's loop); a held one
costs the decompression of its block (about 20 µs).

The worker hands over the texts its signers read (:meth:`RecordTexts.keep_texts`),
compressed in blocks by the signers already (:func:`text_blocks`): they are
kept as they are, and asking for one costs no reading at all, where reading
a kept record again (its JSON, the normalisation) costs about 10 µs of the
worker's process, and compressing it 4 µs more. A record read here (a span, a fetch, or
:meth:`RecordTexts.keep`) is kept as it is and read when its text is first
asked for: most records of a span are never asked for.

A stage that reads its documents from elsewhere (a shard reads signature
records from the sequenced topic) tells which records the batch holds
(:meth:`RecordTexts.expect`): the first text asked for among them brings its
partition's whole span of the batch in one read (a few round trips, where a
fetch per document would cost one each), and keeps it.

The lookup's consumer is made on the first fetch: a stage whose pairs are
never near the threshold, or whose method needs no text, never opens it.
Only a record the topic no longer holds leaves its pairs to the estimate
(counted as unsettled): asking again cannot bring it back. A record that
cannot be read *now* (no broker answers, a fetch fails or times out, or the
batch's reads have taken :data:`FETCH_SECONDS_PER_BATCH`) fails the batch
with a ``KafkaError``, and the stage tries it again in a new session, as for
any broker fault: judging it by the estimate instead would give other
verdicts than an uninterrupted run for the pairs near the threshold. What
was read before the failure is kept, so a batch that needs more reading than
one try allows gets further at each. One record the brokers answer for but
do not give, :data:`TRIES_BEFORE_GONE` tries in a row (minutes, with the
stage's backoff), is taken as gone, with a WARNING: a partition that says it
ends before the record (an input topic deleted and created again under its
name) must not hold the stage forever.
"""

import logging
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import zstandard
from kafka.errors import KafkaError

from stream_dedup.distinct import distinct_sorted
from stream_dedup.kafka.block_spool import BlockSpool
from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.messages import InputReading, coordinates_of, document_text, match_coordinates
from stream_dedup.kafka.oversized_batches import BatchBound
from stream_dedup.kafka.record_lookup import DEFAULT_CACHE_BYTES, FETCH_BYTES, RecordGone, RecordLookup
from stream_dedup.kafka.value_blocks import ValueBlock, ValueBlocks, pack_blocks
from stream_dedup.lsh.generation import NO_SOURCE

log = logging.getLogger(__name__)

#: Longest time one call spends reading texts before its batch fails (to be tried again): well
#: within the group's poll interval (300 s), so a slow batch costs a retry, not the group membership.
FETCH_SECONDS_PER_BATCH = 60.0
#: Tries of its batch after which a record that the brokers answer for but do not give is taken as gone:
#: ten sessions' backoff (1 s doubling to 30 s) is about three minutes.
TRIES_BEFORE_GONE = 10
#: Seconds between two warnings of records that are there but hold no document under this run's reading.
_UNREAD_WARNING_SECONDS = 600.0
#: A partition's span of an expected batch is read at once if it holds at most this many times the
#: batch's documents there, plus _SPAN_EXTRA records (transaction markers, other readers' records);
#: a sparser one is fetched record by record.
_SPAN_SLACK = 2
_SPAN_EXTRA = 64
#: What one fetch of a span asks of its partition: a batch's span of 1 KB documents in one round trip.
_SPAN_FETCH_BYTES = 1 << 20
#: Of the budget, what the lookup keeps of the records a fetch brings after the one asked for (at most an eighth).
_LOOKUP_BYTES = 1 << 20
#: Where a text asked for came from (:meth:`RecordTexts.take_reads`): the batch being judged, the
#: memory (``text_cache_mb``), the disk spool (``text_spool_mb``), Kafka (its span or a fetch), or
#: nowhere (the record gone).
TEXT_SOURCES = ("batch", "memory", "disk", "kafka", "none")
#: Where the texts are kept (:meth:`RecordTexts.kept_bytes`): compressed in memory, and on the disk spool.
TEXT_PLACES = ("memory", "disk")
#: What a kept value starts with: the document's normalised text (UTF-8) follows, or the record's value.
_TEXT = b"t"
_VALUE = b"v"


def text_blocks(
    sources: npt.NDArray[np.uint64], texts: Sequence[bytes], compressor: zstandard.ZstdCompressor
) -> list[ValueBlock]:
    """The normalised texts (UTF-8) of the documents at ``sources`` as :meth:`RecordTexts.keep_texts` keeps them.

    Made where the texts were read (a signer process), so that the process
    that keeps them does not compress them.
    """
    kept = zip(sources.tolist(), texts, strict=True)
    return pack_blocks(((source, _TEXT + text) for source, text in kept if source != NO_SOURCE), compressor)


class RecordTexts:
    """Normalised texts of the documents of ``topic``, by source pointer (a ``DocumentTexts``)."""

    def __init__(
        self,
        connection: KafkaConnection,
        topic: str,
        reading: InputReading,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        spool: BlockSpool | None = None,
        bound: BatchBound | None = None,
    ) -> None:
        """``cache_bytes``: the memory for record values kept (compressed), the batches' and those fetched.

        ``spool``: where the values the memory lets go are kept (and closed with this). ``bound``: how far
        a fetched batch is decompressed: the stage's input consumer's, so that every document it judged
        can be read again (a record of ``max_document_bytes`` above the default's 16 MiB).
        """
        self._bound = bound
        self._connection = connection
        self._topic = topic
        self._reading = reading
        self._lookup: RecordLookup | None = None
        #: Reads spans (see expect()): asks more of a fetch, keeps nothing itself.
        self._span_lookup: RecordLookup | None = None
        self._lookup_bytes = min(_LOOKUP_BYTES, cache_bytes // 8)
        self._spool = spool
        self._values = ValueBlocks(cache_bytes - self._lookup_bytes, spool)
        #: The kept values (see _TEXT) of the batch being judged, uncompressed: every pair has one document in it.
        self._batch: dict[tuple[int, int], bytes] = {}
        #: Partition -> [start, end) offsets of the expected batch not read yet (see expect()).
        self._spans: dict[int, tuple[int, int]] = {}
        self._reads: Counter[str] = Counter()
        #: (partition, offset) -> tries in a row that the record was not given (see TRIES_BEFORE_GONE).
        self._not_given: Counter[tuple[int, int]] = Counter()
        self._unread_warned_at = -_UNREAD_WARNING_SECONDS

    def keep(self, records: Sequence[Any]) -> None:
        """The records of the batch being judged, consumed already: their texts will need no fetch, now or later."""
        self._batch = {(record.partition, record.offset): _VALUE + (record.value or b"") for record in records}
        self._values.add((partition, offset, value) for (partition, offset), value in self._batch.items())

    def keep_texts(self, sources: npt.NDArray[np.uint64], texts: Sequence[bytes], blocks: Iterable[ValueBlock]) -> None:
        """The batch being judged, read already elsewhere: its documents' sources and normalised texts (UTF-8).

        ``blocks`` are the same texts as :func:`text_blocks` packs them, for the memory.
        """
        known = sources != NO_SOURCE
        partitions, offsets = coordinates_of(sources[known])
        kept = (_TEXT + text for text, held in zip(texts, known.tolist(), strict=True) if held)
        self._batch = dict(zip(zip(partitions.tolist(), offsets.tolist(), strict=True), kept, strict=True))
        self._values.add_blocks(blocks)

    def expect(self, sources: npt.NDArray[np.uint64]) -> None:
        """The source pointers of the batch about to be judged, whose records this stage did not read itself.

        Nothing is read now: a batch whose pairs need no text costs nothing.
        A partition's span is read whole only if it is dense (the documents
        of one read of the input, not a few records far apart).
        """
        partitions, offsets = coordinates_of(sources[sources != NO_SOURCE])
        self._spans = {}
        for partition in distinct_sorted(partitions).tolist():
            held = offsets[partitions == partition]
            start, end = int(held.min()), int(held.max()) + 1
            if end - start <= _SPAN_SLACK * held.size + _SPAN_EXTRA:
                self._spans[partition] = (start, end)

    def texts_of(self, sources: npt.NDArray[np.uint64]) -> list[str | None]:
        """The normalised text of each source's record; ``None`` for a record gone or not a document.

        Raises ``KafkaError`` if a record could not be read now (see the module docstring).
        """
        deadline = time.monotonic() + FETCH_SECONDS_PER_BATCH
        return [self._text(pointer, self._value(pointer, deadline)) for pointer in sources.tolist()]

    def close(self) -> None:
        for lookup in (self._lookup, self._span_lookup):
            if lookup is not None:
                lookup.close()
        self._lookup = self._span_lookup = None
        if self._spool is not None:
            self._spool.close()

    def _text(self, pointer: int, kept: bytes | None) -> str | None:
        if kept is None:
            return None
        if kept[:1] == _TEXT:
            return kept[1:].decode("utf-8")
        text = document_text(kept[1:], self._reading)
        if text is None:
            self._warn_unread(pointer)
        return text

    def _warn_unread(self, pointer: int) -> None:
        """Say (every ten minutes at most) that a document indexed earlier is no document under this reading.

        It was read as one when it was judged: its reader read it otherwise
        (a text_field, input_format or max_document_bytes changed since, or a
        shard's that differ from the signers'), and the pairs with it are
        judged by their estimate, where an operator would expect the texts.
        """
        now = time.monotonic()
        if now - self._unread_warned_at < _UNREAD_WARNING_SECONDS:
            return
        self._unread_warned_at = now
        partition, offset = match_coordinates(pointer)
        log.warning(
            "input record %d:%d of %s holds no document under this run's input_format=%s, text_field=%r, "
            "max_document_bytes=%d, though it was judged as one: it was read with other settings (changed since, "
            "or a shard's that differ from its signers'); pairs with such records are judged by their estimate",
            partition,
            offset,
            self._topic,
            self._reading.input_format,
            self._reading.text_field,
            self._reading.max_document_bytes,
        )

    def kept_bytes(self) -> dict[str, int]:
        """Bytes the kept texts take now, by place (:data:`TEXT_PLACES`): memory, and disk (0 without a spool)."""
        return {"memory": self._values.memory_bytes, "disk": self._spool.disk_bytes if self._spool is not None else 0}

    def take_reads(self) -> Counter[str]:
        """The texts asked for since the last call, by where each came from (:data:`TEXT_SOURCES`)."""
        reads, self._reads = self._reads, Counter()
        return reads

    def _value(self, pointer: int, deadline: float) -> bytes | None:
        """What is kept (see _TEXT) of the record at ``pointer``, read in its span or fetched; ``None`` if gone."""
        partition, offset = match_coordinates(pointer)
        kept, source = self._batch.get((partition, offset)), "batch"
        if kept is None:
            kept, source = self._values.get(partition, offset), "memory"
        if kept is None:
            kept, source = self._values.get_spooled(partition, offset), "disk"
        if kept is None:
            _within(deadline, partition, offset)
            kept, source = self._read_span(partition, offset), "kafka"
        if kept is None:
            _within(deadline, partition, offset)  # reading the span may have taken until the deadline
            kept = self._fetch(partition, offset)
        self._reads[source if kept is not None else "none"] += 1
        return kept

    def _read_span(self, partition: int, offset: int) -> bytes | None:
        """The value at ``offset`` if it lies in the expected batch's span of ``partition``, which is read and kept."""
        start, end = self._spans.get(partition, (0, 0))
        if not start <= offset < end:
            return None
        del self._spans[partition]  # read once, whatever it brings
        self._span_lookup = self._span_lookup or self._opened(0, _SPAN_FETCH_BYTES)
        span = self._span_lookup.records_between(self._topic, partition, start, end)
        read = {record.offset: _VALUE + (record.value or b"") for record in span}
        self._values.add((partition, at, value) for at, value in read.items())
        # From what was read, not the cache: a span larger than the cache's memory is partly on disk already.
        return read.get(offset)

    def _fetch(self, partition: int, offset: int) -> bytes | None:
        """What is kept of the record at ``offset``, fetched alone (and kept); ``None`` if the record is gone."""
        self._lookup = self._lookup or self._opened(self._lookup_bytes, FETCH_BYTES)
        record = self._lookup.fetch(self._topic, partition, offset)
        if isinstance(record, RecordGone):
            self._take_as_gone(partition, offset, record)
            return None
        self._not_given.pop((partition, offset), None)
        kept = _VALUE + (record.value or b"")
        self._values.add([(partition, offset, kept)])
        return kept

    def _take_as_gone(self, partition: int, offset: int, answer: RecordGone) -> None:
        """Return if the record counts as gone (its pairs get no text); raise ``KafkaError`` if it was only not
        given now, until that has happened :data:`TRIES_BEFORE_GONE` times in a row."""
        if answer.lasting:
            self._not_given.pop((partition, offset), None)
            return
        self._not_given[(partition, offset)] += 1
        tries = self._not_given[(partition, offset)]
        if tries < TRIES_BEFORE_GONE:
            raise KafkaError(f"input record {partition}:{offset} not read again to settle a pair: {answer.why}")
        del self._not_given[(partition, offset)]
        log.warning(
            "input record %d:%d not given in %d tries (%s): taken as gone, its pairs go to the estimate",
            partition,
            offset,
            tries,
            answer.why,
        )

    def _opened(self, cache_bytes: int, fetch_bytes: int) -> RecordLookup:
        """A lookup; raises ``KafkaError``, naming what it was for, if no broker answers."""
        try:
            return RecordLookup(self._connection, cache_bytes, fetch_bytes=fetch_bytes, bound=self._bound)
        except KafkaError as error:
            why = f"cannot read input records again to settle pairs near the threshold: {error!r}"
            raise KafkaError(why) from error


def _within(deadline: float, partition: int, offset: int) -> None:
    """Raise ``KafkaError`` once ``deadline`` (monotonic) has passed, before reading the record at ``offset``."""
    if time.monotonic() > deadline:
        raise KafkaError(
            f"input record {partition}:{offset} not read again: the batch's reads took over "
            f"{FETCH_SECONDS_PER_BATCH:g} s (what was read is kept for the next try)"
        )
