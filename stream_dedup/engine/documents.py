"""Reading one input document (a JSON object or plain text) into an id and normalised text.

Shared by the offline command and the Kafka stage, so that both accept and
refuse exactly the same inputs for the same reasons. A refusal carries a
machine-readable reason (a metric label, a dead-letter header) and a message
for a human.
"""

import json
from typing import Any, NamedTuple

from stream_dedup.text import normalize

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
)


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


def read_json_document(
    line: str, id_field: str = "id", text_field: str = "text", strip_punctuation: bool = False
) -> DocumentFields | Refusal:
    """Parse a JSON object and check its id and text fields.

    The id may be a non-empty string or an integer; a missing id gives
    ``id=None``. The text must be a string that is not empty once normalised.
    """
    if not _is_utf8(line):
        return Refusal("invalid_utf8", "not valid UTF-8")
    try:
        value: Any = json.loads(line)
    except json.JSONDecodeError as error:
        return Refusal("invalid_json", f"not valid JSON: {error.msg} at column {error.colno}")
    if not isinstance(value, dict):
        return Refusal("not_an_object", f"expected a JSON object, got {type(value).__name__}")
    doc_id = value.get(id_field)
    if doc_id is not None:
        if isinstance(doc_id, bool) or not isinstance(doc_id, str | int) or doc_id == "":
            return Refusal("invalid_id", f"field {id_field!r} must be a non-empty string or an integer")
        if not _is_utf8(str(doc_id)):
            return Refusal("invalid_id", f"field {id_field!r} holds an unpaired surrogate escape")
        doc_id = str(doc_id)
    if text_field not in value:
        return Refusal("missing_text", f"field {text_field!r} must be a string; it is missing")
    text = value[text_field]
    if not isinstance(text, str):
        return Refusal("invalid_text", f"field {text_field!r} must be a string, got {type(text).__name__}")
    return read_text_document(text, strip_punctuation, f"field {text_field!r}", doc_id)


def read_text_document(
    text: str, strip_punctuation: bool = False, what: str = "the text", doc_id: str | None = None
) -> DocumentFields | Refusal:
    """Check and normalise a plain text (``what`` names it in refusals)."""
    if not _is_utf8(text):
        return Refusal("invalid_text", f"{what} holds an unpaired surrogate escape")
    normalized = normalize(text, strip_punctuation)
    if not normalized:
        return Refusal("empty_text", f"{what} is empty after normalisation")
    return DocumentFields(doc_id, normalized)


def _is_utf8(text: str) -> bool:
    """False if ``text`` holds lone surrogates (undecodable input bytes or ``\\ud800`` escapes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
