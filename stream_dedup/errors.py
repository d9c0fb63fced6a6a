"""One exception hierarchy for the whole package.

Every message names the offending setting, field or file and says what to do,
so that a user reading a log line can fix the problem without the source.
"""


class StreamDedupError(Exception):
    """Base class of every error this package raises on purpose."""


class ConfigError(StreamDedupError):
    """A setting has a value that cannot work; the message names the setting."""

    def __init__(self, setting: str, message: str) -> None:
        super().__init__(f"invalid setting {setting!r}: {message}")
        self.setting = setting
        self.message = message


class InputError(StreamDedupError):
    """A document cannot be processed (for example its text is empty)."""


class OutputError(StreamDedupError):
    """An output file of an offline command cannot be written (a full disk, a device that takes no data).

    The message names the flag, the path and the system's reason, then what the file holds if that is known
    (``held``); the command exits 1.
    """

    def __init__(self, flag: str, path: str, error: OSError, held: str = "") -> None:
        super().__init__(f"cannot write {path} ({flag}): {error.strerror or error}" + (f"; {held}" if held else ""))
        self.flag = flag
        self.path = path
        self.error = error


class SnapshotError(StreamDedupError):
    """A snapshot file cannot be used."""


class CorruptSnapshotError(SnapshotError):
    """A snapshot file is truncated, has a flipped bit or is not a snapshot at all."""


class IncompatibleSnapshotError(SnapshotError):
    """A snapshot was made with detection parameters other than the running ones.

    Loading it would compare signatures that are not comparable, so it is refused.
    """


class ForeignSnapshotError(SnapshotError):
    """A snapshot is of another part of the index: a shard's where a whole index is wanted, or another shard's.

    Only an optimisation is lost: the store skips it (with a warning naming the
    setting that differs) for an older snapshot or a replay of the log.
    """


class ChangelogError(StreamDedupError):
    """A changelog record cannot be replayed: not one of ours, or made with other signature parameters."""


class LostHistoryError(ChangelogError):
    """The changelog (or a sharded stage's sequenced or answers topic) is gone, but a group's offsets say it held
    batches: it was deleted, while the stage ran or since.

    Going on would judge documents against an index missing every one before
    them, so the process exits (1) until the operator starts over.
    """


class RecreatedInputError(StreamDedupError):
    """The input topic was deleted and created again under its name, while the stage ran or before it started.

    The offsets the stage judged up to, and the partition and offset where its
    index reads each document again, are the deleted topic's: reading on would
    skip the new topic's first records without a verdict. The process exits (1).
    """


class DeletedInputError(StreamDedupError):
    """The input topic is gone, but the stage's history (its changelog, a sharded stage's sequenced topic) holds
    batches judged of it: it was deleted, while the stage ran or since.

    Created again by the stage (as at a first start, one partition), it would
    be a new topic under the old name, that the stage's offsets are not of,
    and producers writing to more partitions would fail. The process exits (1).
    """


class ReplayTimeoutError(ChangelogError):
    """The changelog's replay stopped moving (for 300 s by default): the brokers do not serve it.

    Not a Kafka client error, so it does not restart the session: the process
    exits (1), and whoever restarts it (Kubernetes, systemd) retries the restore.
    """


class KafkaStartupError(StreamDedupError):
    """Kafka cannot be used at start-up; the message names each broker tried, its answer and the settings.

    ``exit_code`` is what ``stream-dedup run`` exits with (see docs/operating.md).
    """

    exit_code = 1


class BrokersUnreachableError(KafkaStartupError):
    """No bootstrap server could be reached (DNS, refused, timed out, no Kafka answer): exit 3.

    The brokers may come back: whoever restarts the process retries.
    """

    exit_code = 3


class BrokersRejectedError(KafkaStartupError):
    """A broker was reached but refused us (TLS, SASL authentication, authorization): exit 4.

    A setting or an ACL must change; retrying as is will fail the same way.
    """

    exit_code = 4


class TopicConfigError(StreamDedupError):
    """A topic the stage writes to is configured so that it cannot work; the message names the topic and setting."""


class UnreadableBatchError(StreamDedupError):
    """Fetched records are compressed with a codec this installation cannot decompress.

    Not one record's fault that a dead letter could hold (the batch cannot be
    opened), nor the brokers' that a new session would cure: the process exits
    (1) with the message, which names the codec and what to install.
    """


class SignerStartError(StreamDedupError):
    """A signer process could not be started, or did not answer its configuration as expected.

    Not a fault of any record, so it is not retried batch after batch: the
    process exits (1) with the message, which says what to do.
    """
