"""``stream-dedup watch``: the stage's verdicts as they are committed, for a person or for a pipe.

On a terminal each verdict is one readable line (docs/watch.md); with
``--texts`` a duplicate's text is shown beside its match's, shared passages
highlighted; with ``--summary`` the records read are summed up at the end.
Into a pipe (or with ``--format json``) each record's value is printed as
it is, one per line. It connects like ``run``: same connection settings,
same start-up check, and the stage's own settings (topics, how records are
read) from the same flags, variables and file.

It reads from the beginning of the topic without a consumer group, so it
commits nothing and disturbs no one; it stops after ``--count`` records, or
``--idle-seconds`` without any, or at Ctrl-C (and still prints the summary).
"""

import argparse
import contextlib
import io
import os
import sys
import time
from dataclasses import fields
from typing import Any, TextIO

from kafka import KafkaConsumer

from stream_dedup.cli.flag_types import number, topic_name, whole_number
from stream_dedup.cli.options import add_connection_options, add_setting_flags
from stream_dedup.cli.settings_sources import resolve_settings
from stream_dedup.cli.terminal_text import Style, wants_colour
from stream_dedup.cli.verdict_lines import record_line, texts_lines
from stream_dedup.cli.verdict_texts import VerdictTexts
from stream_dedup.cli.watch_summary import WatchSummary, render_summary
from stream_dedup.cli.watched_records import VerdictRecord, WatchedRecord, watched_record
from stream_dedup.errors import StreamDedupError
from stream_dedup.kafka.broker_check import check_bootstrap_servers
from stream_dedup.kafka.clients import never_creating_topics
from stream_dedup.kafka.record_lookup import RecordLookup
from stream_dedup.worker.settings import WorkerSettings

#: The stage's settings ``watch`` uses besides the connection: where dead letters
#: go, how input records are read (for ``--texts``), where the metrics are.
STAGE_SETTINGS = ("dead_letter_topic", "input_format", "id_field", "text_field", "metrics_host", "metrics_port")


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "watch",
        help="show the verdicts of a topic as they are committed (readable on a terminal, raw JSON in a pipe)",
        description=(
            "Read the committed records of a topic (default: the output_topic setting) from its beginning and "
            "print them: one readable line per verdict on a terminal, each record's value as it is otherwise. "
            "Settings as for run: flags, STREAM_DEDUP_<NAME> variables or the --config file."
        ),
    )
    parser.add_argument("--topic", type=topic_name, help="topic to read (default: the output_topic setting, verdicts)")
    parser.add_argument("--count", type=whole_number(1, 10**12), help="stop after this many records")
    parser.add_argument(
        "--idle-seconds",
        type=number(0.0, 86_400.0),
        default=10.0,
        help="stop after this long without records (default 10)",
    )
    parser.add_argument(
        "--format",
        choices=("auto", "text", "json"),
        default="auto",
        help="text: a readable line per record; json: each record's value as it is; auto (default): text on a "
        "terminal, else json",
    )
    parser.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the text format: auto (default) on a terminal unless NO_COLOR is set or TERM=dumb",
    )
    parser.add_argument(
        "--texts",
        action="store_true",
        help="under each duplicate, its text and its match's, fetched from the input topic (text format)",
    )
    parser.add_argument("--duplicates-only", action="store_true", help="print only duplicate verdicts")
    parser.add_argument(
        "--max-lines", type=whole_number(0, 10**12), help="print at most this many records (the rest are still read)"
    )
    parser.add_argument("--dead-letters", action="store_true", help="read the dead_letter_topic too")
    parser.add_argument(
        "--summary",
        action="store_true",
        help="at the end, sum up what was read: documents, duplicates, dead letters, throughput, latency, "
        "examples (to stderr with --format json)",
    )
    add_connection_options(parser)
    stage = [setting for setting in fields(WorkerSettings) if setting.name in STAGE_SETTINGS]
    add_setting_flags(parser, "the stage's settings watch uses", stage)
    parser.set_defaults(run=watch)


def watch(args: argparse.Namespace) -> int:
    settings = resolve_settings(vars(args), os.environ, args.config)
    as_text = args.format == "text" or (args.format == "auto" and sys.stdout.isatty())
    if args.texts and not as_text:
        print("stream-dedup: --texts shows texts in the text format; add --format text", file=sys.stderr)
        return 2
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):  # a terminal that cannot show a character gets an escape
            stream.reconfigure(errors="backslashreplace")
    connection = settings.connection("stream-dedup-watch")
    # Before any client, as for run: a wrong address or password is one line, exit 3 or 4.
    check_bootstrap_servers(connection)
    topics = [args.topic or settings.output_topic] + ([settings.dead_letter_topic] if args.dead_letters else [])
    summary = WatchSummary()
    with contextlib.ExitStack() as stack:
        texts = None
        if args.texts or args.summary:
            # Batches decompressed as far as the stage's input consumer decompresses them.
            lookup = RecordLookup(settings.connection("stream-dedup-watch-texts"), bound=settings.input_bound())
            stack.enter_context(lookup)
            texts = VerdictTexts(lookup, settings.input_reading())
        printer = _Printer(args, as_text, Style(wants_colour(args.color, sys.stdout, os.environ)), texts)
        _read(args, topics, connection.options(), summary, printer)
        printer.finish()
        if texts is not None and args.summary:
            _print_summary(args, settings, summary, texts, sys.stdout if as_text else sys.stderr)
    return 0


