"""``stream-dedup produce-sample`` and ``stream-dedup watch``: feeding and reading a stage by hand.

The demo, ``docker compose up`` and anyone trying the stage need documents
in and verdicts out without writing a client: these two commands are that.
"""

import argparse
import itertools
import json
import sys
import time
from importlib import resources
from typing import Any

from kafka import KafkaConsumer, KafkaProducer

from stream_dedup.kafka.clients import KafkaConnection, TopicSpec, ensure_topics

SAMPLE = "listings.jsonl"


def add_parsers(subparsers: Any) -> None:
    produce = subparsers.add_parser(
        "produce-sample",
        help="send the bundled sample corpus (rental listings with re-posted near-copies) to a topic",
    )
    produce.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    produce.add_argument("--topic", default="documents")
    produce.add_argument("--partitions", type=int, default=3, help="partitions if the topic must be created")
    produce.add_argument("--count", type=int, help="documents to send (default: the corpus once; more cycles it)")
    produce.add_argument("--rate", type=float, default=0.0, help="documents per second (default: as fast as possible)")
    produce.set_defaults(run=produce_sample)
    watch = subparsers.add_parser("watch", help="print committed records of a topic (verdicts) as they arrive")
    watch.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    watch.add_argument("--topic", default="verdicts")
    watch.add_argument("--count", type=int, help="stop after this many records")
    watch.add_argument("--idle-seconds", type=float, default=10.0, help="stop after this long without records")
    watch.set_defaults(run=watch_topic)


def sample_documents() -> list[dict[str, Any]]:
    text = resources.files("stream_dedup").joinpath("samples", SAMPLE).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def produce_sample(args: argparse.Namespace) -> int:
    connection = KafkaConnection(args.bootstrap_servers, client_id="stream-dedup-sample")
    ensure_topics(connection, [TopicSpec(args.topic, args.partitions)])
    documents = sample_documents()
    count = args.count if args.count is not None else len(documents)
    producer = KafkaProducer(**connection.options(), linger_ms=5)
    started = time.monotonic()
    for sent, (cycle, document) in enumerate(itertools.islice(_cycled(documents), count)):
        doc_id = document["id"] if cycle == 0 else f"{document['id']}~{cycle}"
        producer.send(args.topic, key=doc_id.encode(), value=json.dumps({**document, "id": doc_id}).encode())
        if args.rate > 0:
            time.sleep(max(0.0, started + (sent + 1) / args.rate - time.monotonic()))
    producer.flush()
    producer.close()
    print(f"sent {count} documents to {args.topic}", file=sys.stderr)
    return 0


def _cycled(documents: list[dict[str, Any]]) -> Any:
    for cycle in itertools.count():
        for document in documents:
            yield cycle, document


def watch_topic(args: argparse.Namespace) -> int:
    consumer = KafkaConsumer(
        args.topic,
        **KafkaConnection(args.bootstrap_servers, client_id="stream-dedup-watch").options(),
        isolation_level="read_committed",  # only verdicts of committed transactions
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    seen, last = 0, time.monotonic()
    try:
        while args.count is None or seen < args.count:
            records = [r for batch in consumer.poll(timeout_ms=500).values() for r in batch]
            if args.count is not None:
                records = records[: args.count - seen]
            for record in records:
                print(record.value.decode("utf-8", "replace"), flush=True)
            seen += len(records)
            if records:
                last = time.monotonic()
            elif time.monotonic() - last > args.idle_seconds:
                break
    finally:
        consumer.close()
    return 0
