"""Writing an output file of an offline command, a failure named by its flag, its path and the reason.

The paths are checked before the run (:mod:`~stream_dedup.cli.output_paths`),
but some fail only once written: ``/dev/full`` or a full disk (ENOSPC), a
pseudo-file that takes no data (EIO), a quota. Python's message for those
names neither the path nor the flag ("[Errno 28] No space left on device"),
so that a run with three outputs left the user to guess which one failed.
"""

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import TracebackType
from typing import TextIO

from stream_dedup.errors import OutputError


@contextmanager
def writing(flag: str, path: str) -> Iterator[None]:
    """Raise :class:`OutputError` for an ``OSError`` of what the block does to the output of ``flag`` at ``path``.

    A broken pipe is left as it is: on standard output it is its reader
    leaving (``| head``), which ends the command quietly (see ``cli.main``).
    """
    try:
        yield
    except BrokenPipeError:
        raise
    except OSError as error:
        raise OutputError(flag, path, error) from error


def open_output(stack: ExitStack, flag: str, path: str) -> TextIO:
    """``path`` opened for writing (emptied), closed by ``stack``; a failure to open, or to close, named.

    Closing writes what is still buffered, so it fails as a write does; it
    is reported only when nothing else is: a run already failing (the same
    file full, Ctrl-C) keeps its own error.
    """
    with writing(flag, path):
        file = open(path, "w", encoding="utf-8")  # noqa: SIM115 (closed by the stack)
    stack.push(_closing(file, flag, path))
    return file


def _closing(
    file: TextIO, flag: str, path: str
) -> Callable[[type[BaseException] | None, BaseException | None, TracebackType | None], bool]:
    def close(_: type[BaseException] | None, failure: BaseException | None, __: TracebackType | None) -> bool:
        try:
            file.close()
        except OSError as error:
            if failure is None:
                raise OutputError(flag, path, error) from error
        return False

    return close


def cut_to_whole_lines(path: str) -> tuple[int, bool]:
    """Cut the JSON Lines file at ``path`` back to its last whole line: how many lines it holds, and if it was cut.

    A full disk stops a write in the middle of a line, and a torn last line
    is one that a reader's JSON parser fails on, or, cut after a digit,
    reads as a verdict that was never given.
    """
    lines, whole_bytes, size = 0, 0, 0
    with Path(path).open("rb+") as file:
        for chunk in iter(lambda: file.read(1 << 20), b""):
            lines += chunk.count(b"\n")
            last = chunk.rfind(b"\n")
            if last >= 0:
                whole_bytes = size + last + 1
            size += len(chunk)
        file.truncate(whole_bytes)
    return lines, whole_bytes < size
