"""``stream-dedup dedup``: verdicts for a JSON-lines file, in input order."""

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, ExitStack
from json.encoder import encode_basestring
from pathlib import Path
from typing import TextIO

import numpy as np

from stream_dedup.cli.dedup_report import DedupReport, read_examples
from stream_dedup.cli.flag_types import field_setting, non_empty_text, whole_number
from stream_dedup.cli.interruption import Interrupted, interruptible
from stream_dedup.cli.options import add_detection_options, config_from
from stream_dedup.cli.output_files import cut_to_whole_lines, open_output, writing
from stream_dedup.cli.output_paths import refuse_clashes, refuse_unwritable
from stream_dedup.cli.progress import Progress
from stream_dedup.cli.records import DEFAULT_MAX_DOCUMENT_BYTES, Record, Reject, input_lines, read_records
from stream_dedup.config import DetectionConfig
from stream_dedup.engine import DuplicateDetector, Verdict, make_detector
from stream_dedup.errors import ConfigError, InputError, OutputError
from stream_dedup.text.spool import TextSpool

#: Documents per detector batch: large enough to amortise numpy calls.
BATCH_SIZE = 4096
#: Bytes of memory of a batch's texts (and rejected lines) as Python holds them, at most but for one record:
#: a batch holds its texts, and 4,096 documents of 1 MB held 4 GB. Counted as memory, not characters: a
#: ``str`` takes 1, 2 or 4 bytes a character (its widest one decides), and 64M characters each with an emoji
#: took 256 MB (a batch of 1 MB lines peaked at 612 MB RSS, against 213 for ASCII ones).
BATCH_TEXT_BYTES = 64 << 20
#: Largest --max-document-bytes, as the stage's max_document_bytes.
MAX_DOCUMENT_BYTES_LIMIT = 100 << 20
#: Rejected lines named on standard error, each on a line of its own; the rejects file has them all.
REJECTS_SHOWN = 10


def add_parser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser(
        "dedup",
        help="mark each record of a JSON-lines file unique or duplicate (or contained / contains)",
        description='Read {"id", "text"} records and write one verdict line per record, in input order.',
    )
    parser.add_argument("input", type=non_empty_text, help="JSON-lines input file, or - for standard input")
    parser.add_argument(
        "--output", "-o", type=non_empty_text, default="-", help="verdicts file (default: standard output)"
    )
    parser.add_argument(
        "--rejects",
        type=non_empty_text,
        help="where malformed lines go (default: OUTPUT.rejects.jsonl, or rejects.jsonl when writing "
        "to standard output); created only if a line is rejected",
    )
    parser.add_argument(
        "--report",
        type=non_empty_text,
        metavar="FILE.html",
        help="also write a self-contained HTML report: counts, a histogram of the duplicates' similarities "
        "and the largest clusters of copies with example texts",
    )
    parser.add_argument(
        "--max-document-bytes",
        type=whole_number(1, MAX_DOCUMENT_BYTES_LIMIT),
        default=DEFAULT_MAX_DOCUMENT_BYTES,
        help=f"longer lines (in UTF-8 bytes) are rejected, not judged (default {DEFAULT_MAX_DOCUMENT_BYTES}, 16 MiB; "
        f"1 to {MAX_DOCUMENT_BYTES_LIMIT}, 100 MiB)",
    )
    parser.add_argument(
        "--id-field",
        type=field_setting,
        default="id",
        help="record field holding the id, or a JSON Pointer such as /meta/id (default: id)",
    )
    parser.add_argument(
        "--text-field",
        type=field_setting,
        default="text",
        help="record field holding the text, or a JSON Pointer such as /payload/body (default: text)",
    )
    add_detection_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = _offline_config(args)
    rejects_path = Path(args.rejects or ("rejects.jsonl" if args.output == "-" else f"{args.output}.rejects.jsonl"))
    written = {"--output": args.output, "--report": args.report, "--rejects": str(rejects_path)}
    files = {flag: path for flag, path in written.items() if path and path != "-"}
    refuse_clashes(args.input, files)
    refuse_unwritable(files)
    try:
        with interruptible():
            return _judge(args, config, rejects_path)
    except OutputError as failure:
        raise _saying_what_it_holds(failure) from failure.error
    except Interrupted as interruption:
        raise interruption.saying(
            f"{'standard output' if args.output == '-' else args.output} holds the verdicts of the lines judged "
            "before it, whole lines in input order (the last one's source says how far); no summary"
            + (f", and {args.report} was not written" if args.report else "")
        ) from None