def _print_summary(
    args: argparse.Namespace, settings: WorkerSettings, summary: WatchSummary, texts: VerdictTexts, out: TextIO
) -> None:
    examples = [(verdict, *texts.of(verdict)) for verdict in summary.examples()]
    style = Style(wants_colour(args.color, out, os.environ))
    lines = render_summary(summary, examples, _next_steps(settings), style, args.dead_letters)
    print("\n" + "\n".join(lines), file=out, flush=True)


class _Printer:
    """Prints the records read, as text or JSON, honouring ``--duplicates-only`` and ``--max-lines``."""

    def __init__(self, args: argparse.Namespace, as_text: bool, style: Style, texts: VerdictTexts | None) -> None:
        self._as_text = as_text
        self._style = style
        self._texts = texts if args.texts else None
        self._duplicates_only = args.duplicates_only
        self._max_lines = args.max_lines
        self._printed = 0
        self._held_back = 0

    def show(self, record: Any, watched: WatchedRecord) -> None:
        if self._duplicates_only and not (isinstance(watched, VerdictRecord) and watched.verdict == "duplicate"):
            return
        if self._max_lines is not None and self._printed >= self._max_lines:
            self._held_back += 1
            return
        self._printed += 1
        if not self._as_text:
            # The value as it is (a tombstone has none: JSON null stands for it).
            print("null" if record.value is None else record.value.decode("utf-8", "replace"), flush=True)
            return
        lines = [record_line(watched, self._style)]
        if self._texts is not None and isinstance(watched, VerdictRecord) and watched.duplicate_of is not None:
            lines += texts_lines(*self._texts.of(watched), self._style)
        print("\n".join(lines), flush=True)

    def finish(self) -> None:
        if self._held_back:
            print(f"... and {self._held_back} more, not shown (--max-lines {self._max_lines})", file=sys.stderr)


def _read(
    args: argparse.Namespace, topics: list[str], options: dict[str, Any], summary: WatchSummary, printer: _Printer
) -> None:
    # Never creating topics: a watched output topic deleted under the stage must not come back with the
    # broker's defaults (the stage would not know it was deleted).
    consumer = never_creating_topics(
        KafkaConsumer(
            **options,
            isolation_level="read_committed",  # only records of committed transactions
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
    )
    try:
        _wait_for_topics(consumer, topics, args.idle_seconds)
        consumer.subscribe(topics)
        seen, last = 0, time.monotonic()
        while args.count is None or seen < args.count:
            records = [r for batch in consumer.poll(timeout_ms=500).values() for r in batch]
            if args.count is not None:
                records = records[: args.count - seen]
            for record in records:
                watched = watched_record(record)
                summary.add(watched)
                printer.show(record, watched)
            seen += len(records)
            if records:
                last = time.monotonic()
            elif time.monotonic() - last > args.idle_seconds:
                break
    except KeyboardInterrupt:  # Ctrl-C ends the watch; the summary is still printed
        pass
    finally:
        consumer.close()


def _wait_for_topics(consumer: KafkaConsumer, topics: list[str], seconds: float) -> None:
    """Return once every topic exists; raise if one is still missing after ``seconds``.

    Subscribing to a missing topic would create it with the broker's defaults
    (kafka-python 3.0 asks for subscribed topics by name with auto-creation
    on, whatever ``allow_auto_create_topics`` says), before the worker creates
    it with its own partitions. Listing every topic creates none.
    """
    deadline = time.monotonic() + seconds
    while missing := sorted(set(topics) - consumer.topics()):
        if time.monotonic() > deadline:
            raise StreamDedupError(
                f"topic {', '.join(missing)} does not exist (waited {seconds:g} s): is the worker running, "
                "and are --topic and the output_topic, dead_letter_topic settings the stage's?"
            )
        time.sleep(0.5)


def _next_steps(settings: WorkerSettings) -> list[str]:
    """Where to look next: the worker's status page and metrics (as the settings say), and the docs."""
    docs = "docs/watch.md (this command), docs/verdicts.md (the verdicts), docs/operating.md (metrics, alerts)"
    if settings.metrics_port == 0:
        return ["the worker's metrics are off (metrics_port = 0)", docs]
    host = "127.0.0.1" if settings.metrics_host in ("0.0.0.0", "::") else settings.metrics_host
    base = f"http://{f'[{host}]' if ':' in host else host}:{settings.metrics_port}"
    return [f"status page {base}/", f"metrics {base}/metrics", docs]
