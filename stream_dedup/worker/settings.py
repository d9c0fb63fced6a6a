"""Settings of the Kafka stage: one frozen object, validated once at start-up.

Every error names the setting as the flag (``--batch-size``), the environment
variable (``STREAM_DEDUP_BATCH_SIZE``) and the config file key (``batch_size``)
spell it, minus punctuation. How the three sources are layered is the CLI's
business (:mod:`stream_dedup.cli.settings_sources`).
"""

import re
import socket
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from stream_dedup.bounds import check_number, check_whole_number
from stream_dedup.config import DetectionConfig
from stream_dedup.engine.documents import is_utf8
from stream_dedup.engine.field_paths import check_field_setting
from stream_dedup.errors import ConfigError
from stream_dedup.kafka.block_spool import BlockSpool
from stream_dedup.kafka.bounded_commit import WrittenTopics
from stream_dedup.kafka.broker_check import server_address
from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.messages import InputFormat, InputReading
from stream_dedup.kafka.oversized_batches import BatchBound
from stream_dedup.kafka.record_texts import RecordTexts
from stream_dedup.lsh.retention import MAX_DOCUMENTS
from stream_dedup.worker.cores import default_signing_processes

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
LogFormat = Literal["auto", "json", "text"]
#: The SASL mechanisms kafka-python can use with these settings: OAUTHBEARER, which it knows too, needs a token
#: provider object that no flag, variable or file key can give.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "AWS_MSK_IAM")
#: The mechanisms that send sasl_username and sasl_password (kafka-python refuses them without both).
PASSWORD_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
#: What a process runs: the whole stage, or one role of a sharded stage (``docs/scale-out.md``).
StageRole = Literal["all", "signer", "shard", "judge"]
_KAFKA_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")
#: Names Kafka refuses although they match :data:`_KAFKA_NAME`.
_RESERVED_KAFKA_NAMES = (".", "..")
#: What a Kafka name may be, as messages say it.
KAFKA_NAME_RULE = "1 to 249 letters, digits, '.', '_', '-'; not '.' or '..'"
_TOPIC_SETTINGS = (
    "input_topic",
    "output_topic",
    "dead_letter_topic",
    "changelog_topic",
    "unique_topic",
    "sequenced_topic",
    "answers_topic",
)
#: More signers than this cannot help one worker (its own share of a batch bounds the rate).
_MAX_SIGNING_PROCESSES = 64
#: The whole-number settings' ranges (lowest, highest, why), checked at start-up: past them a value
#: fails later, far from its cause (a broker refusing a config, an overflow in a timer).
_WHOLE_NUMBER_RANGES: dict[str, tuple[int, int, str]] = {
    "max_document_bytes": (1, 100 << 20, "100 MiB"),
    "max_id_bytes": (1, 65_536, "64 KiB"),
    "batch_size": (1, 100_000, ""),
    "batch_timeout_ms": (0, 10_000, "10 s"),
    "max_partition_idle_ms": (0, 600_000, "10 minutes"),
    "max_partition_buffered_bytes": (1, 1 << 30, "1 GiB"),
    "text_cache_mb": (1, 65_536, "64 GiB"),
    "text_spool_mb": (0, 65_536, "0: none; 65536: 64 GiB"),
    "signing_processes": (0, _MAX_SIGNING_PROCESSES, "0: sign in the worker's process"),
    "snapshot_every_documents": (1, MAX_DOCUMENTS, ""),
    "snapshots_kept": (1, 100, ""),
    "metrics_port": (0, 65_535, "a port number; 0 turns the server off"),
}
#: The other numeric settings' ranges, in seconds; the timeouts' are the brokers' defaults, which refuse more.
_NUMBER_RANGES: dict[str, tuple[float, float, str]] = {
    "transaction_timeout_seconds": (
        1,
        900,
        "the brokers' default transaction.max.timeout.ms is 900000; beyond it they refuse the producer",
    ),
    "session_timeout_seconds": (
        6,
        1800,
        "the brokers' defaults group.min.session.timeout.ms=6000 and group.max.session.timeout.ms=1800000",
    ),
    "snapshot_interval_seconds": (1, 7 * 24 * 3600, "a week"),
    "shutdown_grace_seconds": (1, 3600, "an hour"),
}
_T = TypeVar("_T")


