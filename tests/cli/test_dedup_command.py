"""``stream-dedup dedup``: verdicts in input order, rejects kept, settings checked.

Most tests run the command as a user would (a subprocess in a scratch
directory); the batch-size test calls :func:`main` in-process so that it can
shrink ``BATCH_SIZE``.
"""

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.cli import dedup_command
from stream_dedup.cli.dedup_command import verdict_line, verdict_record
from stream_dedup.cli.main import main
from stream_dedup.cli.records import Record, input_lines, read_records
from stream_dedup.engine import Verdict
from stream_dedup.text import spool as spool_module
from stream_dedup.text.spool import TextSpool
from tests.engine.test_text_verification import best_earlier_jaccard
from tests.engine.test_text_verification import stream as text_stream
from tests.traced_memory import traced

REPO_ROOT = Path(__file__).resolve().parents[2]
VERDICT_FIELDS = [
    "format_version",
    "id",
    "verdict",
    "duplicate_of",
    "similarity",
    "hamming_distance",
    "source",
    "match_source",
]
CORE_FIELDS = ("id", "verdict", "duplicate_of", "similarity")


def _words(seed: int, count: int) -> list[str]:
    """``count`` pseudo-random lower-case words of 8 to 10 letters (no two texts share many)."""
    rng = random.Random(seed)
    return ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(8, 10))) for _ in range(count)]


def text(seed: int, count: int = 60) -> str:
    return " ".join(_words(seed, count))


