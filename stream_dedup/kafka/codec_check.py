"""A record batch compressed with a codec this installation cannot read: the same batch at every retry.

kafka-python decompresses fetched batches itself and raises
``UnsupportedCodecError`` when the library of a batch's codec is missing
(lz4 and snappy are optional extras of kafka-python) or the codec is one it
does not know. No record of such a batch can be read, so none can be
dead-lettered, and a new session fetches the same batch again: before this
check the stage restarted its session for ever, publishing nothing, with only
"Kafka error, restarting the session" in its log.
"""

from kafka.errors import KafkaError, UnsupportedCodecError

from stream_dedup.errors import UnreadableBatchError

#: What pip installs for every codec a Kafka producer may use (stream-dedup's own dependency).
CODEC_EXTRAS = "kafka-python[crc32c,lz4,snappy,zstd]"


def raise_if_codec_missing(error: KafkaError) -> None:
    """Raise the :class:`UnreadableBatchError` that ``error`` stands for if it is a batch we cannot decompress."""
    if isinstance(error, UnsupportedCodecError):
        raise UnreadableBatchError(
            f"a fetched record batch cannot be decompressed ({error}): a producer compressed it with a codec "
            f"this installation cannot read. Install stream-dedup with its dependencies ({CODEC_EXTRAS}) and "
            "start it again; nothing after the last committed batch was judged"
        ) from error