def default_instance_id() -> str:
    """The host name made safe for Kafka ids (in Kubernetes: the pod name)."""
    return re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:249] or "stream-dedup"


def is_kafka_name(name: str) -> bool:
    """Whether Kafka takes ``name`` for a topic, group or transactional id (the whole of it: a trailing
    newline must not pass, as it would with ``re.match`` and ``$``)."""
    return _KAFKA_NAME.fullmatch(name) is not None and name not in _RESERVED_KAFKA_NAMES


def _check_kafka_name(setting: str, name: str, made_from: str = "") -> None:
    """Refuse a topic, group or instance name Kafka would refuse (``made_from`` says how ``setting`` led to it)."""
    if is_kafka_name(name):
        return
    shown = f"{name!r}, {made_from}," if made_from else repr(name)
    raise ConfigError(setting, f"{shown} is not a valid Kafka name ({KAFKA_NAME_RULE})")


def _setting(default: _T, help: str, secret: bool = False) -> _T:
    """A dataclass field with its help text (shown by `stream-dedup run --help`), typed as its default."""
    return field(default=default, metadata={"help": help}, repr=not secret)


def _computed_setting(compute: Callable[[], _T], help: str) -> _T:
    """A setting whose default is computed when the settings are built (``help`` says how)."""
    return field(default_factory=compute, metadata={"help": help})


@dataclass(frozen=True)
class ConnectionSettings:
    """How a command reaches and authenticates to the brokers.

    One definition for every command that talks to Kafka: ``run`` (whose
    :class:`WorkerSettings` extends this), ``watch`` and ``produce-sample``
    take these settings from the same flags, variables and file keys, so a
    secured cluster works with all of them.
    """

    bootstrap_servers: str = _setting("127.0.0.1:9092", "Kafka brokers, comma-separated host:port")
    security_protocol: SecurityProtocol = _setting("PLAINTEXT", "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL")
    sasl_mechanism: str | None = _setting(None, ", ".join(SASL_MECHANISMS))
    sasl_username: str | None = _setting(None, "SASL user name")
    sasl_password: str | None = _setting(None, "SASL password (prefer the environment variable)", secret=True)
    ssl_cafile: str | None = _setting(None, "CA bundle to verify the brokers")
    ssl_certfile: str | None = _setting(None, "client certificate (mutual TLS)")
    ssl_keyfile: str | None = _setting(None, "client private key (mutual TLS)")
    ssl_password: str | None = _setting(None, "password of the client key", secret=True)

    def __post_init__(self) -> None:
        if not self.bootstrap_servers.strip():
            raise ConfigError("bootstrap_servers", "must name at least one host:port")
        for server in KafkaConnection(self.bootstrap_servers).servers():
            server_address(server)  # at start-up, not when the servers are tried one after another
        protocols = typing.get_args(SecurityProtocol)
        if self.security_protocol not in protocols:
            raise ConfigError(
                "security_protocol", f"must be one of {', '.join(protocols)}; got {self.security_protocol!r}"
            )
        if self.security_protocol.startswith("SASL"):
            self._check_sasl()

    def _check_sasl(self) -> None:
        """Refuse what kafka-python refuses only in the handshake, where the start-up check read its
        refusal as the brokers': "SASL mechanism not enabled" (exit 4) for a missing password."""
        if not self.sasl_mechanism:
            raise ConfigError("sasl_mechanism", f"is required with security_protocol={self.security_protocol}")
        if self.sasl_mechanism not in SASL_MECHANISMS:
            raise ConfigError(
                "sasl_mechanism",
                f"must be one of {', '.join(SASL_MECHANISMS)} (as written); got {self.sasl_mechanism!r}",
            )
        for name in ("sasl_username", "sasl_password"):
            value = getattr(self, name)
            if self.sasl_mechanism in PASSWORD_MECHANISMS and not value:
                raise ConfigError(name, f"is required with sasl_mechanism={self.sasl_mechanism}")
            if value and not is_utf8(value):
                raise ConfigError(name, "is not UTF-8 text: a byte of another encoding in the environment?")

    def connection(self, client_id: str | None = None) -> KafkaConnection:
        """The clients' options; ``client_id`` names the command in the brokers' logs and quotas."""
        return KafkaConnection(
            bootstrap_servers=self.bootstrap_servers,
            security_protocol=self.security_protocol,
            sasl_mechanism=self.sasl_mechanism,
            sasl_plain_username=self.sasl_username,
            sasl_plain_password=self.sasl_password,
            ssl_cafile=self.ssl_cafile,
            ssl_certfile=self.ssl_certfile,
            ssl_keyfile=self.ssl_keyfile,
            ssl_password=self.ssl_password,
            client_id=client_id or "stream-dedup",
        )


