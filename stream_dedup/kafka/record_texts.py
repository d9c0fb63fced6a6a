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
earlier documents its near-copies match. So the value of every record judged
is kept, compressed in blocks of neighbouring offsets
(:mod:`stream_dedup.kafka.value_blocks`), up to the ``text_cache_mb``
budget, the least recently used first out: about 1.5 times as many records
as the records themselves would fill it with. An earlier document no longer
held costs a fetch, a round trip and kafka-python parsing the records before
it in its record batch (about 2 ms in all, on the worker's loop); a held one
costs the decompression of its block (about 20 µs).

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
from stream_dedup.kafka.messages import InputReading, document_text, match_coordinates
from stream_dedup.kafka.record_lookup import DEFAULT_CACHE_BYTES, RecordGone, RecordLookup
from stream_dedup.kafka.value_blocks import ValueBlocks

log = logging.getLogger(__name__)

#: Longest time one call spends fetching: well within a batch's transaction timeout.
FETCH_SECONDS_PER_BATCH = 10.0
#: Of the budget, what the lookup keeps of the records a fetch brings after the one asked for (at most an eighth).
_LOOKUP_BYTES = 1 << 20


class RecordTexts:
    """Normalised texts of the documents of ``topic``, by source pointer (a ``DocumentTexts``)."""

    def __init__(
        self, connection: KafkaConnection, topic: str, reading: InputReading, cache_bytes: int = DEFAULT_CACHE_BYTES
    ) -> None:
        """``cache_bytes``: the memory for record values kept (compressed), the batches' and those fetched."""
        self._connection = connection
        self._topic = topic
        self._reading = reading
        self._lookup: RecordLookup | None = None
        self._lookup_bytes = min(_LOOKUP_BYTES, cache_bytes // 8)
        self._values = ValueBlocks(cache_bytes - self._lookup_bytes)
        #: The values of the batch being judged, as they are: every pair has one document in it.
        self._batch: dict[tuple[int, int], bytes] = {}

    def keep(self, records: Sequence[Any]) -> None:
        """The records of the batch being judged, consumed already: their texts will need no fetch, now or later."""
        self._batch = {(record.partition, record.offset): record.value or b"" for record in records}
        self._values.add((partition, offset, value) for (partition, offset), value in self._batch.items())

    def texts_of(self, sources: npt.NDArray[np.uint64]) -> list[str | None]:
        """The normalised text of each source's record; ``None`` for a record gone or not a document."""
        deadline = time.monotonic() + FETCH_SECONDS_PER_BATCH
        return [document_text(self._value(pointer, deadline), self._reading) for pointer in sources.tolist()]

    def close(self) -> None:
        if self._lookup is not None:
            self._lookup.close()
            self._lookup = None

    def _value(self, pointer: int, deadline: float) -> bytes | None:
        """The value of the record at ``pointer``, kept or fetched; ``None`` if it cannot be had by ``deadline``."""
        partition, offset = match_coordinates(pointer)
        kept = self._batch.get((partition, offset)) or self._values.get(partition, offset)
        if kept is not None:
            return kept
        lookup = self._open() if time.monotonic() <= deadline else None
        if lookup is None:
            return None
        record = lookup.fetch(self._topic, partition, offset)
        if isinstance(record, RecordGone):
            return None
        self._values.add([(partition, offset, record.value or b"")])
        return record.value  # type: ignore[no-any-return]

    def _open(self) -> RecordLookup | None:
        """The lookup, made now if need be; ``None`` if it cannot be (tried again next call)."""
        if self._lookup is None:
            try:
                self._lookup = RecordLookup(self._connection, self._lookup_bytes)
            except KafkaError as error:
                log.warning("cannot read input records again (%r): pairs near the threshold go to the estimate", error)
        return self._lookup
