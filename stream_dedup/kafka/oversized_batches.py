"""A fetched record batch that would decompress past what the stage reads: its records dead-lettered, unread.

A producer can write a compressed batch that fits the broker's message limit
(1 MB by default) and decompresses to gigabytes: zeros compress about a
thousand to one in gzip, lz4 and zstd, and snappy states any length up to
4 GiB. kafka-python decompresses a batch whole, so the stage died of memory
on such a batch, and again on the same batch after every restart. Fetched
batches are decompressed within a bound instead
(:mod:`stream_dedup.kafka.bounded_decompression`), and a batch past it is not
read: each of its offsets, ``base_offset`` to ``last_offset`` (both in the
batch's header, outside the compressed part), stands for one record, an
:class:`UnreadRecord` with no key, value or headers. The stage dead-letters
each, reason :data:`BATCH_TOO_LARGE`, in the transaction of the batch it
falls in, as any other record it cannot read: nothing vanishes, and the
stage goes on. The detail names the batch (topic, partition, offsets, codec,
compressed size) and the bound, so the records can be read from the input
topic by hand.

The bound (:meth:`BatchBound.limit`) is what a legitimate batch may need. A
record the stage would judge holds a value of at most ``max_document_bytes``
(a larger one is a dead letter anyway), plus its key, headers and framing
(:data:`RECORD_OVERHEAD_BYTES`), so a batch of n records never needs more than
n times that. n is the record count in the batch's header, which a producer
sets, so the bound is capped too: no batch may take more than
:data:`BATCH_BYTES_CAP` (64 MiB; a single record, more if ``max_document_bytes``
is larger), about 3 times that in memory while its records are cut from it.
For the topics the stage writes itself (changelog, sequenced, answers) the
largest value is the largest record its producer sends
(:data:`LARGEST_RECORD_SENT`); their batches are far below the cap (the
producer closes a batch at 256 KiB, but for one record alone).
"""

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from kafka.consumer.fetcher import ConsumerRecord

from stream_dedup.engine.documents import Refusal
from stream_dedup.kafka.bounded_decompression import CODEC_NAMES

#: The dead-letter reason of a record whose batch was not read.
BATCH_TOO_LARGE = "batch_too_large"
#: A record's bytes besides its value: key, headers, and the varints that frame them.
RECORD_OVERHEAD_BYTES = 64 << 10
#: The most a batch of many records may decompress to (a single record's allowance, when that is more).
BATCH_BYTES_CAP = 64 << 20
#: The largest record the stage's producer sends (its ``max_request_size``): a changelog record, or a
#: document of ``max_document_bytes`` forwarded.
LARGEST_RECORD_SENT = 16 << 20


@dataclass(frozen=True)
class BatchBound:
    """How far a consumer decompresses a batch: ``largest_value`` is the largest record value worth reading."""

    largest_value: int = LARGEST_RECORD_SENT

    def limit(self, records: int) -> int:
        """The most a batch of ``records`` records may decompress to (see the module's docstring)."""
        per_record = self.largest_value + RECORD_OVERHEAD_BYTES
        return min(max(records, 1) * per_record, max(per_record, BATCH_BYTES_CAP))


class UnreadRecord(ConsumerRecord):
    """A record of a batch that was not read: its coordinates and timestamp, no key, value or headers.

    ``refusal`` is why (the dead letter's reason and detail); it is not one of
    ConsumerRecord's fields, so nothing written for consumer records reads it by mistake.
    """

    refusal: Refusal


def unread_records(topic: str, partition: int, epoch: int, batch: Any, limit: int) -> Iterator[UnreadRecord]:
    """Stand-ins for the records of ``batch`` (a v2 batch, read no further than its header), one per offset.

    The timestamp of each is what the batch's header says of its records: the
    first record's (the broker's time for LOG_APPEND_TIME batches).
    """
    base, last = batch.base_offset, batch.last_offset
    refusal = Refusal(
        BATCH_TOO_LARGE,
        f"the record batch of {topic} partition {partition} at offsets {base}..{last} "
        f"({batch._num_records} records, {CODEC_NAMES.get(batch.compression_type, batch.compression_type)}, "
        f"{len(batch._buffer)} bytes) decompresses to more than {limit} bytes, the most a batch of as many "
        "records may hold: not read, each of its offsets dead-lettered",
    )
    log_append_time = batch.timestamp_type == batch.LOG_APPEND_TIME
    timestamp = batch.max_timestamp if log_append_time else batch.first_timestamp
    for offset in range(base, last + 1):
        record = UnreadRecord(
            topic, partition, epoch, offset, timestamp, batch.timestamp_type, None, None, [], None, -1, -1, -1
        )
        record.refusal = refusal
        yield record
