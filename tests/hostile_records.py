"""Hostile input records: at least 25 kinds a stage meets on a real topic, each with the reason it must get."""

from __future__ import annotations

import json
import os

#: (name, key, value, reason): every record here must end as one dead letter with that reason.
#: Values are bytes as a producer sends them; a key stands in for the id where the value has none.
HOSTILE: list[tuple[str, bytes | None, bytes | None, str]] = [
    ("deep-array", b"k-deep-array", b"[" * 100_000 + b"]" * 100_000, "too_deep"),
    ("deep-object", b"k-deep-object", b'{"a":' * 10_000 + b"1" + b"}" * 10_000, "too_deep"),
    ("deep-in-text-field", b"k-deep-text", b'{"id": "x", "text": ' + b"[" * 5_000 + b"]" * 5_000 + b"}", "too_deep"),
    ("huge-integer", b"k-huge-int", b'{"id": "n", "text": "t", "n": ' + b"9" * 5_000 + b"}", "invalid_json"),
    ("not-utf8", b"k-not-utf8", b'{"id": "u", "text": "caf\xe9"}', "invalid_utf8"),
    ("incompressible", b"k-random", os.urandom(150_000), "invalid_utf8"),
    ("byte-order-mark", b"k-bom", b'\xef\xbb\xbf{"id": "b", "text": "bom"}', "invalid_json"),
    ("plain-text", b"k-plain", b"hello, not JSON", "invalid_json"),
    ("truncated-json", b"k-truncated", b'{"id": "t", "text": "cut', "invalid_json"),
    ("nan-literal", b"k-nan", b'{"id": "n", "text": NaN}', "invalid_text"),
    ("top-level-array", b"k-array", b'["id", "text"]', "not_an_object"),
    ("top-level-string", b"k-string", b'"just a string"', "not_an_object"),
    ("top-level-null", b"k-null", b"null", "not_an_object"),
    ("tombstone", b"k-tombstone", None, "missing_text"),
    ("no-text-field", b"k-no-text", b'{"id": "m", "body": "elsewhere"}', "missing_text"),
    ("text-null", b"k-text-null", b'{"id": "m", "text": null}', "invalid_text"),
    ("text-number", b"k-text-number", b'{"id": "m", "text": 42}', "invalid_text"),
    ("text-list", b"k-text-list", b'{"id": "m", "text": ["a", "b"]}', "invalid_text"),
    ("duplicate-keys", b"k-dup-keys", b'{"id": "d", "text": "fine", "text": 7}', "invalid_text"),
    ("lone-surrogate-text", b"k-surrogate", b'{"id": "s", "text": "a \\ud800 b"}', "invalid_text"),
    ("lone-surrogate-id", b"k-surrogate-id", b'{"id": "\\udc00", "text": "words"}', "invalid_id"),
    ("whitespace-text", b"k-blank", b'{"id": "w", "text": " \\t\\n "}', "empty_text"),
    ("empty-text", b"k-empty", b'{"id": "e", "text": ""}', "empty_text"),
    ("id-boolean", b"k-id-bool", b'{"id": true, "text": "words"}', "invalid_id"),
    ("id-empty", b"k-id-empty", b'{"id": "", "text": "words"}', "invalid_id"),
    ("id-object", b"k-id-object", b'{"id": {"a": 1}, "text": "words"}', "invalid_id"),
    ("id-too-long", b"k-id-long", json.dumps({"id": "i" * 5_000, "text": "words"}).encode(), "id_too_long"),
    ("key-not-utf8", b"\xff\xfe", b'{"text": "an id from a bad key"}', "invalid_id"),
    ("key-too-long", b"k" * 5_000, b'{"text": "an id from a long key"}', "id_too_long"),
    ("over-max-document-bytes", b"k-big", json.dumps({"id": "g", "text": "w " * 150_000}).encode(), "too_large"),
]

#: What the stage under test must be configured with for the reasons above to hold.
MAX_DOCUMENT_BYTES = 200_000