def near_copy(original: str) -> str:
    """``original`` with one word replaced: Jaccard of character 5-shingles about 0.95."""
    words = original.split()
    words[len(words) // 2] = "replacement"
    return " ".join(words)


def jsonl(*records: dict[str, Any]) -> bytes:
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def run_cli(*args: str, cwd: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "stream_dedup.cli.main", "dedup", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        timeout=60,
    )


def verdict_records(raw: bytes | str) -> list[dict[str, Any]]:
    """Every verdict line, whole."""
    lines = raw.decode() if isinstance(raw, bytes) else raw
    return [json.loads(line) for line in lines.splitlines()]


def verdicts(raw: bytes | str) -> list[dict[str, Any]]:
    """Every verdict line's id, verdict, match and similarity (the sources are checked on their own)."""
    return [{k: v for k, v in record.items() if k in CORE_FIELDS} for record in verdict_records(raw)]


def rejects(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# --- verdicts ---------------------------------------------------------------------------


def test_one_verdict_line_per_record_in_input_order_with_exactly_the_verdict_fields(tmp_path: Path) -> None:
    ids = [f"doc-{i}" for i in range(8)]
    (tmp_path / "in.jsonl").write_bytes(jsonl(*({"id": d, "text": text(i)} for i, d in enumerate(ids))))

    result = run_cli("in.jsonl", "--output", "out.jsonl", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == b""
    lines = verdict_records((tmp_path / "out.jsonl").read_bytes())
    assert [list(v) for v in lines] == [VERDICT_FIELDS] * len(ids)
    assert lines == [
        {
            "format_version": 2,
            "id": d,
            "verdict": "unique",
            "duplicate_of": None,
            "similarity": None,
            "hamming_distance": None,
            "source": {"line": i + 1},
            "match_source": None,
        }
        for i, d in enumerate(ids)
    ]


def test_near_copy_later_in_the_file_is_duplicate_of_the_earlier_record(tmp_path: Path) -> None:
    original = text(1)
    (tmp_path / "in.jsonl").write_bytes(
        jsonl(
            {"id": "original", "text": original},
            {"id": "other", "text": text(2)},
            {"id": "copy", "text": near_copy(original)},
        )
    )

    result = run_cli("in.jsonl", "-o", "out.jsonl", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    first, other, copy = verdicts((tmp_path / "out.jsonl").read_bytes())
    assert first == {"id": "original", "verdict": "unique", "duplicate_of": None, "similarity": None}
    assert other["verdict"] == "unique"
    assert copy["verdict"] == "duplicate"
    assert copy["duplicate_of"] == "original"
    assert 0.85 <= copy["similarity"] < 1.0


def test_exact_copies_of_one_text_all_point_to_the_earliest(tmp_path: Path) -> None:
    repeated = text(7)
    records = []
    for i in range(6):
        records.append({"id": f"copy-{i}", "text": repeated})
        records.append({"id": f"filler-{i}", "text": text(100 + i)})
    (tmp_path / "in.jsonl").write_bytes(jsonl(*records))

    result = run_cli("in.jsonl", "-o", "out.jsonl", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    by_id = {v["id"]: v for v in verdicts((tmp_path / "out.jsonl").read_bytes())}
    assert by_id["copy-0"]["verdict"] == "unique"
    for i in range(1, 6):
        assert by_id[f"copy-{i}"] == {
            "id": f"copy-{i}",
            "verdict": "duplicate",
            "duplicate_of": "copy-0",
            "similarity": 1.0,
        }
    assert all(by_id[f"filler-{i}"]["verdict"] == "unique" for i in range(6))


def test_a_match_names_the_line_it_came_from_even_when_ids_repeat(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(
        jsonl(
            {"id": "a", "text": text(1)},
            {"id": "a", "text": text(2)},
            {"id": "b", "text": text(3)},
            {"id": "c", "text": text(2)},
        )
        + b"not json\n"
        + jsonl({"id": "d", "text": text(1)})
    )

    result = run_cli("in.jsonl", "-o", "out.jsonl", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    records = verdict_records((tmp_path / "out.jsonl").read_bytes())
    assert [(r["id"], r["source"], r["duplicate_of"], r["match_source"]) for r in records] == [
        ("a", {"line": 1}, None, None),
        ("a", {"line": 2}, None, None),
        ("b", {"line": 3}, None, None),
        ("c", {"line": 4}, "a", {"line": 2}),
        ("d", {"line": 6}, "a", {"line": 1}),
    ]
    assert {r["format_version"] for r in records} == {2}


def test_nested_ids_and_texts_are_read_by_json_pointer_and_shown_in_the_report(tmp_path: Path) -> None:
    original = text(21)
    (tmp_path / "in.jsonl").write_bytes(
        jsonl(
            {"meta": {"id": "first"}, "payload": {"body": original}},
            {"meta": {"id": "copy"}, "payload": {"body": near_copy(original)}},
        )
    )
    pointers = ["--id-field", "/meta/id", "--text-field", "/payload/body"]
    result = run_cli("in.jsonl", *pointers, "--report", "report.html", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert [(v["id"], v["verdict"], v["duplicate_of"]) for v in verdicts(result.stdout)] == [
        ("first", "unique", None),
        ("copy", "duplicate", "first"),
    ]
    assert original[:40] in (tmp_path / "report.html").read_text()
    refused = run_cli("in.jsonl", "--text-field", "/payload/~2", cwd=tmp_path)
    assert refused.returncode == 2 and b"--text-field" in refused.stderr and b"JSON Pointer" in refused.stderr


def test_integer_ids_are_accepted_and_written_as_strings(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl({"id": 17, "text": text(1)}, {"id": 18, "text": text(1)}))

    result = run_cli("in.jsonl", "-o", "out.jsonl", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert verdicts((tmp_path / "out.jsonl").read_bytes()) == [
        {"id": "17", "verdict": "unique", "duplicate_of": None, "similarity": None},
        {"id": "18", "verdict": "duplicate", "duplicate_of": "17", "similarity": 1.0},
    ]


def test_a_reader_that_stops_early_ends_the_run_quietly_with_sigpipes_status(tmp_path: Path) -> None:
    """``stream-dedup dedup big.jsonl | head -1``: no traceback or error line, status 141 as a shell gives SIGPIPE."""
    (tmp_path / "in.jsonl").write_bytes(jsonl(*({"id": str(i), "text": text(i)} for i in range(20_000))))
    command = [sys.executable, "-m", "stream_dedup.cli.main", "dedup", "in.jsonl"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as run:
        assert run.stdout is not None and run.stderr is not None
        assert json.loads(run.stdout.readline())["id"] == "0"
        run.stdout.close()
        errors = run.stderr.read().decode()
        assert run.wait(timeout=60) == 141
    assert "Broken pipe" not in errors and "Traceback" not in errors


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_run_stopped_by_a_signal_says_so_and_keeps_an_earlier_report(tmp_path: Path, stop: signal.Signals) -> None:
    """Ctrl-C or a scheduler's SIGTERM mid-run: whole verdict lines so far, a line saying what they are, the
    shell's status for the signal, no traceback, and the earlier report as it was (it was left empty)."""
    bodies = [text(i) for i in range(2_000)]
    (tmp_path / "in.jsonl").write_bytes(jsonl(*({"id": str(i), "text": bodies[i % 2_000]} for i in range(30_000))))
    (tmp_path / "report.html").write_text("<p>an earlier run's report</p>")
    command = [sys.executable, "-m", "stream_dedup.cli.main", "dedup", "in.jsonl", "-o", "out.jsonl"]
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with subprocess.Popen([*command, "--report", "report.html"], cwd=tmp_path, env=env, stderr=subprocess.PIPE) as run:
        assert run.stderr is not None
        deadline = time.monotonic() + 60
        while not ((tmp_path / "out.jsonl").exists() and (tmp_path / "out.jsonl").stat().st_size):
            assert run.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        run.send_signal(stop)
        errors = run.stderr.read().decode()
        assert run.wait(timeout=60) == 128 + stop

    assert "Traceback" not in errors
    assert errors.splitlines()[-1].startswith(f"stream-dedup: interrupted by {stop.name}: out.jsonl holds the verdicts")
    assert (tmp_path / "report.html").read_text() == "<p>an earlier run's report</p>"
    written = verdict_records((tmp_path / "out.jsonl").read_bytes())  # every line whole
    assert 0 < len(written) < 30_000
    assert [v["source"]["line"] for v in written] == list(range(1, len(written) + 1))


def test_reads_standard_input_and_writes_standard_output_by_default(tmp_path: Path) -> None:
    original = text(3)
    stdin = jsonl({"id": "a", "text": original}, {"id": "b", "text": near_copy(original)})

    result = run_cli("-", cwd=tmp_path, stdin=stdin)

    assert result.returncode == 0, result.stderr
    a, b = verdicts(result.stdout)
    assert a == {"id": "a", "verdict": "unique", "duplicate_of": None, "similarity": None}
    assert (b["id"], b["verdict"], b["duplicate_of"]) == ("b", "duplicate", "a")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_output_option_writes_verdicts_to_the_file_and_nothing_to_standard_output(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}))

    result = run_cli("in.jsonl", "--output", "verdicts.jsonl", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert result.stdout == b""
    assert verdicts((tmp_path / "verdicts.jsonl").read_bytes()) == [
        {"id": "a", "verdict": "unique", "duplicate_of": None, "similarity": None}
    ]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "verdicts.jsonl"]


def test_summary_line_on_standard_error_counts_documents_duplicates_and_rejected(tmp_path: Path) -> None:
    original = text(1)
    (tmp_path / "in.jsonl").write_bytes(
        jsonl({"id": "a", "text": original}, {"id": "b", "text": original}, {"id": "c", "text": text(2)})
        + b"not json\n"
        + jsonl({"id": "d", "text": near_copy(original)}, {"text": "no id"})
    )

    result = run_cli("in.jsonl", "-o", "out.jsonl", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    summary = result.stderr.decode().splitlines()[-1]
    assert re.fullmatch(r"4 documents, 2 duplicates \(50\.0%\), .* documents/s, 2 rejected", summary), summary


def test_summary_line_says_one_document_and_one_duplicate_in_the_singular(tmp_path: Path) -> None:
    (tmp_path / "one.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}))
    (tmp_path / "two.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}, {"id": "b", "text": text(1)}))

    one = run_cli("one.jsonl", "-o", "out.jsonl", cwd=tmp_path).stderr.decode().splitlines()[-1]
    two = run_cli("two.jsonl", "-o", "out.jsonl", cwd=tmp_path).stderr.decode().splitlines()[-1]

    assert one.startswith("1 document, 0 duplicates (0.0%), "), one
    assert two.startswith("2 documents, 1 duplicate (50.0%), "), two


# --- malformed lines --------------------------------------------------------------------

MALFORMED = {
    "not JSON": (b'{"id": "x", "text": ', "not valid JSON"),
    "a JSON array": (b'["x", "some text"]', "expected a JSON object, got list"),
    # json's own messages for these end in "at": the column follows it once.
    "a raw control character in a string": (
        b'{"id": "x", "text": "a\x01b"}',
        "not valid JSON: Invalid control character at column 23",
    ),
    "an unterminated string": (
        b'{"id": "x", "text": "abc',
        "not valid JSON: Unterminated string starting at column 21",
    ),
    "a JSON string": (b'"just some text"', "expected a JSON object, got str"),
    # Not an id of the wrong kind: there is none (the stage would take the record key; a line has no key).
    "missing id": (b'{"text": "some text here"}', "field 'id' is missing: every line needs an id"),
    "null id": (b'{"id": null, "text": "some text here"}', "field 'id' is null: every line needs an id"),
    "empty id": (b'{"id": "", "text": "some text here"}', "field 'id' must be a non-empty string or an integer"),
    "boolean id": (b'{"id": true, "text": "some text here"}', "field 'id' must be a non-empty string or an integer"),
    "numeric text": (b'{"id": "x", "text": 42}', "field 'text' must be a string"),
    "null text": (b'{"id": "x", "text": null}', "field 'text' must be a string"),
    "whitespace-only text": (b'{"id": "x", "text": " \\t\\n  "}', "field 'text' is empty after normalisation"),
    "invalid UTF-8 bytes": (b'{"id": "x", "text": "caf\xe9 au lait \xff"}', "not valid UTF-8"),
    "lone surrogate escape in id": (
        b'{"id": "\\ud800", "text": "some text here"}',
        "field 'id' holds an unpaired surrogate escape",
    ),
    "lone surrogate escape in text": (
        b'{"id": "x", "text": "abc \\ud800 def"}',
        "field 'text' holds an unpaired surrogate escape",
    ),
    # json.loads would raise RecursionError: checked before parsing.
    "100,000 nested arrays": (b"[" * 100_000 + b"]" * 100_000, "arrays and objects nested 100000 deep"),
    "nested objects inside a document": (
        b'{"id": "x", "text": "t", "extra": ' + b'{"a": ' * 100 + b"1" + b"}" * 100 + b"}",
        "arrays and objects nested 101 deep",
    ),
    # json.loads raises a plain ValueError past 4,300 digits.
    "an integer of 5,000 digits": (b'{"id": "x", "text": "t", "n": ' + b"9" * 5000 + b"}", "not valid JSON"),
    "an id of 2,000 bytes": (b'{"id": "' + b"x" * 2000 + b'", "text": "t"}', "field 'id' is 2000 bytes long"),
}


@pytest.mark.parametrize("line, reason", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_line_goes_to_rejects_with_its_line_number_and_the_run_continues(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], line: bytes, reason: str
) -> None:
    monkeypatch.chdir(tmp_path)
    good = text(1)
    (tmp_path / "in.jsonl").write_bytes(
        jsonl({"id": "first", "text": good}) + line + b"\n" + jsonl({"id": "third", "text": good})
    )

    code = main(["dedup", "in.jsonl", "-o", "out.jsonl"])

    assert code == 0
    assert verdicts((tmp_path / "out.jsonl").read_bytes()) == [
        {"id": "first", "verdict": "unique", "duplicate_of": None, "similarity": None},
        {"id": "third", "verdict": "duplicate", "duplicate_of": "first", "similarity": 1.0},
    ]
    (reject,) = rejects(tmp_path / "out.jsonl.rejects.jsonl")
    assert reject["line"] == 2
    assert reject["reason"].startswith(reason)
    # The raw line survives byte for byte, undecodable bytes included.
    assert reject["raw"].encode("utf-8", "surrogateescape") == line
    assert f"line 2: {reject['reason']} (written to out.jsonl.rejects.jsonl)" in capsys.readouterr().err


def test_blank_lines_are_skipped_but_still_counted_in_line_numbers(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}) + b"\n   \n" + b"oops\n")

    result = run_cli("in.jsonl", "-o", "out.jsonl", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert [v["id"] for v in verdicts((tmp_path / "out.jsonl").read_bytes())] == ["a"]
    assert [(r["line"], r["raw"]) for r in rejects(tmp_path / "out.jsonl.rejects.jsonl")] == [(4, "oops")]


def test_a_line_of_whitespace_json_does_not_know_is_rejected_not_skipped(tmp_path: Path) -> None:
    """Only spaces, tabs and carriage returns make a line blank; Python's ``str.strip`` took far more."""
    odd = ["\f", "\v", "\x1c", "\u00a0", "\u0085", "\u2028", "\u3000"]
    data = jsonl({"id": "a", "text": text(1)}) + b" \t\r\n" + "\n".join(odd).encode() + b"\n"
    (tmp_path / "in.jsonl").write_bytes(data)

    result = run_cli("in.jsonl", "-o", "out.jsonl", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert [v["id"] for v in verdicts((tmp_path / "out.jsonl").read_bytes())] == ["a"]
    assert [(r["line"], r["raw"]) for r in rejects(tmp_path / "out.jsonl.rejects.jsonl")] == [
        (3 + i, line) for i, line in enumerate(odd)
    ]


@pytest.mark.parametrize("given_as", ["file", "standard input"])
def test_only_a_line_feed_ends_a_line_so_a_carriage_return_inside_a_record_keeps_it_and_the_line_numbers(
    tmp_path: Path, given_as: str
) -> None:
    """A bare CR between JSON tokens is whitespace; CRLF line ends (Windows) read as LF ones."""
    data = (
        b'{"id": "a",\r"text": '
        + json.dumps(text(1)).encode()
        + b"}\r\n"
        + b"oops\r\n"
        + jsonl({"id": "b", "text": text(1)})
        + b"\r\n"
        + b'{"id": "c", "text": '
        + json.dumps(text(2)).encode()
        + b"}"  # the last line needs no end
    )
    (tmp_path / "in.jsonl").write_bytes(data)
    args = (
        ["in.jsonl", "-o", "out.jsonl", "--report", "report.html"] if given_as == "file" else ["-", "-o", "out.jsonl"]
    )

    result = run_cli(*args, cwd=tmp_path, stdin=None if given_as == "file" else data)

    assert result.returncode == 0, result.stderr
    found = verdict_records((tmp_path / "out.jsonl").read_bytes())
    assert [(v["id"], v["verdict"], v["source"]["line"]) for v in found] == [
        ("a", "unique", 1),
        ("b", "duplicate", 3),
        ("c", "unique", 5),
    ]
    assert found[1]["match_source"] == {"line": 1}
    assert [(r["line"], r["raw"]) for r in rejects(tmp_path / "out.jsonl.rejects.jsonl")] == [(2, "oops")]


@pytest.mark.parametrize("given_as", ["file", "standard input"])
def test_a_byte_order_mark_opening_the_input_is_skipped_and_one_inside_it_rejects_its_line(
    tmp_path: Path, given_as: str
) -> None:
    """Notepad and PowerShell start UTF-8 files with a BOM; inside a file one is part of a line, not JSON."""
    bom = "\ufeff".encode()
    data = bom + jsonl({"id": "a", "text": text(1)}) + bom + jsonl({"id": "b", "text": text(1)}) + b"\r\n"
    (tmp_path / "in.jsonl").write_bytes(data)

    if given_as == "file":
        result = run_cli("in.jsonl", "-o", "out.jsonl", cwd=tmp_path)
    else:
        result = run_cli("-", "-o", "out.jsonl", cwd=tmp_path, stdin=data)

    assert result.returncode == 0, result.stderr
    assert [v["id"] for v in verdicts((tmp_path / "out.jsonl").read_bytes())] == ["a"]
    (reject,) = rejects(tmp_path / "out.jsonl.rejects.jsonl")
    assert reject["line"] == 2 and "BOM" in reject["reason"]


def test_rejects_go_to_rejects_jsonl_in_the_working_directory_when_writing_to_standard_output(
    tmp_path: Path,
) -> None:
    stdin = jsonl({"id": "a", "text": text(1)}) + b"[1, 2]\n" + b"{bad\n"

    result = run_cli("-", cwd=tmp_path, stdin=stdin)

    assert result.returncode == 0, result.stderr
    assert [v["id"] for v in verdicts(result.stdout)] == ["a"]
    assert [(r["line"], r["raw"]) for r in rejects(tmp_path / "rejects.jsonl")] == [(2, "[1, 2]"), (3, "{bad")]
    stderr = result.stderr.decode()
    assert "line 2: expected a JSON object, got list (written to rejects.jsonl)" in stderr
    assert "line 3: not valid JSON" in stderr


def test_rejects_option_chooses_the_rejects_file(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(b"nope\n" + jsonl({"id": "a", "text": text(1)}))

    result = run_cli("in.jsonl", "-o", "out.jsonl", "--rejects", "bad-lines.jsonl", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert [(r["line"], r["raw"]) for r in rejects(tmp_path / "bad-lines.jsonl")] == [(1, "nope")]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad-lines.jsonl", "in.jsonl", "out.jsonl"]


@pytest.mark.parametrize("output", ["-", "out.jsonl"], ids=["stdout", "output file"])
def test_no_rejects_file_is_created_when_nothing_is_rejected(tmp_path: Path, output: str) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}, {"id": "b", "text": text(2)}))

    result = run_cli("in.jsonl", "-o", output, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert not (tmp_path / "rejects.jsonl").exists()
    assert not (tmp_path / "out.jsonl.rejects.jsonl").exists()
    assert result.stderr.decode().endswith(", 0 rejected\n")


# --- settings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "flags, setting",
    [
        (["--threshold", "1.5"], "threshold"),
        (["--threshold", "0"], "threshold"),
        (["--num-perm", "3"], "num_perm"),
        (["--bands", "4"], "bands"),
        (["--bands", "16", "--rows-per-band", "9"], "bands"),
        (["--shingle-size", "0"], "shingle_size"),
        (["--max-documents", "0"], "max_documents"),
        # No event times offline: it forgot by the run's wall-clock time, verdicts following the machine's speed.
        (["--max-age-seconds", "3600"], "max_age_seconds"),
    ],
)
def test_bad_setting_exits_with_code_2_and_a_message_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], flags: list[str], setting: str
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("in.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}))

    code = main(["dedup", "in.jsonl", "-o", "out.jsonl", *flags])

    assert code == 2
    assert f"invalid setting '{setting}'" in capsys.readouterr().err
    # Settings are checked before anything is written.
    assert not Path("out.jsonl").exists()


def test_bad_setting_exits_with_code_2_from_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}))

    result = run_cli("in.jsonl", "--threshold", "1.5", cwd=tmp_path)

    assert result.returncode == 2
    assert result.stdout == b""
    assert result.stderr.decode() == (
        "stream-dedup: invalid setting 'threshold': must be strictly between 0 and 1, got 1.5\n"
    )


def test_missing_input_file_exits_with_code_1_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)

    code = main(["dedup", "absent.jsonl", "-o", "out.jsonl"])

    assert code == 1
    assert "absent.jsonl" in capsys.readouterr().err


def test_a_line_longer_than_max_document_bytes_is_rejected_naming_its_size_and_the_flag(tmp_path: Path) -> None:
    long_text = "é" * 300  # 600 bytes of UTF-8 in 300 characters: the limit counts bytes
    line = json.dumps({"id": "b", "text": long_text}, ensure_ascii=False).encode()
    (tmp_path / "in.jsonl").write_bytes(
        jsonl({"id": "a", "text": text(1)}) + line + b"\n" + jsonl({"id": "c", "text": text(1)})
    )
    size = len(line)

    result = run_cli("in.jsonl", "-o", "out.jsonl", "--max-document-bytes", str(size - 1), cwd=tmp_path)

    assert result.returncode == 0
    assert [(v["id"], v["verdict"]) for v in verdicts((tmp_path / "out.jsonl").read_text())] == [
        ("a", "unique"),
        ("c", "duplicate"),
    ]
    (reject,) = verdict_records((tmp_path / "out.jsonl.rejects.jsonl").read_text())
    assert reject["line"] == 2 and json.loads(reject["raw"]) == {"id": "b", "text": long_text}
    assert reject["reason"] == f"line of {size} bytes exceeds --max-document-bytes={size - 1}"
    # At the limit, the line is judged.
    assert run_cli("in.jsonl", "-o", "all.jsonl", "--max-document-bytes", str(size), cwd=tmp_path).returncode == 0
    assert len(verdicts((tmp_path / "all.jsonl").read_text())) == 3


@pytest.mark.parametrize("value", ["0", "104857601", "lots"])
def test_a_max_document_bytes_out_of_range_exits_2_naming_the_flag(tmp_path: Path, value: str) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}))

    result = run_cli("in.jsonl", "-o", "out.jsonl", "--max-document-bytes", value, cwd=tmp_path)

    assert result.returncode == 2
    assert "--max-document-bytes: must be a whole number from 1 to 104857600" in result.stderr.decode()
    assert not (tmp_path / "out.jsonl").exists()


# --- batching and shingling -------------------------------------------------------------


def _mixed_corpus() -> bytes:
    """Near-copies, exact copies and rejects spread so that small batches split them apart."""
    rng = random.Random(5)
    bases = [text(200 + i) for i in range(6)]
    lines = []
    for i in range(40):
        kind = rng.random()
        if kind < 0.1:
            lines.append(b"{broken")
        elif kind < 0.4:
            lines.append(json.dumps({"id": f"d{i}", "text": rng.choice(bases)}).encode())
        elif kind < 0.7:
            lines.append(json.dumps({"id": f"d{i}", "text": near_copy(rng.choice(bases))}).encode())
        else:
            lines.append(json.dumps({"id": f"d{i}", "text": text(300 + i)}).encode())
    return b"\n".join(lines) + b"\n"


def _dedup_in_process(directory: Path) -> tuple[str, str]:
    code = main(["dedup", "in.jsonl", "-o", "out.jsonl"])
    assert code == 0
    outputs = (Path("out.jsonl").read_text(), Path("out.jsonl.rejects.jsonl").read_text())
    for name in ("out.jsonl", "out.jsonl.rejects.jsonl"):
        (directory / name).unlink()
    return outputs


def test_verdicts_and_rejects_do_not_depend_on_the_batch_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("in.jsonl").write_bytes(_mixed_corpus())
    reference = _dedup_in_process(tmp_path)

    for batch_size in (1, 2, 3, 7, 16):
        monkeypatch.setattr(dedup_command, "BATCH_SIZE", batch_size)
        assert _dedup_in_process(tmp_path) == reference, f"BATCH_SIZE={batch_size}"
    monkeypatch.setattr(dedup_command, "BATCH_SIZE", 4096)
    for held in (1, 700, 2000, 5000):
        monkeypatch.setattr(dedup_command, "BATCH_TEXT_BYTES", held)
        assert _dedup_in_process(tmp_path) == reference, f"BATCH_TEXT_BYTES={held}"

    # The corpus really exercises both verdicts and rejects.
    kinds = {v["verdict"] for v in verdicts(reference[0])}
    assert kinds == {"unique", "duplicate"}
    assert len(reference[1].splitlines()) > 0


@pytest.mark.parametrize(("between", "verdict"), [(30, "duplicate"), (200, "unique")])
def test_max_documents_below_the_batch_size_still_forgets_the_documents_it_says(
    tmp_path: Path, between: int, verdict: str
) -> None:
    # One batch of 4,096 used to judge every line against every earlier one, whatever --max-documents said.
    original = text(1)
    filler = [{"id": f"f{i}", "text": text(100 + i)} for i in range(between)]
    (tmp_path / "in.jsonl").write_bytes(
        jsonl({"id": "original", "text": original}, *filler, {"id": "copy", "text": original})
    )

    result = run_cli("in.jsonl", "--max-documents", "40", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert verdicts(result.stdout)[-1]["verdict"] == verdict


def test_a_batch_holds_at_most_batch_text_bytes_of_text_and_rejected_lines_but_one_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(dedup_command, "BATCH_TEXT_BYTES", sys.getsizeof("x" * 1000))
    lines = [json.dumps({"id": str(i), "text": "x" * size}) for i, size in enumerate([400, 500, 2500, 300, 300])]
    lines[3] = "{" + "y" * 600  # a rejected line counts with its batch's texts

    batches = list(dedup_command._batches(read_records(lines)))

    assert [([r.line for r in batch], [r.line for r in bad]) for batch, bad in batches] == [
        ([1, 2, 3], []),
        ([5], [4]),
    ]


def test_a_batch_of_texts_with_an_emoji_holds_a_quarter_of_the_characters(monkeypatch: pytest.MonkeyPatch) -> None:
    # One character past U+FFFF makes a str 4 bytes a character: counted by characters, a batch of such
    # texts held four times the memory of an ASCII one.
    monkeypatch.setattr(dedup_command, "BATCH_TEXT_BYTES", sys.getsizeof("x" * 4000))
    ascii_lines = [json.dumps({"id": str(i), "text": "x" * 299 + "y"}) for i in range(24)]
    emoji_lines = [json.dumps({"id": str(i), "text": "x" * 299 + "\U0001f600"}) for i in range(24)]

    ascii_batches = [len(batch) for batch, _ in dedup_command._batches(read_records(ascii_lines))]
    emoji_batches = [len(batch) for batch, _ in dedup_command._batches(read_records(emoji_lines))]

    assert ascii_batches == [12, 12]
    assert emoji_batches == [4] * 6


def _every_tenth_word_altered(original: str) -> str:
    """One letter changed in every tenth word: most character shingles survive, few word 3-shingles do."""
    words = original.split()
    for i in range(0, len(words), 10):
        words[i] = words[i][:-1] + ("x" if words[i][-1] != "x" else "y")
    return " ".join(words)


@pytest.mark.parametrize(
    "flags, altered_verdict",
    [
        ([], "duplicate"),  # character 5-shingles: Jaccard about 0.9
        (["--shingle-unit", "word", "--shingle-size", "3"], "unique"),  # word 3-shingles: about 0.55
    ],
    ids=["char 5-shingles", "word 3-shingles"],
)
def test_shingle_unit_decides_what_counts_as_a_near_copy(
    tmp_path: Path, flags: list[str], altered_verdict: str
) -> None:
    original = text(11, count=80)
    (tmp_path / "in.jsonl").write_bytes(
        jsonl(
            {"id": "original", "text": original},
            {"id": "one word changed", "text": near_copy(original)},
            {"id": "every tenth word altered", "text": _every_tenth_word_altered(original)},
        )
    )

    result = run_cli("in.jsonl", "-o", "out.jsonl", *flags, cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    first, near, altered = verdicts((tmp_path / "out.jsonl").read_bytes())
    assert first["verdict"] == "unique"
    assert (near["verdict"], near["duplicate_of"]) == ("duplicate", "original")
    assert altered["verdict"] == altered_verdict


@settings(max_examples=100, deadline=None)
@given(
    doc_id=st.text(min_size=1),
    match=st.one_of(st.none(), st.text(min_size=1)),
    similarity=st.floats(0, 1),
    line=st.integers(1, 2**40),
    match_line=st.integers(1, 2**40),
)
def test_verdict_lines_are_exactly_what_json_dumps_writes(
    doc_id: str, match: str | None, similarity: float, line: int, match_line: int
) -> None:
    if match is None:
        verdict = Verdict(doc_id, "unique")
    else:
        verdict = Verdict(doc_id, "duplicate", match, round(similarity, 4), match_line)
    assert verdict_line(verdict, line) == json.dumps(verdict_record(verdict, line), ensure_ascii=False) + "\n"


def test_every_detection_setting_has_a_flag_that_reaches_the_config() -> None:
    from dataclasses import fields

    from stream_dedup.cli.main import build_parser
    from stream_dedup.cli.options import config_from
    from stream_dedup.config import DetectionConfig

    args = build_parser().parse_args(["dedup", "in.jsonl", "--threshold", "0.7", "--verification", "exact"])
    flagged = {f.name for f in fields(DetectionConfig)} & set(vars(args))
    assert flagged == {f.name for f in fields(DetectionConfig)}
    assert config_from(args) == DetectionConfig(threshold=0.7, verification="exact")


@pytest.mark.parametrize("method", ["simhash", "combined"])
def test_the_seed_002_methods_report_the_hamming_distance_of_the_match(tmp_path: Path, method: str) -> None:
    original = text(41, 80)
    records = [
        {"id": "a", "text": original},
        {"id": "b", "text": text(42, 80)},
        {"id": "c", "text": original},
        {"id": "d", "text": near_copy(original)},
    ]
    result = run_cli("-", "--method", method, "--max-hamming", "6", cwd=tmp_path, stdin=jsonl(*records))
    assert result.returncode == 0, result.stderr
    lines = verdict_records(result.stdout)
    assert [(v["verdict"], v["duplicate_of"]) for v in lines[:3]] == [
        ("unique", None),
        ("unique", None),
        ("duplicate", "a"),
    ]
    assert lines[2]["hamming_distance"] == 0 and lines[2]["similarity"] == 1.0
    assert lines[3]["verdict"] == "duplicate" and 0 <= lines[3]["hamming_distance"] <= 6
    assert lines[0]["hamming_distance"] is None


def test_exact_verification_with_simhash_is_refused_naming_the_setting(tmp_path: Path) -> None:
    result = run_cli("-", "--method", "simhash", "--verification", "exact", cwd=tmp_path, stdin=b"")
    assert result.returncode == 2
    assert b"'verification'" in result.stderr


# --- containment ------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    doc_id=st.text(min_size=1),
    match=st.text(min_size=1),
    kind=st.sampled_from(["contained", "contains"]),
    similarity=st.floats(0, 1),
    containment=st.floats(0, 1),
    match_line=st.integers(1, 2**40),
)
def test_containment_verdict_lines_are_exactly_what_json_dumps_writes(
    doc_id: str, match: str, kind: str, similarity: float, containment: float, match_line: int
) -> None:
    verdict = Verdict(doc_id, kind, match, round(similarity, 4), match_line, None, round(containment, 4))  # type: ignore[arg-type]
    assert verdict_line(verdict, 7) == json.dumps(verdict_record(verdict, 7), ensure_ascii=False) + "\n"


def test_containment_verdicts_name_the_match_its_line_and_the_containment(tmp_path: Path) -> None:
    article = text(21, count=120)
    words = article.split()
    excerpt = " ".join(words[:70])
    (tmp_path / "in.jsonl").write_bytes(
        jsonl(
            {"id": "article", "text": article},
            {"id": "excerpt", "text": excerpt},
            {"id": "listing", "text": text(22)},
            {"id": "reposted", "text": text(22) + " " + text(23, count=25)},
            {"id": "other", "text": text(24)},
        )
    )
    result = run_cli("in.jsonl", "-o", "out.jsonl", "--containment-threshold", "0.8", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    records = verdict_records((tmp_path / "out.jsonl").read_bytes())
    excerpt_verdict, reposted, other = records[1], records[3], records[4]
    assert (excerpt_verdict["verdict"], excerpt_verdict["duplicate_of"]) == ("contained", "article")
    assert (reposted["verdict"], reposted["duplicate_of"]) == ("contains", "listing")
    assert excerpt_verdict["match_source"] == {"line": 1} and reposted["match_source"] == {"line": 3}
    assert excerpt_verdict["containment"] >= 0.9 and reposted["containment"] >= 0.9
    assert excerpt_verdict["format_version"] == reposted["format_version"] == 3
    # Records of the other verdicts keep format 2, and no containment field.
    assert other == {**other, "format_version": 2, "verdict": "unique"} and "containment" not in other
    assert list(excerpt_verdict) == [*VERDICT_FIELDS[:6], "containment", *VERDICT_FIELDS[6:]]


def containment_corpus(path: Path) -> None:
    """Every verdict kind: an article, its excerpt (contained), its near copy, a listing reposted with text
    added (contains), an unrelated text; and a malformed line."""
    article = text(31, count=120)
    records = [
        {"id": "article", "text": article},
        {"id": "excerpt", "text": " ".join(article.split()[:70])},
        {"id": "copy", "text": near_copy(article)},
        {"id": "listing", "text": text(32)},
        {"id": "reposted", "text": text(32) + " " + text(33, count=25)},
        {"id": "other", "text": text(34)},
    ]
    path.write_bytes(jsonl(*records) + b"not json\n")


def test_the_summary_counts_every_verdict_kind_written_with_containment_on(tmp_path: Path) -> None:
    containment_corpus(tmp_path / "in.jsonl")

    result = run_cli("in.jsonl", "-o", "out.jsonl", "--containment-threshold", "0.8", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    kinds = Counter(v["verdict"] for v in verdict_records((tmp_path / "out.jsonl").read_bytes()))
    assert kinds == {"unique": 3, "duplicate": 1, "contained": 1, "contains": 1}
    summary = result.stderr.decode().splitlines()[-1]
    # The unique ones are the rest: every line written is in a count.
    assert summary.startswith("6 documents, 1 duplicate (16.7%), 1 contained, 1 contains, "), summary
    assert summary.endswith(", 1 rejected"), summary


def test_a_bad_containment_setting_exits_2_naming_it(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl({"id": "a", "text": "some text"}))
    result = run_cli("in.jsonl", "--containment-threshold", "0.8", "--method", "simhash", cwd=tmp_path)
    assert result.returncode == 2
    assert "containment_threshold" in result.stderr.decode()


def test_pairs_near_the_threshold_get_brute_forces_verdicts_from_a_pipe(tmp_path: Path) -> None:
    # Real prose with graded edits (tests.engine.test_text_verification): the sketch alone errs on it. A
    # malformed line in the middle shifts every later line number, which is what the spool keys texts by.
    ids, texts = text_stream()
    records = [jsonl({"id": i, "text": t}) for i, t in zip(ids, texts, strict=True)]
    stdin = b"".join(records[:600]) + b"{not json\n" + b"".join(records[600:])
    result = run_cli("-", "-o", "out.jsonl", cwd=tmp_path, stdin=stdin)
    assert result.returncode == 0, result.stderr
    flagged = [v["verdict"] == "duplicate" for v in verdict_records((tmp_path / "out.jsonl").read_bytes())]
    assert flagged == (best_earlier_jaccard() >= 0.8).tolist()


class _MeasuredSpool(TextSpool):
    """The command's text spool, noting the numbers and bytes it holds before each batch is added."""

    peaks: ClassVar[list[tuple[int, int]]] = []

    def add(self, numbers: Sequence[int], texts: Sequence[str]) -> None:
        _MeasuredSpool.peaks.append((self.numbers_held, self.disk_bytes))
        super().add(numbers, texts)


def test_under_max_documents_the_text_spool_holds_about_what_retention_does_and_verdicts_are_unchanged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The spool kept every line's text on disk and 8 bytes of memory per line, whatever --max-documents
    # said: a million lines of 1 KB took 1 GB of TMPDIR. Real prose with graded edits, so that pairs
    # near the threshold read texts, and a malformed line that shifts the line numbers.
    ids, texts = text_stream()
    records = [jsonl({"id": i, "text": t}) for i, t in zip(ids, texts, strict=True)]
    (tmp_path / "in.jsonl").write_bytes(b"".join(records[:600]) + b"{not json\n" + b"".join(records[600:]))
    monkeypatch.chdir(tmp_path)
    args = ["dedup", "in.jsonl", "-o", "out.jsonl", "--max-documents", "100"]
    with monkeypatch.context() as unforgetting:
        unforgetting.setattr(dedup_command, "_forget_evicted", lambda spool, detector: None)
        assert main(args) == 0
    remembering = Path("out.jsonl").read_text()
    monkeypatch.setattr(spool_module, "COMPACT_BYTES", 0)
    monkeypatch.setattr(spool_module, "COMPACT_NUMBERS", 1)
    monkeypatch.setattr(dedup_command, "TextSpool", _MeasuredSpool)
    _MeasuredSpool.peaks = []

    assert main(args) == 0

    assert Path("out.jsonl").read_text() == remembering
    assert sum(v["verdict"] == "duplicate" for v in verdict_records(remembering)) > 100
    # Retention holds 100 to 125 documents, a batch 25 more; the forgotten wait until as many as those kept.
    assert max(numbers for numbers, _ in _MeasuredSpool.peaks) <= 2 * (125 + 25) + 1
    longest = max(len(t.encode()) for t in texts)
    assert max(size for _, size in _MeasuredSpool.peaks) <= 2 * (125 + 25) * longest


def test_while_a_long_record_is_judged_the_reader_holds_nothing_of_it_but_its_text(tmp_path: Path) -> None:
    # One emoji makes a Python str 4 bytes a character: the line as read, the line stripped (enumerate's tuple
    # and the loop's name held them) and the text were three such copies while the record waited in its batch.
    text = "a plain sentence of prose. " * 40_000 + "\U0001f600"
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"id": "long", "text": text}, ensure_ascii=False) + "\n" + '{"id": "b", "text": "x"}\n')
    records = read_records(input_lines(str(path)))
    record, held, _ = traced(lambda: next(records))
    assert isinstance(record, Record)
    assert record.text == " ".join(text.split())
    assert held < 1.5 * sys.getsizeof(record.text)  # and the file reader's buffer: no second copy of the text
    assert [r.id for r in records if isinstance(r, Record)] == ["b"]
