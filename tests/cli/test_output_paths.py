"""``stream-dedup dedup`` refuses to write over its input, two outputs into one file, or where no file can be."""

import errno
import os
import tempfile
from collections.abc import Iterable
from contextlib import ExitStack
from pathlib import Path
from types import SimpleNamespace
from typing import Any, TextIO

import pytest

from stream_dedup.cli import dedup_command
from stream_dedup.cli.main import main
from stream_dedup.text import spool

from .test_dedup_command import jsonl, run_cli, text

CLASHES = {
    "output is the input": (["in.jsonl", "-o", "in.jsonl"], "--output", "in.jsonl is the input"),
    "output is the input by another path": (["in.jsonl", "-o", "../work/in.jsonl"], "--output", "is the input"),
    "output is a link to the input": (["in.jsonl", "-o", "link.jsonl"], "--output", "link.jsonl is the input"),
    "report is the input": (["in.jsonl", "-o", "out.jsonl", "--report", "in.jsonl"], "--report", "is the input"),
    "rejects are the input": (["in.jsonl", "--rejects", "in.jsonl"], "--rejects", "is the input"),
    "rejects are the verdicts": (
        ["in.jsonl", "-o", "out.jsonl", "--rejects", "out.jsonl"],
        "--rejects",
        "out.jsonl is the file of --output",
    ),
    "report is the verdicts, neither made yet": (
        ["in.jsonl", "-o", "new.jsonl", "--report", "./new.jsonl"],
        "--report",
        "is the file of --output",
    ),
    "output is a directory": (["in.jsonl", "-o", "."], "--output", ". is a directory"),
    "output inside a file": (["in.jsonl", "-o", "out.jsonl/v.jsonl"], "--output", "out.jsonl is not a directory"),
    "report in a missing directory": (
        ["in.jsonl", "-o", "new.jsonl", "--report", "missing/r.html"],
        "--report",
        "missing is not a directory",
    ),
    # Rejects are written at the first reject, after verdicts: refused before, naming the flag, not after.
    "rejects in a missing directory": (
        ["in.jsonl", "-o", "new.jsonl", "--rejects", "missing/rejects.jsonl"],
        "--rejects",
        "missing is not a directory",
    ),
}


@pytest.mark.skipif(not Path("/dev/stdin").exists(), reason="/dev/stdin is Linux's")
@pytest.mark.parametrize("flag", ["-o", "--rejects", "--report"])
def test_an_output_that_is_standard_input_is_refused_not_read_back_for_ever(tmp_path: Path, flag: str) -> None:
    """``dedup - -o /dev/stdin`` with a pipe in: the verdicts went into the pipe read, and the run hung."""
    data = jsonl(*({"id": str(i), "text": text(i)} for i in range(5)))
    args = ["-", flag, "/dev/stdin"] + (["-o", "out.jsonl"] if flag != "-o" else [])

    result = run_cli(*args, cwd=tmp_path, stdin=data)

    assert result.returncode == 2, result.stderr
    assert result.stderr.decode().splitlines()[-1] == (
        f"stream-dedup: invalid setting '{'--output' if flag == '-o' else flag}': /dev/stdin is standard input, "
        "the input: the run would read its own verdicts"
    )


@pytest.mark.parametrize("args, flag, says", CLASHES.values(), ids=CLASHES.keys())
def test_a_path_that_would_overwrite_what_is_read_or_written_or_cannot_be_made_is_refused_before_anything_is_touched(
    tmp_path: Path, args: list[str], flag: str, says: str
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    data = jsonl(*({"id": str(i), "text": text(i)} for i in range(50)))
    (work / "in.jsonl").write_bytes(data)
    (work / "link.jsonl").symlink_to(work / "in.jsonl")
    (work / "out.jsonl").write_text("an earlier run's verdicts\n")

    result = run_cli(*args, cwd=work)

    assert result.returncode == 2
    assert f"invalid setting '{flag}'" in result.stderr.decode() and says in result.stderr.decode()
    assert (work / "in.jsonl").read_bytes() == data
    assert (work / "out.jsonl").read_text() == "an earlier run's verdicts\n"
    assert not (work / "new.jsonl").exists()


def test_devices_may_take_every_output(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}))
    result = run_cli("in.jsonl", "-o", "/dev/null", "--report", "/dev/null", cwd=tmp_path)
    assert result.returncode == 0, result.stderr.decode()


