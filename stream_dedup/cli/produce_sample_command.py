"""``stream-dedup produce-sample``: the bundled sample corpus, sent to a topic.

The demo, ``docker compose up`` and anyone trying the stage need documents
in without writing a client. It connects like ``run`` (same connection
settings, same start-up check), so it works against a secured cluster too.
"""

import argparse
import itertools
import json
import os
import sys
import time
from collections.abc import Iterator
from importlib import resources
from typing import Any

from kafka import KafkaProducer

from stream_dedup.cli.flag_types import rate, topic_name, whole_number
from stream_dedup.cli.options import add_connection_options
from stream_dedup.cli.settings_sources import resolve_settings
from stream_dedup.kafka.broker_check import check_bootstrap_servers
from stream_dedup.kafka.clients import TopicSpec, ensure_topics

SAMPLE = "listings.jsonl"


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "produce-sample",
        help="send the bundled sample corpus (rental listings with re-posted near-copies) to a topic",
        description=(
            "Send the bundled sample corpus to a topic. The connection settings are run's: flags, "
            "STREAM_DEDUP_<NAME> variables or the --config file."
        ),
    )
    parser.add_argument(
        "--topic", type=topic_name, help="topic to send to (default: the input_topic setting, documents)"
    )
    parser.add_argument(
        "--partitions",
        type=whole_number(1, 10_000),
        default=3,
        help="partitions if the topic must be created (default 3)",
    )
    parser.add_argument(
        "--count",
        type=whole_number(0, 10**9),
        help="documents to send (default: the corpus once; more cycles it; 0 only creates the topic)",
    )
    parser.add_argument(
        "--rate",
        type=rate,
        default=0.0,
        help="documents per second, 0.01 or more (default, 0: as fast as possible)",
    )
    add_connection_options(parser)
    parser.set_defaults(run=produce_sample)


def sample_documents() -> list[dict[str, Any]]:
    text = resources.files("stream_dedup").joinpath("samples", SAMPLE).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def produce_sample(args: argparse.Namespace) -> int:
    settings = resolve_settings(vars(args), os.environ, args.config)
    topic = args.topic or settings.input_topic
    connection = settings.connection("stream-dedup-sample")
    # Before any client, as for run: a wrong address or password is one line, exit 3 or 4.
    check_bootstrap_servers(connection)
    partitions = ensure_topics(connection, [TopicSpec(topic, args.partitions)])[topic]
    documents = sample_documents()
    count = args.count if args.count is not None else len(documents)
    if count == 0:
        print(f"topic {topic} is there ({partitions} partitions)", file=sys.stderr)
        return 0
    producer = KafkaProducer(**connection.options(), linger_ms=5)
    started = time.monotonic()
    for sent, (cycle, document) in enumerate(itertools.islice(_cycled(documents), count)):
        doc_id = document["id"] if cycle == 0 else f"{document['id']}~{cycle}"
        producer.send(topic, key=doc_id.encode(), value=json.dumps({**document, "id": doc_id}).encode())
        if args.rate > 0:
            time.sleep(max(0.0, started + (sent + 1) / args.rate - time.monotonic()))
    producer.flush()
    producer.close()
    print(f"sent {count} documents to {topic}", file=sys.stderr)
    return 0


def _cycled(documents: list[dict[str, Any]]) -> Iterator[tuple[int, dict[str, Any]]]:
    for cycle in itertools.count():
        for document in documents:
            yield cycle, document