def _saying_what_it_holds(failure: OutputError) -> OutputError:
    """The failure of a JSON Lines output (verdicts, rejects), its file cut back to whole lines and its count said.

    A full disk left the verdicts' file with a torn last line and the
    message did not say what the file held; the verdicts' lines are in
    input order, so their count says how far the run got.
    """
    if failure.flag not in ("--output", "--rejects") or not Path(failure.path).is_file():
        return failure  # standard output, or a device: nothing to cut
    try:
        lines, cut = cut_to_whole_lines(failure.path)
    except OSError:
        return failure
    held = f"it holds its first {lines:,} lines, whole" + (" (the line the failure cut short removed)" if cut else "")
    return OutputError(failure.flag, failure.path, failure.error, held)


def _judge(args: argparse.Namespace, config: DetectionConfig, rejects_path: Path) -> int:
    """Write the verdicts, the rejects and the report; the summary on standard error."""
    detector = make_detector(config)
    progress = Progress(containment=config.containment_threshold is not None)
    rejected = 0
    with ExitStack() as stack:
        source = input_lines(args.input)
        # Every output path was checked before (refuse_unwritable), the report's without emptying it: an
        # earlier run's verdicts are not lost to a typo, nor its report to a run that does not finish.
        output = "standard output" if args.output == "-" else args.output
        sink = sys.stdout if args.output == "-" else open_output(stack, "--output", args.output)
        report = DedupReport(config) if args.report else None
        rejects_file: TextIO | None = None
        # The texts of pairs too near the threshold for the sketch (see engine.text_verification).
        spool = stack.enter_context(TextSpool()) if config.settles_with_texts else None
        folding = config.shingling().folding
        records = read_records(source, args.id_field, args.text_field, folding, args.max_document_bytes)
        for batch, bad in _batches(records, _batch_documents(config)):
            for reject in bad:
                if rejects_file is None:
                    rejects_file = open_output(stack, "--rejects", str(rejects_path))
                # ASCII escapes keep a line that was not UTF-8 writable, byte for byte.
                with writing("--rejects", str(rejects_path)):
                    rejects_file.write(json.dumps(reject.to_dict()) + "\n")
                _tell_reject(reject, rejected, rejects_path)
                rejected += 1
            if batch:
                ids, texts, lines = [r.id for r in batch], [r.text for r in batch], [r.line for r in batch]
                if spool is not None:
                    with _spooling():
                        spool.add(lines, texts)
                verdicts = detector.process(ids, texts, normalized=True, sources=lines, document_texts=spool)
                if spool is not None:
                    with _spooling():
                        _forget_evicted(spool, detector)
                with writing("--output", output):
                    sink.writelines(map(verdict_line, verdicts, lines))
                if report is not None:
                    report.add(verdicts, lines)
            progress.update(detector.stats)
        with writing("--output", output):
            sink.flush()
        if report is not None:
            page = _report_page(args, report, rejected, progress.elapsed)
            with ExitStack() as report_stack, writing("--report", args.report):
                open_output(report_stack, "--report", args.report).write(page)
    progress.finish(detector.stats, rejected)
    if args.report:
        print(f"report written to {args.report}", file=sys.stderr)
    return 0


def _spooling() -> AbstractContextManager[None]:
    """A failure of the spool of texts named by its directory and the variable that chooses it.

    It is written as the input is read, about the input's size: a full
    ``TMPDIR`` ended the run with "[Errno 28] No space left on device" alone,
    naming no file (the spool's has no name) nor what to change.
    """
    return writing("TMPDIR", tempfile.gettempdir())


def _forget_evicted(spool: TextSpool, detector: DuplicateDetector) -> None:
    """Let ``spool`` drop the texts of the lines retention evicted from the index.

    A pair is one document of the batch and one the index holds, and lines
    enter the index in increasing order, so no later pair asks for a line
    before the oldest one held: without this, the spool kept every line's
    text on disk (and 8 bytes of memory each) whatever ``--max-documents`` said.
    """
    if len(detector):
        oldest = detector.index.sources_of(np.array([detector.index.first_seq], dtype=np.int64))
        spool.forget_before(int(oldest[0]))


def _offline_config(args: argparse.Namespace) -> DetectionConfig:
    """The detection settings, refusing retention by age: JSON lines carry no event time.

    The detector takes a document's time as the clock's when none is given,
    so ``--max-age-seconds`` forgot documents judged that long ago in the run:
    an exact copy 60,000 lines after its original was a duplicate on one
    machine and unique on a slower one (or the same one, busier).
    """
    config = config_from(args)
    if config.max_age_seconds is not None:
        raise ConfigError(
            "max_age_seconds",
            "dedup reads no event times, so documents would be forgotten by how long the run has taken and "
            "verdicts would depend on the machine's speed: retain by count with --max-documents",
        )
    return config


