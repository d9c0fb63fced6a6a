"""Reading one input document (a JSON object or plain text) into an id and normalised text.

Shared by the offline command and the Kafka stage, so that both accept and
refuse exactly the same inputs for the same reasons. A refusal carries a
machine-readable reason (a metric label, a dead-letter header) and a message
for a human.
"""

import json
import re
from typing import Any, NamedTuple

import numpy as np

from stream_dedup.engine.field_paths import MISSING, find_field
from stream_dedup.text import DEFAULT_FOLDING, Folding, normalize

#: Every reason a document can be refused for.
REASONS = (
    "invalid_utf8",
    "invalid_json",
    "not_an_object",
    "invalid_id",
    "missing_text",
    "invalid_text",
    "empty_text",
    "too_large",
    "too_deep",
    "id_too_long",
    "internal_error",
)

#: Deepest nesting of JSON arrays and objects accepted. A document is an object
#: of a few fields; ``json.loads`` recurses once per level and raises
#: ``RecursionError`` near 1,000 levels, so depth is checked before parsing.
MAX_JSON_DEPTH = 64
#: Longest id accepted, in UTF-8 bytes (setting ``max_id_bytes`` in the Kafka stage).
DEFAULT_MAX_ID_BYTES = 1024
#: A JSON string literal, escapes included, removed before counting brackets
#: (brackets inside strings do not nest). An unterminated one runs to the end:
#: the pattern then always matches from a quote, so the scan never restarts
#: inside a string (which made ``"\"\"\"...`` quadratic). Runs of plain characters
#: are single-character repeats and every repeat is possessive, so the regex
#: engine keeps no backtracking state per character: an alternation repeated
#: per character kept about 140 bytes of it a character, 1.7 GB for the
#: 15 MB text of a document holding brackets.
_JSON_STRING = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_A_BRACKET = re.compile(r"[^\[\]{}]+")


class DocumentFields(NamedTuple):
    """A usable document: its id (``None`` when the object has none) and normalised text."""

    id: str | None
    text: str


class Refusal(NamedTuple):
    """Why a document cannot be processed: ``reason`` is one of :data:`REASONS`."""

    reason: str
    detail: str


def decode_utf8(raw: bytes) -> str | Refusal:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        return Refusal("invalid_utf8", f"not valid UTF-8: {error.reason} at byte {error.start}")


def internal_error(error: BaseException) -> Refusal:
    """The refusal of a document that made our code fail: a bug, but one record's, not the stage's."""
    return Refusal("internal_error", f"{type(error).__name__}: {error}"[:500])


def json_depth(line: str) -> int:
    """Deepest nesting of arrays and objects in ``line``, counted without parsing or recursion.

    Brackets inside string literals are ignored. Linear in the length of the
    line (regular expressions and a numpy running sum, no Python loop per
    character), so a hostile value costs milliseconds, not the process.
    """
    brackets = _NOT_A_BRACKET.sub("", _JSON_STRING.sub("", line))
    if len(brackets) <= 1:
        return len(brackets)
    steps = np.frombuffer(brackets.encode("ascii"), dtype=np.uint8)
    depth = np.cumsum(np.where((steps == ord("[")) | (steps == ord("{")), 1, -1), dtype=np.int64)
    return int(depth.max())


def read_json_document(
    line: str,
    id_field: str = "id",
    text_field: str = "text",
    folding: Folding = DEFAULT_FOLDING,
    max_id_bytes: int = DEFAULT_MAX_ID_BYTES,
) -> DocumentFields | Refusal:
    """Parse a JSON object and check its id and text fields.

    The id may be a non-empty string or an integer of at most ``max_id_bytes``
    UTF-8 bytes; a missing id gives ``id=None``. The text must be a string that
    is not empty once normalised. Never raises: whatever goes wrong with one
    document becomes its refusal (``internal_error`` naming the exception when
    no other reason applies).
    """
    try:
        return _read_json_document(line, id_field, text_field, folding, max_id_bytes)
    except Exception as error:
        return internal_error(error)


def _read_json_document(
    line: str, id_field: str, text_field: str, folding: Folding, max_id_bytes: int
) -> DocumentFields | Refusal:
    if not is_utf8(line):
        return Refusal("invalid_utf8", "not valid UTF-8")
    # Before json.loads, which recurses once per level: 100,000 nested brackets
    # would raise RecursionError deep inside the parser (or exhaust the stack).
    # Nesting never exceeds the number of opening brackets, which costs a
    # fraction of a microsecond to count: the exact depth (tens of
    # microseconds for a 1 KB document) only for the few that have many.
    opening = line.count("{") + line.count("[")
    depth = json_depth(line) if opening > MAX_JSON_DEPTH else opening
    if depth > MAX_JSON_DEPTH:
        return Refusal("too_deep", f"arrays and objects nested {depth} deep; at most {MAX_JSON_DEPTH} are read")
    try:
        value: Any = json.loads(line)
    except json.JSONDecodeError as error:
        # Some of json's messages end in "at" ("Invalid control character at"), which named it twice.
        return Refusal("invalid_json", f"not valid JSON: {error.msg.removesuffix(' at')} at column {error.colno}")
    except ValueError as error:  # an integer of more than 4,300 digits (sys.get_int_max_str_digits)
        return Refusal("invalid_json", f"not valid JSON: {error}"[:300])
    except RecursionError:  # not reached after the depth check; kept so that no input can end the process
        return Refusal("too_deep", "arrays and objects nested too deep to parse")
    if not isinstance(value, dict):
        return Refusal("not_an_object", f"expected a JSON object, got {type(value).__name__}")
    doc_id = find_field(value, id_field)
    if doc_id is MISSING:
        doc_id = None
    if doc_id is not None:
        if isinstance(doc_id, bool) or not isinstance(doc_id, str | int) or doc_id == "":
            return Refusal("invalid_id", f"field {id_field!r} must be a non-empty string or an integer")
        if isinstance(doc_id, int) and doc_id.bit_length() > 4 * max_id_bytes:
            return Refusal("id_too_long", f"field {id_field!r} is an integer longer than max_id_bytes={max_id_bytes}")
        if not is_utf8(str(doc_id)):
            return Refusal("invalid_id", f"field {id_field!r} holds an unpaired surrogate escape")
        doc_id = str(doc_id)
        id_bytes = len(doc_id.encode("utf-8"))
        if id_bytes > max_id_bytes:
            return Refusal("id_too_long", f"field {id_field!r} is {id_bytes} bytes long; max_id_bytes={max_id_bytes}")
    text = find_field(value, text_field)
    if text is MISSING:
        return Refusal("missing_text", f"field {text_field!r} must be a string; it is missing")
    if not isinstance(text, str):
        return Refusal("invalid_text", f"field {text_field!r} must be a string, got {type(text).__name__}")
    return read_text_document(text, folding, f"field {text_field!r}", doc_id)


def read_text_document(
    text: str,
    folding: Folding = DEFAULT_FOLDING,
    what: str = "the text",
    doc_id: str | None = None,
) -> DocumentFields | Refusal:
    """Check and normalise a plain text (``what`` names it in refusals); never raises."""
    if not is_utf8(text):
        return Refusal("invalid_text", f"{what} holds an unpaired surrogate escape")
    try:
        normalized = normalize(text, folding)
    except Exception as error:
        return internal_error(error)
    if not normalized:
        return Refusal("empty_text", f"{what} is empty after normalisation")
    return DocumentFields(doc_id, normalized)


def is_utf8(text: str) -> bool:
    """False if ``text`` holds lone surrogates (undecodable input bytes or ``\\ud800`` escapes, bytes of
    another encoding in an environment variable)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
