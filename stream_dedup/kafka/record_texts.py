"""Documents' texts by the source pointers the index keeps, read again from the input topic.

The index keeps no text (it would not fit the memory budget), but it keeps
where each document was read: input partition and offset. A pair whose
estimated similarity is too near the threshold to judge
(:mod:`stream_dedup.engine.text_verification`) is settled by the two
documents' texts, so the stage reads those records again, committed ones
only, and reads them as it read them the first time (same JSON field, same
normalisation). The batch being judged is handed over as consumed, so its
own rows cost no fetch; an earlier document usually does once, and the
records after it come with it (:class:`~stream_dedup.kafka.record_lookup.RecordLookup`
keeps them). A record the topic no longer holds leaves its pairs to the
estimate.

The lookup's consumer is made on the first fetch: a stage whose pairs are
never near the threshold, or whose method needs no text, never opens it.
Fetching never fails a batch (the batch would fail again after every
restart): a consumer that cannot be made, a fetch that fails, and the
records still unread when a batch's fetches have taken
:data:`FETCH_SECONDS_PER_BATCH` give no text, and their pairs go to the
estimate, counted as unsettled.
"""

import logging
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from kafka.errors import KafkaError

from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.messages import InputDocument, InputReading, match_coordinates, read_record
from stream_dedup.kafka.record_lookup import DEFAULT_CACHE_BYTES, RecordGone, RecordLookup

log = logging.getLogger(__name__)

#: Longest time one call spends fetching: well within a batch's transaction timeout.
FETCH_SECONDS_PER_BATCH = 10.0


class RecordTexts:
    """Normalised texts of the documents of ``topic``, by source pointer (a ``DocumentTexts``)."""

    def __init__(
        self, connection: KafkaConnection, topic: str, reading: InputReading, cache_bytes: int = DEFAULT_CACHE_BYTES
    ) -> None:
        """``cache_bytes``: records fetched (and those of the batches handed over) kept, the least recently used out."""
        self._connection = connection
        self._cache_bytes = cache_bytes
        self._topic = topic
        self._reading = reading
        self._lookup: RecordLookup | None = None
        self._consumed: list[Any] = []

    def keep(self, records: Sequence[Any]) -> None:
        """The records of the batch being judged, consumed already: their texts need no fetch."""
        if self._lookup is None:
            self._consumed = list(records)
        else:
            self._lookup.keep(records)

    def texts_of(self, sources: npt.NDArray[np.uint64]) -> list[str | None]:
        """The normalised text of each source's record; ``None`` for a record gone or not a document."""
        lookup = self._open()
        if lookup is None:
            return [None] * sources.size
        texts: list[str | None] = []
        deadline = time.monotonic() + FETCH_SECONDS_PER_BATCH
        for source in sources.tolist():
            if time.monotonic() > deadline:
                texts.append(None)
                continue
            partition, offset = match_coordinates(source)
            record = lookup.fetch(self._topic, partition, offset)
            item = None if isinstance(record, RecordGone) else read_record(record, self._reading)
            texts.append(item.text if isinstance(item, InputDocument) else None)
        return texts

    def close(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None

    def _open(self) -> RecordLookup | None:
        """The lookup, made now if need be; ``None`` if it cannot be (tried again next call)."""
        if self._lookup is None:
            try:
                self._lookup = RecordLookup(self._connection, self._cache_bytes)
            except KafkaError as error:
                log.warning("cannot read input records again (%r): pairs near the threshold go to the estimate", error)
                return None
            self._lookup.keep(self._consumed)
            self._consumed = []
        return self._lookup
