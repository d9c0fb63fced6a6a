"""Reading ``{"id": ..., "text": ...}`` JSON lines, rejecting bad ones one by one.

A malformed line never aborts a run and never vanishes: it becomes a
:class:`Reject` with its line number and reason, written to the rejects file.
"""

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from stream_dedup.text import normalize


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
    strip_punctuation: bool = False,
) -> Iterator[Record | Reject]:
    """Parse JSON lines (numbered from 1); blank lines are skipped."""
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip("\n")
        if not line.strip():
            continue
        yield _parse(number, line, id_field, text_field, strip_punctuation)


def _parse(number: int, line: str, id_field: str, text_field: str, strip_punctuation: bool) -> Record | Reject:
    if not _is_utf8(line):
        return Reject(number, "not valid UTF-8", line)
    try:
        value = json.loads(line)
    except json.JSONDecodeError as error:
        return Reject(number, f"not valid JSON: {error.msg} at column {error.colno}", line)
    if not isinstance(value, dict):
        return Reject(number, f"expected a JSON object, got {type(value).__name__}", line)
    doc_id = value.get(id_field)
    if isinstance(doc_id, bool) or not isinstance(doc_id, str | int) or doc_id == "":
        return Reject(number, f"field {id_field!r} must be a non-empty string or an integer", line)
    if not _is_utf8(str(doc_id)):
        return Reject(number, f"field {id_field!r} holds an unpaired surrogate escape", line)
    text = value.get(text_field)
    if not isinstance(text, str):
        return Reject(number, f"field {text_field!r} must be a string", line)
    if not _is_utf8(text):
        return Reject(number, f"field {text_field!r} holds an unpaired surrogate escape", line)
    normalized = normalize(text, strip_punctuation)
    if not normalized:
        return Reject(number, f"field {text_field!r} is empty after normalisation", line)
    return Record(number, str(doc_id), normalized)


def _is_utf8(text: str) -> bool:
    """False if ``text`` holds lone surrogates (undecodable input bytes or ``\\ud800`` escapes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
