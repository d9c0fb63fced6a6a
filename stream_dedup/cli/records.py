"""Reading ``{"id": ..., "text": ...}`` JSON lines, rejecting bad ones one by one.

A malformed line never aborts a run and never vanishes: it becomes a
:class:`Reject` with its line number and reason, written to the rejects file.
"""

import io
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import cast

from stream_dedup.cli.compressed_input import READ_ERRORS, decompressed, unreadable
from stream_dedup.engine.documents import Refusal, read_json_document
from stream_dedup.engine.field_paths import find_field
from stream_dedup.text.normalize import DEFAULT_FOLDING, Folding

#: Largest record judged, in UTF-8 bytes of its line (``--max-document-bytes``): a longer line is rejected.
#: Signing costs a few bytes of memory a character whatever the length, but the line, its parsed and its
#: normalised text are each held whole, at 1 to 4 bytes a character (a str's widest character decides): a
#: 16 MiB line peaked at 132 MB RSS in all (ASCII), 326 MB with one emoji in it.
DEFAULT_MAX_DOCUMENT_BYTES = 16 << 20
#: How input files are decoded: UTF-8, a byte order mark at the very start of the file skipped (Notepad and
#: PowerShell write one); anywhere else it is part of its line, which is then not JSON (RFC 8259 forbids it).
INPUT_ENCODING = "utf-8-sig"
#: What a blank line holds, as JSON counts whitespace (the line feed ends it). Not ``str.strip``'s: a line of
#: a form feed, a no-break space or U+2028 is no JSON, and was skipped without a word instead of rejected.
_JSON_WHITESPACE = " \t\r"


def input_lines(path: str) -> Iterator[str]:
    """Lines of the input file at ``path`` (``-``: standard input), ended by ``\\n`` alone.

    The input is opened now, so that one that cannot be fails before
    anything is written; it is read as it is iterated, and decompressed if
    it is compressed (:mod:`~stream_dedup.cli.compressed_input`). A carriage
    return is not a line end: inside a record it is JSON whitespace, and
    splitting there would reject a good record as two bad lines and shift
    every later line number from the one ``wc -l`` and an editor give. Bytes
    that are not UTF-8 become lone surrogates, rejected later.
    """
    raw = sys.stdin.buffer if path == "-" else open(path, "rb")  # noqa: SIM115 (_lines closes it)
    try:
        binary = decompressed(cast(io.BufferedReader, raw))
    except BaseException:
        raw.close()
        raise
    text = io.TextIOWrapper(binary, encoding=INPUT_ENCODING, errors="surrogateescape", newline="\n")
    return _lines(text, "standard input" if path == "-" else path)


def _lines(text: io.TextIOWrapper, name: str) -> Iterator[str]:
    read = 0

    def counted(line: str) -> str:
        nonlocal read
        read += 1
        return line

    # Delegated, not ``for line in text: yield line``: that kept each line in this frame while its record was
    # judged, a copy of the longest document beside its parsed and normalised text.
    try:
        yield from map(counted, text)
    except READ_ERRORS as error:
        raise unreadable(name, read, error) from error
    finally:
        if name != "standard input":
            text.close()


@dataclass(frozen=True)
class Record:
    """A usable input document; ``text`` is already normalised."""

    line: int
    id: str
    text: str


@dataclass(frozen=True)
class Reject:
    """An input line that cannot be processed, and why."""

    line: int
    reason: str
    raw: str

    def to_dict(self) -> dict[str, object]:
        return {"line": self.line, "reason": self.reason, "raw": self.raw}


def read_records(
    lines: Iterable[str],
    id_field: str = "id",
    text_field: str = "text",
    folding: Folding = DEFAULT_FOLDING,
    max_document_bytes: int = DEFAULT_MAX_DOCUMENT_BYTES,
) -> Iterator[Record | Reject]:
    """Parse JSON lines (numbered from 1); blank lines (JSON whitespace only) are skipped, longer ones than
    ``max_document_bytes`` rejected."""
    # No enumerate, no name for the line as read: enumerate's tuple and the name each held the line (as read,
    # then stripped) while the record was judged, and a line is as large as its document, or up to four times
    # (a str takes 4 bytes a character once one character is past U+FFFF).
    number = 0
    for line in map(_without_line_end, lines):
        number += 1
        if not line.strip(_JSON_WHITESPACE):
            continue
        size = _utf8_size(line, max_document_bytes)
        if size > max_document_bytes:
            yield Reject(number, f"line of {size} bytes exceeds --max-document-bytes={max_document_bytes}", line)
            continue
        parsed = _parse(number, line, id_field, text_field, folding)
        del line  # this generator waits at the yield while the batch is judged: its record only
        yield parsed


def _without_line_end(line: str) -> str:
    return line.rstrip("\r\n")


def _utf8_size(line: str, limit: int) -> int:
    """The line's size in bytes as read (undecodable bytes count one each); its length if that is within ``limit``."""
    if len(line) * 4 <= limit:  # a code point is one to four bytes
        return len(line)
    return len(line.encode("utf-8", "surrogateescape"))


def _parse(number: int, line: str, id_field: str, text_field: str, folding: Folding) -> Record | Reject:
    fields = read_json_document(line, id_field, text_field, folding)
    if isinstance(fields, Refusal):
        return Reject(number, fields.detail, line)
    if fields.id is None:
        return Reject(number, _no_id(line, id_field), line)
    return Record(number, fields.id, fields.text)


def _no_id(line: str, id_field: str) -> str:
    """Why a line read as a document has no id: its id field is missing, or null (which counts as missing).

    The stage takes the record key then; a line has none. Said as such: "must be
    a non-empty string or an integer" sent a user looking for a wrong value that
    was not there. The line is parsed again, once per such reject: it has passed
    every check already.
    """
    state = "null" if find_field(json.loads(line), id_field) is None else "missing"
    return f"field {id_field!r} is {state}: every line needs an id, a non-empty string or an integer"
