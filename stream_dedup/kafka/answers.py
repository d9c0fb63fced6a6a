"""A shard's answer records: its best match for each document of a stretch of the sequenced topic.

A shard writes one record per transaction to its own partition of the
answers topic (partition = shard index). The record says which sequenced
offsets it covers, ``[first_offset, end_offset)``: every document there that
is not listed has no match on this shard. So a stretch without any match
costs a few bytes, and ``end_offset`` is the shard's progress, which the
judge waits on (``docs/scale-out.md``).

Record value layout (no pickle; see :mod:`~stream_dedup.kafka.packed_arrays`)::

    b"SDAN"  magic
    u8       format version
    u32      header length (little-endian)
    header   UTF-8 JSON: digest, shard, shards, first_offset, end_offset, the shard's verdict settings,
             array directory
    arrays   keys, match_keys (int64 sequence keys), similarity (float64,
             unrounded), distances (int64, method combined only),
             match_sources (uint64), match ids (bytes and ends), kinds
             (uint8) and containment (float64, unrounded), with
             containment on only
"""

from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np

from stream_dedup.engine.sharding import ANSWER_KINDS, ROW_BITS, ShardAnswer
from stream_dedup.errors import ChangelogError
from stream_dedup.kafka.changelog import MAX_RECORD_BYTES
from stream_dedup.kafka.packed_arrays import (
    array,
    check_rows,
    field,
    optional_array,
    pack_record,
    reading_record,
    text_arrays,
    texts_of,
    unpack_record,
)

MAGIC = b"SDAN"
FORMAT_VERSION = 1
#: What to do about a damaged answer record: nothing in the judge can mend it.
_DAMAGED = (
    "The judge cannot go past it: check the brokers' disks, and that only this stage's shards write to answers_topic"
)


@dataclass(frozen=True)
class AnswerRecord:
    """Shard ``shard`` of ``shards`` answered every document of sequenced offsets ``[first_offset, end_offset)``.

    The judge may drop (and commit past) a record it has read once it has
    judged every batch before ``end_offset`` and every row's document: see
    :meth:`used_up_before`.
    """

    shard: int
    shards: int
    first_offset: int
    end_offset: int
    answer: ShardAnswer
    #: The shard's verdict settings (``DetectionConfig.verdict_settings``); None in records written before they
    #: were carried. Settings that keep the signatures can differ between shards and judge: the judge says so.
    settings: Mapping[str, object] | None = None

    def used_up_before(self, offset: int) -> bool:
        """Whether everything this record tells concerns sequenced offsets below ``offset``."""
        last_key = int(self.answer.keys[-1]) if len(self.answer) else -1
        return self.end_offset <= offset and last_key < offset << ROW_BITS


def encode_answers(record: AnswerRecord, digest: str, max_bytes: int = MAX_RECORD_BYTES) -> list[bytes]:
    """Record values for ``record``: one, or parts of at most about ``max_bytes`` (sent in one transaction).

    Every part but the last says ``end_offset = first_offset``: it carries
    rows, but no progress, so a judge that has read it and not the rest waits.
    ``digest`` is the signature fingerprint the shard's index was built with.
    """
    answer = record.answer
    fixed = 40 + (8 if answer.distances is not None else 0) + (9 if answer.kinds is not None else 0)
    row_bytes = fixed + sum(len(doc_id.encode("utf-8")) for doc_id in answer.match_ids) / max(1, len(answer))
    rows_per_part = max(1, int(max_bytes // row_bytes))
    starts = list(range(0, len(answer), rows_per_part)) or [0]
    parts = [
        replace(record, end_offset=record.first_offset, answer=answer.rows(start, start + rows_per_part))
        for start in starts[:-1]
    ]
    parts.append(replace(record, answer=answer.rows(starts[-1], len(answer))))
    return [_encode(part, digest) for part in parts]


def _encode(record: AnswerRecord, digest: str) -> bytes:
    answer = record.answer
    arrays: list[tuple[str, np.ndarray]] = [
        ("keys", np.ascontiguousarray(answer.keys, dtype="<i8")),
        ("match_keys", np.ascontiguousarray(answer.match_keys, dtype="<i8")),
        ("similarity", np.ascontiguousarray(answer.similarity, dtype="<f8")),
        ("match_sources", np.ascontiguousarray(answer.match_sources, dtype="<u8")),
        *text_arrays("id", answer.match_ids),
    ]
    if answer.distances is not None:
        arrays.append(("distances", np.ascontiguousarray(answer.distances, dtype="<i8")))
    if answer.kinds is not None and answer.containment is not None:
        arrays.append(("kinds", np.ascontiguousarray(answer.kinds, dtype="u1")))
        arrays.append(("containment", np.ascontiguousarray(answer.containment, dtype="<f8")))
    fields = {
        "digest": digest,
        "shard": record.shard,
        "shards": record.shards,
        "first_offset": record.first_offset,
        "end_offset": record.end_offset,
        "settings": record.settings,
    }
    return pack_record(MAGIC, FORMAT_VERSION, fields, arrays)


def decode_answer(value: bytes, digest: str) -> AnswerRecord:
    """Parse a record value; raises :class:`ChangelogError` if it is not one of ours, of other parameters or damaged."""
    with reading_record("answer", _DAMAGED):
        header, arrays = unpack_record(
            value, MAGIC, FORMAT_VERSION, "answer", "Run shards and judge of the same release."
        )
        if field(header, "digest", str) != digest:
            raise ChangelogError(
                "an answer record was made with other signature parameters than this judge's: "
                "give the shards and the judge the same detection settings"
            )
        answer = _answer_of(arrays)
        settings = header.get("settings")
        return AnswerRecord(
            field(header, "shard", int),
            field(header, "shards", int),
            field(header, "first_offset", int),
            field(header, "end_offset", int),
            answer,
            settings if isinstance(settings, dict) else None,
        )


def _answer_of(arrays: Mapping[str, np.ndarray]) -> ShardAnswer:
    """The rows ``arrays`` hold (ValueError when they are not one per row, or name an unknown kind of match)."""
    kinds = optional_array(arrays, "kinds", "u1", 1)
    answer = ShardAnswer(
        array(arrays, "keys", "<i8", 1),
        array(arrays, "match_keys", "<i8", 1),
        array(arrays, "similarity", "<f8", 1),
        optional_array(arrays, "distances", "<i8", 1),
        array(arrays, "match_sources", "<u8", 1),
        texts_of(arrays, "id"),
        kinds,
        optional_array(arrays, "containment", "<f8", 1) if kinds is not None else None,
    )
    if kinds is not None and answer.containment is None:
        raise ValueError("array 'kinds' without array 'containment'")
    columns = {
        "match_keys": answer.match_keys,
        "similarity": answer.similarity,
        "distances": answer.distances,
        "match_sources": answer.match_sources,
        "kinds": answer.kinds,
        "containment": answer.containment,
    }
    check_rows(columns, len(answer.keys))
    if len(answer.match_ids) != len(answer.keys):
        raise ValueError(f"{len(answer.match_ids)} match ids for {len(answer.keys)} rows")
    if kinds is not None and (kinds >= len(ANSWER_KINDS)).any():
        raise ValueError("it names a kind of match this judge does not know")
    return answer
