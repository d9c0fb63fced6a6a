"""Refusing an output path that names the input, or another output, or cannot be made, before anything is opened.

``dedup in.jsonl -o in.jsonl`` would empty the input as it is read (the
verdicts of half of it, the rest lost), and a report or rejects file on the
verdicts file would interleave the two. Paths are the same file when they
are one existing regular file (links and ``..`` included), or would be one
once made.
"""

import os
import stat
from pathlib import Path

from stream_dedup.errors import ConfigError


def refuse_clashes(input_path: str, outputs: dict[str, str]) -> None:
    """Raise :class:`ConfigError` naming the flag of an output that is the input or an earlier output.

    ``outputs``: ``{flag: path}``, in the order the messages should prefer.
    """
    seen: dict[tuple[int, int] | Path | None, str] = {}
    if input_path != "-":
        seen[_identity(input_path)] = "the input"
    standard_input = _standard_input() if input_path == "-" else None
    for flag, path in outputs.items():
        if standard_input is not None and _device_and_inode(path) == standard_input:
            raise ConfigError(flag, f"{path} is standard input, the input: the run would read its own verdicts")
        identity = _identity(path)
        if identity is not None and identity in seen:
            raise ConfigError(flag, f"{path} is {seen[identity]}: writing it would destroy what is read or written")
        seen[identity] = f"the file of {flag}"


def _standard_input() -> tuple[int, int] | None:
    """Standard input's device and inode when it is a file or a pipe, the input of ``dedup -``.

    ``-o /dev/stdin`` with a pipe as standard input wrote the verdicts into
    the pipe the run reads: holding its write end, the run never saw the
    input end and hung. A terminal or ``/dev/null`` is left alone.
    """
    try:
        status = os.fstat(0)
    except OSError:
        return None
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) or stat.S_ISFIFO(status.st_mode) else None


def _device_and_inode(path: str) -> tuple[int, int] | None:
    try:
        status = os.stat(path)
    except OSError:
        return None
    return status.st_dev, status.st_ino


def refuse_unwritable(outputs: dict[str, str]) -> None:
    """Raise :class:`ConfigError` naming the flag of an output that is a directory, in a directory that is
    not one, or that cannot be opened for writing (``/proc/version``, a file or directory without permission).

    Before the run: the rejects file is opened at the first reject, after
    verdicts have been written, and an open that fails names a path, not the
    flag; a report is written at the end, after the whole run.
    """
    for flag, path in outputs.items():
        target = Path(path)
        if target.is_dir():
            raise ConfigError(flag, f"{path} is a directory: give the name of a file")
        if not target.parent.is_dir():
            raise ConfigError(flag, f"{path} cannot be made: {target.parent} is not a directory")
        try:
            _check_writable(path)
        except OSError as error:
            raise ConfigError(flag, f"{path} cannot be written: {error.strerror or error}") from error


def _identity(path: str) -> tuple[int, int] | Path | None:
    """What tells a file from every other: its device and inode if it exists, else its absolute path.

    ``None`` for what is not a regular file (``/dev/null``, a named pipe):
    writing there twice destroys nothing.
    """
    try:
        status = os.stat(path)
    except OSError:
        return Path(path).resolve()
    return (status.st_dev, status.st_ino) if stat.S_ISREG(status.st_mode) else None


def _check_writable(path: str) -> None:
    """Fail now (``OSError``) if ``path`` cannot be written, without emptying it or leaving a file behind.

    Not by opening it for writing: a file written at the end of a run (the
    report, the plot) was emptied there, so a run interrupted or failing on
    the way left an empty file in place of an earlier complete one.
    What is not a regular file (``/dev/null``, a named pipe) is not opened
    twice: a pipe's reader would see the first close as its end.
    """
    try:
        status = os.stat(path)
    except FileNotFoundError:
        status = None
    if status is not None and not stat.S_ISREG(status.st_mode):
        return
    with open(path, "a", encoding="utf-8"):
        pass
    if status is None:
        os.remove(path)