def _tell_reject(reject: Reject, earlier: int, rejects_path: Path) -> None:
    """Name the first :data:`REJECTS_SHOWN` rejected lines on standard error, then say that the rest are not.

    A wrong file (binary, or another format) rejects every line: a line on
    the terminal for each would bury the summary under millions.
    """
    if earlier < REJECTS_SHOWN:
        print(f"line {reject.line}: {reject.reason} (written to {rejects_path})", file=sys.stderr)
    elif earlier == REJECTS_SHOWN:
        print(f"more lines rejected: see {rejects_path} (the summary counts them)", file=sys.stderr)


def _report_page(args: argparse.Namespace, report: DedupReport, rejected: int, seconds: float) -> str:
    """The report, with the example texts read back from the input file (standard input cannot be)."""
    examples = None
    if args.input != "-":
        wanted = {line for cluster in report.largest_clusters() for line in (cluster.original, *cluster.copies)}
        examples = read_examples(input_lines(args.input), wanted, args.id_field, args.text_field)
    return report.render("standard input" if args.input == "-" else args.input, rejected, seconds, examples)


def verdict_line(verdict: Verdict, line: int) -> str:
    """The verdict of the record on input line ``line``, as one JSON line.

    Equal to ``json.dumps(verdict_record(verdict, line), ensure_ascii=False)``
    plus a newline, about 4x faster. One line is written per document, so
    this is on the hot path; only the ids need JSON string quoting, done by
    the json module's C quoting function.
    """
    duplicate_of = "null" if verdict.duplicate_of is None else encode_basestring(verdict.duplicate_of)
    similarity = "null" if verdict.similarity is None else repr(verdict.similarity)
    distance = "null" if verdict.hamming_distance is None else str(verdict.hamming_distance)
    match = "null" if verdict.match_source is None else f'{{"line": {verdict.match_source}}}'
    containment = "" if verdict.containment is None else f', "containment": {verdict.containment!r}'
    return (
        f'{{"format_version": {verdict.format_version}, "id": {encode_basestring(verdict.id)}, '
        f'"verdict": "{verdict.verdict}", "duplicate_of": {duplicate_of}, "similarity": {similarity}, '
        f'"hamming_distance": {distance}{containment}, "source": {{"line": {line}}}, "match_source": {match}}}\n'
    )


def verdict_record(verdict: Verdict, line: int) -> dict[str, object]:
    """The verdict of the record on input line ``line``: its fields, the line, the match's line."""
    match = None if verdict.match_source is None else {"line": verdict.match_source}
    return {**verdict.to_dict(), "source": {"line": line}, "match_source": match}


def _batch_documents(config: DetectionConfig) -> int:
    """Documents per detector batch: :data:`BATCH_SIZE`, or a generation of ``max_documents`` if fewer.

    A batch's rows are judged against every earlier row of the batch, which
    retention cannot forget until the batch is indexed: with 4,096 a batch,
    ``--max-documents 40`` still matched a copy 1,000 lines after its
    original. A batch of a quarter of ``max_documents`` (what a generation
    holds) keeps every match within about ``max_documents``, as the stage does.
    """
    generation = config.retention().generation_documents
    return BATCH_SIZE if generation is None else min(BATCH_SIZE, generation)


def _batches(
    records: Iterator[Record | Reject], documents: int | None = None
) -> Iterator[tuple[list[Record], list[Reject]]]:
    """Group records into detector batches of ``documents`` records (default :data:`BATCH_SIZE`) or
    :data:`BATCH_TEXT_BYTES`; rejects travel with the batch they interrupt.

    Input that cannot be read on (a cut or damaged compressed file) ends the
    run with its error, after the records read before it are judged.
    """
    most = BATCH_SIZE if documents is None else documents
    batch: list[Record] = []
    bad: list[Reject] = []
    held = 0
    unreadable: InputError | None = None
    try:
        for item in records:
            if isinstance(item, Reject):
                bad.append(item)
                held += sys.getsizeof(item.raw)
            else:
                batch.append(item)
                held += sys.getsizeof(item.text)
            if len(batch) >= most or held >= BATCH_TEXT_BYTES:
                yield batch, bad
                batch, bad, held = [], [], 0
    except InputError as error:
        unreadable = error
    if batch or bad:
        yield batch, bad
    if unreadable is not None:
        raise unreadable