UNWRITABLE = {
    # Written only once read: the verdicts at the first batch, the report at the end. Exit 1, as any failure
    # of the system during a run, but named: Python's message named neither the path nor the flag.
    "verdicts to a full device": (["-o", "/dev/full"], "--output", 1, "cannot write /dev/full (--output): "),
    "report to a full device": (["-o", "v.jsonl", "--report", "/dev/full"], "--report", 1, "cannot write /dev/full"),
    "rejects to a full device": (["-o", "v.jsonl", "--rejects", "/dev/full"], "--rejects", 1, "cannot write /dev/full"),
    # A file that cannot be opened for writing (as root, nor appended to) is a setting refused before the run.
    "verdicts to a read-only pseudo-file": (
        ["-o", "/proc/version"],
        "--output",
        2,
        "invalid setting '--output': /proc/version cannot be written: ",
    ),
    "report to a read-only pseudo-file": (
        ["-o", "v.jsonl", "--report", "/proc/version"],
        "--report",
        2,
        "invalid setting '--report': /proc/version cannot be written: ",
    ),
}


@pytest.mark.skipif(not Path("/dev/full").exists() or not Path("/proc/version").exists(), reason="Linux devices")
@pytest.mark.parametrize("args, flag, code, says", UNWRITABLE.values(), ids=UNWRITABLE.keys())
def test_an_output_that_cannot_be_written_is_named_by_its_flag_its_path_and_the_reason(
    tmp_path: Path, args: list[str], flag: str, code: int, says: str
) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}) + b"not json\n")

    result = run_cli("in.jsonl", *args, cwd=tmp_path)

    assert result.returncode == code, result.stderr
    message = result.stderr.decode().splitlines()[-1]
    assert message.startswith(f"stream-dedup: {says}") and flag in message, message
    reason = message.rsplit(": ", 1)[1]
    assert reason and "Errno" not in reason, message
    if code == 1:
        assert reason == "No space left on device", message


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="/dev/full is Linux's")
def test_a_full_temporary_directory_is_named_with_the_variable_that_chooses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The texts kept to settle pairs near the threshold go to ``TMPDIR``; full, it said only "[Errno 28] ..."."""
    (tmp_path / "in.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    # The spool's unnamed file on a device that is always full: ENOSPC from the kernel, as on a full TMPDIR.
    monkeypatch.setattr(spool, "tempfile", SimpleNamespace(TemporaryFile=lambda **_: open("/dev/full", "w+b")))  # noqa: SIM115

    assert main(["dedup", str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl")]) == 1

    assert capsys.readouterr().err == f"stream-dedup: cannot write {tmp_path} (TMPDIR): No space left on device\n"


class FillingFile:
    """A file on a disk with room for ``room`` more characters: the write that does not fit stops part way, ENOSPC."""

    def __init__(self, file: TextIO, room: int) -> None:
        self.file, self.room = file, room

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            if len(line) > self.room:
                self.file.write(line[: self.room])
                self.file.flush()
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            self.file.write(line)
            self.room -= len(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.file, name)


def test_verdicts_cut_short_by_a_full_disk_are_cut_back_to_whole_lines_and_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A full disk tore the last verdict line, and the message did not say what the file held."""
    (tmp_path / "in.jsonl").write_bytes(b"".join(jsonl({"id": f"d{i}", "text": text(i)}) for i in range(10)))
    out = tmp_path / "out.jsonl"
    assert main(["dedup", str(tmp_path / "in.jsonl"), "-o", str(out)]) == 0
    whole = out.read_text().splitlines(keepends=True)
    capsys.readouterr()

    def filling(stack: ExitStack, flag: str, path: str) -> Any:
        return FillingFile(opened(stack, flag, path), len("".join(whole[:3])) + 10)

    opened = dedup_command.open_output
    monkeypatch.setattr(dedup_command, "open_output", filling)

    assert main(["dedup", str(tmp_path / "in.jsonl"), "-o", str(out)]) == 1

    assert out.read_text() == "".join(whole[:3])
    assert capsys.readouterr().err == (
        f"stream-dedup: cannot write {out} (--output): No space left on device; "
        "it holds its first 3 lines, whole (the line the failure cut short removed)\n"
    )