@dataclass(frozen=True)
class WorkerSettings(ConnectionSettings):
    """Everything ``stream-dedup run`` needs: the connection, the detection settings and the stage's own."""

    detection: DetectionConfig = field(default_factory=DetectionConfig)
    input_topic: str = _setting("documents", "topic the documents are read from")
    output_topic: str = _setting("verdicts", "topic one verdict per document is published to")
    dead_letter_topic: str = _setting(
        "dead-letters", "topic unprocessable records go to, unchanged, with reason headers"
    )
    #: Empty until ``__post_init__`` fills in the default, which depends on ``group_id``.
    changelog_topic: str = _setting("", "the index's changelog (default GROUP_ID.changelog; created if missing)")
    unique_topic: str | None = _setting(None, "if set, the original record of every unique document is forwarded here")
    group_id: str = _setting("stream-dedup", "consumer group; replicas in one group are one active plus standbys")
    instance_id: str = _computed_setting(
        default_instance_id, "this replica's name: group instance id and transactional id (default: host name)"
    )
    input_format: InputFormat = _setting(
        "json", "json (an object per record) or text (the value is the text, the key the id)"
    )
    id_field: str = _setting(
        "id",
        "JSON field holding the document id, or a JSON Pointer such as /meta/id (else the key, else "
        "topic:partition:offset)",
    )
    text_field: str = _setting("text", "JSON field holding the text, or a JSON Pointer such as /payload/body")
    max_document_bytes: int = _setting(1 << 20, "larger record values go to the dead-letter topic")
    max_id_bytes: int = _setting(1024, "longer document ids (field or key) send the record to the dead-letter topic")
    batch_size: int = _setting(1000, "records per batch (and per transaction)")
    batch_timeout_ms: int = _setting(100, "longest wait for a batch to fill")
    max_partition_idle_ms: int = _setting(
        2000, "longest wait for a lagging input partition before judging the others past it (event-time order)"
    )
    max_partition_buffered_records: int | None = _setting(
        None,
        "records of one input partition fetched and not yet judged, at most; more are fetched again later "
        "(default: 2 x batch_size, at least 1000)",
    )
    max_partition_buffered_bytes: int = _setting(
        32 << 20,
        "bytes of record keys and values of one input partition fetched and not yet judged, at most "
        "(past its first record); more are fetched again later",
    )
    text_cache_mb: int = _setting(
        32,
        "memory for input records read again to settle pairs near the threshold by their texts; "
        "the least recently used go first",
    )
    text_spool_mb: int = _setting(
        1024,
        "local disk (in snapshot_dir, freed when the process ends) for the input records text_cache_mb lets go, "
        "read from there instead of fetched again; 0: none",
    )
    signing_processes: int = _computed_setting(
        default_signing_processes,
        "processes that read and sign the next batch while this one is judged and committed "
        "(default: the cores available minus one, at most 4; 0: sign in the worker's process)",
    )
    transaction_timeout_seconds: float = _setting(
        15.0, "broker aborts a transaction left open this long by a dead worker"
    )
    session_timeout_seconds: float = _setting(
        10.0, "a replica silent this long is out of the group (standby takes over)"
    )
    snapshot_dir: str = _setting("snapshots", "directory of the local index snapshots")
    snapshot_interval_seconds: float = _setting(300.0, "seconds between snapshots")
    snapshot_every_documents: int = _setting(
        250_000, "also snapshot after this many new documents: bounds the changelog a restart replays"
    )
    snapshots_kept: int = _setting(2, "snapshots kept on disk (older ones are deleted)")
    shutdown_grace_seconds: float = _setting(
        30.0, "on SIGTERM: finish the batch, snapshot, leave the group within this"
    )
    metrics_host: str = _setting(
        "127.0.0.1", "address of the status page /, /metrics, /healthz, /readyz (0.0.0.0 in a container)"
    )
    metrics_port: int = _setting(9400, "port of the status page /, /metrics, /healthz, /readyz (0: off)")
    log_level: str = _setting("INFO", "DEBUG, INFO, WARNING or ERROR")
    role: StageRole = _setting(
        "all", "all (one process, the default), or one role of a sharded stage: signer, shard or judge"
    )
    shards: int = _setting(1, "sharded stage: number of shards (must divide index_slots)")
    shard_index: int = _setting(0, "role shard: which shard this process is, 0 to shards - 1")
    parallel_signers: bool = _setting(
        False,
        "sharded stage: the signers share the input's partitions, for more signing throughput, and sequence a "
        "backlog in the order they work through it; off, one signs every partition in event-time order (as "
        "one process judges) while the others stand by",
    )
    #: Empty until ``__post_init__`` fills in the defaults, which depend on ``group_id``.
    sequenced_topic: str = _setting(
        "", "sharded stage: the one-partition log of signed batches (default GROUP_ID.sequenced)"
    )
    answers_topic: str = _setting("", "sharded stage: the shards' answers, a partition each (default GROUP_ID.answers)")
    log_format: LogFormat = _setting("auto", "json, text, or auto (text on a terminal, else json)")

    def __post_init__(self) -> None:
        super().__post_init__()
        defaulted = [
            f"{name}_topic" for name in ("changelog", "sequenced", "answers") if not getattr(self, f"{name}_topic")
        ]
        for topic in defaulted:
            object.__setattr__(self, topic, f"{self.group_id}.{topic.removesuffix('_topic')}")
        self._check_names(defaulted)
        self._check_numbers()
        self._check_choices()
        self._check_roles()
        self._check_blank_text()

    def _check_names(self, defaulted: list[str]) -> None:
        """Check the names Kafka will see; a topic ``defaulted`` from ``group_id`` is reported as ``group_id``."""
        _check_kafka_name("group_id", self.group_id)
        _check_kafka_name("instance_id", self.instance_id)
        for name in _TOPIC_SETTINGS:
            topic = getattr(self, name)
            if name in defaulted:
                _check_kafka_name("group_id", topic, f"the default {name} made from it")
            elif topic is not None:
                _check_kafka_name(name, topic)
        written: dict[str, str] = {}  # topic -> the first setting naming it
        for name in ("output_topic", "dead_letter_topic", "changelog_topic", "unique_topic"):
            topic = getattr(self, name)
            if topic == self.input_topic:
                raise ConfigError(
                    name, f"must differ from input_topic ({topic!r}): the stage would read its own output"
                )
            if topic in written:
                raise ConfigError(
                    name,
                    f"must differ from {written[topic]} ({topic!r}): output, dead-letter, changelog and unique "
                    "topics must all differ",
                )
            if topic is not None:
                written[topic] = name
        check_field_setting("id_field", self.id_field)
        check_field_setting("text_field", self.text_field)

    def _check_numbers(self) -> None:
        for name, whole_range in _WHOLE_NUMBER_RANGES.items():
            check_whole_number(name, getattr(self, name), *whole_range)
        for name, number_range in _NUMBER_RANGES.items():
            check_number(name, getattr(self, name), *number_range)
        if self.max_partition_buffered_records is not None:
            check_whole_number(
                "max_partition_buffered_records",
                self.max_partition_buffered_records,
                1,
                10_000_000,
                "unset: 2 x batch_size, at least 1000",
            )
        if self.batch_timeout_ms >= self.shutdown_grace_seconds * 1000:
            raise ConfigError(
                "batch_timeout_ms",
                f"must be less than shutdown_grace_seconds x 1000 = {self.shutdown_grace_seconds * 1000:g}, "
                f"got {self.batch_timeout_ms}: a stop waits for the batch to fill",
            )

    def _check_choices(self) -> None:
        choices: dict[str, tuple[str, ...]] = {
            "input_format": ("json", "text"),
            "log_format": ("auto", "json", "text"),
            "role": typing.get_args(StageRole),
            "log_level": ("DEBUG", "INFO", "WARNING", "ERROR"),
        }
        for name, allowed in choices.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(name, f"must be one of {', '.join(allowed)}; got {getattr(self, name)!r}")

    def _check_blank_text(self) -> None:
        """Refuse text settings left blank that something below would read as a choice the user never made."""
        if not self.metrics_host.strip():
            # The socket would read it as every interface, exposing the status page unasked.
            raise ConfigError(
                "metrics_host",
                "must not be empty: write 0.0.0.0 or :: to serve on every interface, 127.0.0.1 for this machine only",
            )
        if not self.snapshot_dir.strip():
            # A path of "" is the working directory: snapshots and the text spool would land wherever it started.
            raise ConfigError("snapshot_dir", "must not be empty: name a directory (. for the working directory)")

    def _check_roles(self) -> None:
        if self.shards < 1:
            raise ConfigError("shards", f"must be at least 1, got {self.shards}")
        if self.role == "all" and self.shards != 1:
            # Checked before the index_slots rule below, which would send the user to the wrong setting.
            raise ConfigError(
                "shards",
                f"is {self.shards}, but role all runs the whole index in one process and would ignore it: "
                "set shards to 1, or role to signer, shard or judge for a sharded stage (docs/scale-out.md)",
            )
        if not 0 <= self.shard_index < self.shards:
            raise ConfigError(
                "shard_index", f"must be from 0 to shards - 1 = {self.shards - 1}, got {self.shard_index}"
            )
        if self.detection.index_slots % self.shards:
            raise ConfigError(
                "shards",
                f"{self.shards} shards must divide index_slots={self.detection.index_slots} (the hot-bucket cap is "
                "counted per slot, each living on one shard): set index_slots to a multiple of every shard count "
                "you may run, such as 12 or 60, when the index is first built",
            )
        if self.role == "all":
            return
        topics = {
            "input_topic": self.input_topic,
            "output_topic": self.output_topic,
            "dead_letter_topic": self.dead_letter_topic,
            "unique_topic": self.unique_topic,
        }
        for name, topic in topics.items():
            if topic in (self.sequenced_topic, self.answers_topic):
                raise ConfigError(name, f"must differ from sequenced_topic and answers_topic ({topic!r})")
        if self.sequenced_topic == self.answers_topic:
            raise ConfigError("answers_topic", "must differ from sequenced_topic")

    @property
    def text_cache_bytes(self) -> int:
        """``text_cache_mb`` in bytes, as the record lookup counts them."""
        return self.text_cache_mb << 20

    @property
    def batch_records(self) -> int:
        """Records judged in one batch (and, by a signer, signed in one sequenced batch): ``batch_size``, but at
        most a generation of ``max_documents`` (a quarter of it).

        A batch's rows are judged against each other and its generation takes
        it whole, so with 1,000 records a batch and ``max_documents = 40`` the
        stage matched copies 200 documents after their originals, and held
        1,000 documents, where retention promises at most a quarter more than
        ``max_documents``. A smaller batch costs a transaction per generation.
        """
        generation = self.detection.retention().generation_documents
        return self.batch_size if generation is None else min(self.batch_size, generation)

    @property
    def batch_span_ms(self) -> int | None:
        """Most event time (record timestamps, ms) a batch spans: a quarter of ``max_age_seconds``; ``None``: no limit.

        A batch's rows are judged against each other whatever their times: a
        backlog of five minutes in one batch matched a copy with its original
        300 s before under ``max_age_seconds = 60``.
        """
        span = self.detection.retention().generation_seconds
        return None if span is None else int(span * 1000)

    @property
    def partition_buffer_limit(self) -> int:
        """Records an input partition may hold fetched and not yet judged (event-time order).

        Two batches' worth by default (at least 1,000): enough that one
        partition alone can fill a batch with the next one already fetched.
        """
        if self.max_partition_buffered_records is not None:
            return self.max_partition_buffered_records
        return max(1000, 2 * self.batch_size)

    @property
    def role_group_id(self) -> str:
        """The consumer group of this process's role: one per role, one per shard."""
        return self.group_of(self.role, self.shard_index)

    def group_of(self, role: StageRole, shard_index: int = 0) -> str:
        """The consumer group of ``role`` (of shard ``shard_index``) in this stage."""
        if role == "all":
            return self.group_id
        if role == "shard":
            return f"{self.group_id}.shard-{shard_index}"
        return f"{self.group_id}.{role}s" if role == "signer" else f"{self.group_id}.{role}"

    def topic_settings(self) -> dict[str, str]:
        """Each topic of the stage, with the setting that names it (for messages)."""
        return {getattr(self, name): name for name in _TOPIC_SETTINGS if getattr(self, name)}

    def written_topics(self, topics: list[str]) -> WrittenTopics:
        """``topics``, written in this replica's transactions, as its commits watch them (kafka.bounded_commit)."""
        names = self.topic_settings()
        # Past the transaction timeout the broker aborts the transaction itself; 30 s more for a slow answer.
        timeout = self.transaction_timeout_seconds + 30
        return WrittenTopics(self.connection(), {topic: names[topic] for topic in topics}, timeout)

    @property
    def transactional_id(self) -> str:
        """Stable per replica (and role), so a restarted replica fences its former self and aborts its transaction."""
        return f"{self.role_group_id}-{self.instance_id}"

    def connection(self, client_id: str | None = None) -> KafkaConnection:
        """The stage's clients are named after the replica (``stream-dedup-INSTANCE_ID``)."""
        return super().connection(client_id or f"stream-dedup-{self.instance_id}")

    def record_texts(self, spool_directory: str) -> RecordTexts | None:
        """What reads input records again for the pairs settled by text (spooling to ``spool_directory``).

        ``None`` if the detection method settles no pair by text.
        """
        if not self.detection.settles_with_texts:
            return None
        spool = BlockSpool(spool_directory, self.text_spool_mb << 20) if self.text_spool_mb else None
        connection, topic, reading = self.connection(), self.input_topic, self.input_reading()
        return RecordTexts(connection, topic, reading, self.text_cache_bytes, spool, self.input_bound())

    def input_bound(self) -> BatchBound:
        """How far a batch of the input topic is decompressed: n records of ``max_document_bytes``, at most."""
        return BatchBound(self.max_document_bytes)

    def input_reading(self) -> InputReading:
        return InputReading(
            input_format=self.input_format,
            id_field=self.id_field,
            text_field=self.text_field,
            max_document_bytes=self.max_document_bytes,
            strip_punctuation=self.detection.strip_punctuation,
            ignore_invisible=self.detection.ignore_invisible,
            fold_lookalikes=self.detection.fold_lookalikes,
            max_id_bytes=self.max_id_bytes,
        )
