"""Records as kafka-python's consumer returns them, for the tests of what ``watch`` shows."""

import json
from typing import Any

from kafka.consumer.fetcher import ConsumerRecord

#: A Kafka timestamp (ms) the records below start from.
T0 = 1_795_000_000_000


def consumed(
    value: bytes | None,
    headers: list[tuple[str, bytes]] | None = None,
    offset: int = 0,
    timestamp: int = T0,
    topic: str = "verdicts",
    partition: int = 0,
) -> Any:
    return ConsumerRecord(topic, partition, -1, offset, timestamp, 0, None, value, headers or [], None, -1, -1, -1)


def verdict_value(
    doc_id: str,
    duplicate_of: str | None = None,
    similarity: float | None = None,
    source: tuple[int, int, int] = (1, 73, T0),
    match: tuple[int, int] | None = None,
    containment: tuple[str, float] | None = None,
) -> bytes:
    """A verdict's JSON value (docs/verdicts.md); ``source`` is (partition, offset, timestamp).

    ``containment``, ``(kind, value)``, makes it a format 3 ``contained`` or ``contains`` verdict.
    """
    partition, offset, timestamp = source
    value: dict[str, Any] = {
        "format_version": 2,
        "id": doc_id,
        "verdict": "unique" if duplicate_of is None else "duplicate",
        "duplicate_of": duplicate_of,
        "similarity": similarity,
        "match_source": None if match is None else {"topic": "documents", "partition": match[0], "offset": match[1]},
        "source": {"topic": "documents", "partition": partition, "offset": offset, "timestamp": timestamp},
        "params_fingerprint": "3adcde92d2f4ad7c",
    }
    if containment is not None:
        value |= {"format_version": 3, "verdict": containment[0], "containment": containment[1]}
    return json.dumps(value).encode()  # a lone surrogate becomes an escape, as a hostile producer may send
