"""Settings given that the chosen configuration never reads: named once at start-up, with why.

A knob set and seen to do nothing costs hours: ``bands`` with method
simhash, ``containment_bands`` with containment off, ``ssl_cafile`` with
``security_protocol = PLAINTEXT`` (the connection is then not encrypted),
``shard_index`` on a judge. Each row of :data:`_RULES` names settings only
some configurations read, and which; a setting given explicitly (a flag, a
``STREAM_DEDUP_*`` variable or a file key, never a default) that its row says
goes unread is reported, with where it came from. A setting in several rows
is reported by the first whose configuration it misses.

They are warnings, not refusals (exit 2), as librdkafka's configuration
warnings and the Java clients' "supplied but isn't a known config" are:
deployments give one set of variables to every replica and every role
(``deploy/kubernetes/sharded/configmap.yaml``, Compose's ``x-role``), and a
setting that one configuration ignores is harmless to run with. Where an
ignored setting would make the stage do something else than asked, it is
refused where it is checked (``bands`` with containment on, ``shards`` > 1
with role all, exact verification with simhash). For the same reason, among
the roles of a sharded stage a setting any role reads is not reported for
the others (the snapshot settings on a signer): only the settings no role of
it reads, and ``shard_index``, which one pod alone is given, are. The offline
commands (``dedup``, ``params``) name the detection flags given that their
configuration does not read by the same rows.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from stream_dedup.config import CONTAINMENT_ONLY, MINHASH_ONLY, SIMHASH_ONLY, DetectionConfig
from stream_dedup.worker.settings import PASSWORD_MECHANISMS, WorkerSettings

#: Encrypted connections: the only ones that read the ``ssl_*`` settings.
_TLS_PROTOCOLS = ("SSL", "SASL_SSL")


@dataclass(frozen=True)
class _Rule:
    """``settings`` are read only where ``reads`` holds; ``why`` says, where it does not, what they need and
    what the configuration is instead."""

    settings: tuple[str, ...]
    reads: Callable[[WorkerSettings], bool]
    why: Callable[[WorkerSettings], str]


@dataclass(frozen=True)
class UnusedSetting:
    """A setting given explicitly that the configuration does not read."""

    name: str
    #: Where its value came from: ``flag --bands``, ``environment variable STREAM_DEDUP_BANDS``, ``config file ...``.
    origin: str
    why: str

    def __str__(self) -> str:
        return f"{self.name} ({self.origin}) has no effect: {self.why}"


def _no_text_settling(s: WorkerSettings) -> str:
    if s.detection.method == "simhash":
        return "method is simhash, whose distances are exact: no pair is settled by its texts"
    return "verification is exact, which keeps the shingle sets: no pair is settled by its texts"


_RULES = (
    _Rule(
        (*MINHASH_ONLY, "verification"),
        lambda s: s.detection.uses_minhash,
        lambda s: f"read by methods minhash and combined only; method is {s.detection.method}",
    ),
    _Rule(
        SIMHASH_ONLY,
        lambda s: s.detection.uses_simhash,
        lambda s: f"read by methods simhash and combined only; method is {s.detection.method}",
    ),
    _Rule(
        tuple(name for name in CONTAINMENT_ONLY if name != "containment_threshold"),
        lambda s: s.detection.containment_threshold is not None,
        lambda s: "read by the containment search only, which is off (containment_threshold is not set)",
    ),
    _Rule(
        ("min_recall",),
        lambda s: s.detection.bands is None or s.detection.containment_threshold is not None,
        lambda s: "read to choose the banding only; bands and rows_per_band set it",
    ),
    _Rule(
        ("text_cache_mb", "text_spool_mb"),
        lambda s: s.detection.settles_with_texts,
        lambda s: f"read to settle pairs near the threshold by their texts only; {_no_text_settling(s)}",
    ),
    _Rule(
        ("sasl_mechanism", "sasl_username", "sasl_password"),
        lambda s: s.security_protocol.startswith("SASL"),
        lambda s: (
            "read with security_protocol SASL_PLAINTEXT or SASL_SSL only; security_protocol is "
            f"{s.security_protocol}: the connection is not authenticated"
        ),
    ),
    _Rule(
        ("sasl_username", "sasl_password"),
        lambda s: s.sasl_mechanism in PASSWORD_MECHANISMS,
        lambda s: f"read by sasl_mechanism {', '.join(PASSWORD_MECHANISMS)} only; sasl_mechanism is {s.sasl_mechanism}",
    ),
    _Rule(
        ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password"),
        lambda s: s.security_protocol in _TLS_PROTOCOLS,
        lambda s: (
            f"read with security_protocol SSL or SASL_SSL only; security_protocol is {s.security_protocol}: "
            "the connection is not encrypted"
        ),
    ),
    _Rule(
        ("ssl_keyfile", "ssl_password"),
        lambda s: s.ssl_certfile is not None,
        lambda s: "read with ssl_certfile only (its key and the key's password); ssl_certfile is not set",
    ),
    _Rule(
        ("metrics_host",),
        lambda s: s.metrics_port != 0,
        lambda s: "read to serve the status page, metrics and health checks only; metrics_port is 0 (off)",
    ),
    _Rule(
        ("id_field", "text_field"),
        lambda s: s.input_format == "json",
        lambda s: "read with input_format json only; input_format is text (the key is the id, the value the text)",
    ),
    _Rule(
        ("shards", "shard_index", "sequenced_topic", "answers_topic", "parallel_signers"),
        lambda s: s.role != "all",
        lambda s: "read by the roles of a sharded stage (signer, shard, judge) only; role is all (one process)",
    ),
    _Rule(
        ("shard_index",),
        lambda s: s.role == "shard",
        lambda s: f"read by role shard only; role is {s.role}",
    ),
    _Rule(
        ("signing_processes",),
        lambda s: s.role == "all",
        lambda s: f"read by role all only (a sharded stage signs in its signer processes); role is {s.role}",
    ),
    _Rule(
        ("changelog_topic",),
        lambda s: s.role == "all",
        lambda s: f"read by role all only (a sharded stage's changelog is sequenced_topic); role is {s.role}",
    ),
)


def unused_settings(settings: WorkerSettings, origins: Mapping[str, str]) -> list[UnusedSetting]:
    """Each setting of ``origins`` (those given explicitly, with where from) that ``settings`` do not read."""
    unused: dict[str, UnusedSetting] = {}
    for rule in _RULES:
        given = [name for name in rule.settings if name in origins and name not in unused]
        if given and not rule.reads(settings):
            unused |= {name: UnusedSetting(name, origins[name], rule.why(settings)) for name in given}
    return list(unused.values())


def unused_detection_flags(config: DetectionConfig, flags: Iterable[str]) -> list[UnusedSetting]:
    """Each of the detection ``flags`` given to an offline command (by setting name) that ``config`` does not read."""
    origins = {name: f"flag --{name.replace('_', '-')}" for name in flags}
    return unused_settings(WorkerSettings(detection=config), origins)
