"""``stream-dedup run``: the Kafka stage."""

import argparse
import logging
import os
from dataclasses import fields
from typing import Any

from kafka.errors import AuthorizationError

from stream_dedup import __version__
from stream_dedup.cli.options import add_connection_options, add_detection_options, add_setting_flags
from stream_dedup.cli.settings_sources import layered_settings
from stream_dedup.cli.unused_settings import unused_settings
from stream_dedup.errors import BrokersRejectedError
from stream_dedup.kafka.broker_check import check_bootstrap_servers
from stream_dedup.ops.runtime import observed_worker
from stream_dedup.roles.launch import role_runner
from stream_dedup.worker.collector import tune_collector
from stream_dedup.worker.loop import Worker
from stream_dedup.worker.settings import ConnectionSettings, WorkerSettings
from stream_dedup.worker.stop_signals import install_stop_signals

log = logging.getLogger("stream_dedup.run")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the Kafka stage: one verdict per document, exactly once",
        description=(
            "Consume documents from a Kafka topic and publish one verdict per document, exactly once. "
            "Every setting is a flag, a STREAM_DEDUP_<NAME> environment variable or a key of the TOML "
            "file given by --config; flags win over variables, variables over the file."
        ),
    )
    add_connection_options(parser)
    shared = {setting.name for setting in fields(ConnectionSettings)} | {"detection"}
    add_setting_flags(parser, "kafka stage", [s for s in fields(WorkerSettings) if s.name not in shared])
    add_detection_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    tune_collector()
    settings, origins = layered_settings(vars(args), os.environ, args.config)
    unused = {setting.name: str(setting) for setting in unused_settings(settings, origins)}
    with observed_worker(settings, __version__, unused) as events:
        # Made first (no client yet): a snapshot_dir it cannot use is refused even with the brokers down.
        worker = Worker(settings, events) if settings.role == "all" else role_runner(settings, events)
        # Before any client: kafka-python would report a wrong address and a
        # wrong password alike, as "Unable to bootstrap" after 30 s.
        check_bootstrap_servers(settings.connection())
        install_stop_signals(worker)
        try:
            worker.run()
        except AuthorizationError as error:
            # Raised by the topic set-up and by a session alike (a session refused is not restarted:
            # every new one would be refused the same way).
            raise BrokersRejectedError(_refused_access(settings, error)) from error
    return 0


def _refused_access(settings: WorkerSettings, error: AuthorizationError) -> str:
    user = f"sasl_username={settings.sasl_username!r}" if settings.sasl_username else "the anonymous user"
    return (
        f"cannot use Kafka: {settings.bootstrap_servers} refused access ({type(error).__name__}: "
        f"{error.description}{_refused(error)}). Settings: security_protocol={settings.security_protocol}, "
        f"{user}. Grant that user {_needed_acls(settings)}."
    )


def _refused(error: AuthorizationError) -> str:
    """What the brokers refused, as the error says it: kafka-python gives a set of topics, a sentence, or nothing."""
    detail = error.args[0] if error.args else ""
    if isinstance(detail, (set, frozenset, list)):
        detail = f"Read or Write on topic {', '.join(sorted(map(str, detail)))}"
    detail = str(detail).strip()
    return f" Refused: {detail[:300]}" if detail else ""


def _needed_acls(settings: WorkerSettings) -> str:
    """Every ACL the process needs: all of them, whichever was refused (one missing hides the next)."""
    s = settings
    group_and_id = f"Read on group {s.role_group_id} and Write on transactional id {s.transactional_id}"
    if s.role == "all":
        written = ", ".join([s.output_topic, s.dead_letter_topic, *([s.unique_topic] if s.unique_topic else [])])
        return (
            f"Read on topic {s.input_topic}; Write and DescribeConfigs on topic {written}; Read, Write and "
            f"DescribeConfigs on topic {s.changelog_topic}; Create on the cluster (or on those topics) while "
            f"any of them is missing; {group_and_id}"
        )
    # Every role of a sharded stage creates all of its topics (roles.topics): each needs them all.
    topics = [s.input_topic, s.output_topic, s.dead_letter_topic, s.sequenced_topic, s.answers_topic]
    topics += [s.unique_topic] if s.unique_topic else []
    return f"Describe, DescribeConfigs, Read, Write and Create on topic {', '.join(topics)}; {group_and_id}"
