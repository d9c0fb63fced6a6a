"""The changelog: what each committed batch inserted into the index, as Kafka record values.

The index lives in memory; the changelog topic (one partition, so one order)
makes it durable. Each batch's changelog records are written in the same
transaction as its verdicts and input offsets, so the changelog holds exactly
the batches whose verdicts were published. Replaying it through
:meth:`~stream_dedup.engine.detector.Detector.process_signed` rebuilds the same index: same documents,
same order, same batch boundaries (a batch too big for one record is split
into parts, and the parts are put back together before replay, because
generation boundaries fall between batches).

Each record also carries the input positions after its batch, so a restore
knows where to resume, and the signature fingerprint
(:meth:`~stream_dedup.config.DetectionConfig.signature_fingerprint`, passed
in as ``digest``), so a changelog written under other settings is refused
instead of mixing incomparable signatures.

Record value layout (no pickle)::

    b"SDCL"  magic
    u8       format version
    u32      header length (little-endian)
    header   UTF-8 JSON: digest, input topic, positions, final flag, array directory
    arrays   raw little-endian bytes, back to back: sketches, keys (shingle sets
             with exact verification, SimHash fingerprints with the methods
             simhash and combined, set sizes with containment on),
             event times, sources, ids

This is :func:`stream_dedup.kafka.packed_arrays.pack_record`'s layout. The
same records make the sequenced topic of a sharded stage
(``docs/scale-out.md``): a batch's place in the order is its record's offset.
"""

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from stream_dedup.config import banding_kept, signature_difference, signature_parameters_in
from stream_dedup.errors import ChangelogError
from stream_dedup.kafka.packed_arrays import (
    array,
    check_rows,
    field,
    pack_record,
    reading_record,
    signed_arrays,
    signed_batch,
    text_arrays,
    texts_of,
    unpack_record,
)
from stream_dedup.lsh.generation import IndexedBatch, SignedBatch

MAGIC = b"SDCL"
#: 2: one-bit sketches, index keys and sources instead of 8-bit signatures.
FORMAT_VERSION = 2

#: How a stage starts over from an empty index. A new changelog_topic (or sequenced_topic) alone does not do it: the
#: group's (the signers') committed offsets would have the stage judge on against an index missing every earlier
#: document, which :func:`stream_dedup.worker.topics.refuse_lost_history` refuses.
START_OVER = "run the stage with a new group_id (new topics and index; the input is judged again from its beginning)"

#: Default upper bound of one changelog record value (Kafka's default limit is 1 MB).
MAX_RECORD_BYTES = 512 * 1024

#: Largest history record the broker accepts: the stage creates its changelog (and a sharded stage its
#: sequenced topic) with this ``max.message.bytes``. A record holds at least one document, and with exact
#: verification a 1 MiB document's shingle set alone takes up to 4 MiB.
MAX_MESSAGE_BYTES = 8 << 20
#: Bytes a record takes per shingle of a document's shingle set (exact verification).
SHINGLE_BYTES = 4
#: Room a record keeps beside one document's shingle set: its sketch, keys, id and the record's header.
ROW_BYTES_BESIDES_SET = 64 << 10
#: Most bytes of one document's shingle set a record can hold: a document with more cannot be recorded.
MAX_SHINGLE_SET_BYTES = MAX_MESSAGE_BYTES - ROW_BYTES_BESIDES_SET


@dataclass(frozen=True)
class ChangelogEntry:
    """Documents one batch (or one part of a batch) inserted, in order.

    Attributes:
        documents: what the detector indexed, as it was given it.
        input_topic: the topic the batch was read from.
        positions: input partition -> next offset to read, after this batch.
        final: whether this is the batch's last part.
        settings: the detection settings the batch was judged under (``DetectionConfig.verdict_settings``),
            if its writer said (a worker does; a signer, which judges nothing, and older releases do not).
        input_topic_id: Kafka's id of the input topic whose offsets ``positions`` are, if its writer knew
            (see ``kafka.input_identity``): a topic created again under the name has another id.
    """

    documents: IndexedBatch
    input_topic: str
    positions: dict[int, int]
    final: bool = True
    settings: Mapping[str, object] | None = None
    input_topic_id: str | None = None


def encode_entry(
    entry: ChangelogEntry, digest: str, max_bytes: int = MAX_RECORD_BYTES, independent: bool = False
) -> list[bytes]:
    """Record values for ``entry``: one, or several parts when it is larger than ``max_bytes``.

    ``independent`` makes every part a batch of its own (each ``final``), as
    the sequenced topic needs: there, several writers append to one
    partition, so the parts of one writer's batch need not be contiguous.
    """
    n = len(entry.documents.ids)
    if n <= 1:
        return [_encode_part(entry, digest)]
    row_bytes = _row_bytes(entry)
    rows_per_part = max(1, int(max_bytes // max(1.0, row_bytes)))
    starts = list(range(0, n, rows_per_part))
    last = len(starts) - 1
    return [
        _encode_part(
            _slice(entry, start, min(n, start + rows_per_part), independent or (entry.final and i == last)), digest
        )
        for i, start in enumerate(starts)
    ]


def decode_entry(
    value: bytes,
    digest: str,
    topic_setting: str = "changelog_topic",
    verdict_settings: Mapping[str, object] | None = None,
) -> ChangelogEntry:
    """Parse a record value; raises :class:`ChangelogError` if it is not replayable here.

    ``topic_setting`` names the setting of the topic read, for the messages
    (a shard reads the same records from ``sequenced_topic``). A record that
    is damaged, or whose arrays do not all hold one row per document, is
    refused too: replayed, it would index documents under others' sketches.
    ``verdict_settings``: the reader's, so that a refusal of other signature
    parameters names the one that differs when the record says its writer's.
    """
    kind = topic_setting.removesuffix("_topic")
    # Not a new topic alone: a worker's changelog goes with its group's input offsets, a sequenced topic with
    # its signers', and a new topic beside them is refused as lost history (worker.topics.refuse_lost_history).
    with reading_record(kind, f"It cannot be replayed: {START_OVER}."):
        header, arrays = unpack_record(
            value, MAGIC, FORMAT_VERSION, kind, f"Replay it with the release that wrote it, or {START_OVER}."
        )
        if field(header, "digest", str) != digest:
            raise ChangelogError(
                f"the {kind} topic was written with {_other_parameters(_settings(header), verdict_settings)}; "
                f"its signatures are not comparable. "
                f"Run with the original settings{_kept(header, verdict_settings)}, or {START_OVER}."
            )
        ids = texts_of(arrays, "id")
        event_times, sources = array(arrays, "event_times", "<f8", 1), array(arrays, "sources", "<u8", 1)
        signed = signed_batch(arrays)
        check_rows({"sketches": signed.sketches, "event_times": event_times, "sources": sources}, len(ids))
        return ChangelogEntry(
            documents=IndexedBatch(ids, signed, event_times, sources),
            input_topic=field(header, "input_topic", str),
            positions=_positions(header),
            final=field(header, "final", bool),
            settings=_settings(header),
            input_topic_id=_input_topic_id(header),
        )


def _other_parameters(written: Mapping[str, object] | None, running: Mapping[str, object] | None) -> str:
    """The signature parameter that differs, with both values, when both sides' settings are known."""
    difference = _difference(written, running)
    if difference is None:
        return (
            "other signature parameters (method, shingling, num_perm, seed, banding, verification, SimHash "
            "weighting, containment, ignore_invisible or fold_lookalikes) than this run's"
        )
    name, made_with, runs_with = difference
    return f"{name}={made_with!r} but this run uses {name}={runs_with!r}"


def _kept(header: dict[str, Any], running: Mapping[str, object] | None) -> str:
    """How to keep the written banding, when the banding is what differs (:func:`banding_kept`)."""
    written = _settings(header)
    difference = _difference(written, running)
    if written is None or difference is None:
        return " (a changelog written before ignore_invisible existed needs it off)"
    return banding_kept(difference[0], signature_parameters_in(written))


def _difference(
    written: Mapping[str, object] | None, running: Mapping[str, object] | None
) -> tuple[str, object, object] | None:
    if written is None or running is None:
        return None
    return signature_difference(signature_parameters_in(written), signature_parameters_in(running))


def merge_parts(parts: list[ChangelogEntry]) -> ChangelogEntry:
    """Put the parts of one batch back together."""
    if len(parts) == 1:
        return parts[0]
    batches = [p.documents for p in parts]
    documents = IndexedBatch(
        [doc_id for b in batches for doc_id in b.ids],
        SignedBatch.concat([b.signed for b in batches]),
        np.concatenate([b.event_times for b in batches]),
        np.concatenate([b.sources for b in batches]),
    )
    return replace(parts[-1], documents=documents)


def _encode_part(entry: ChangelogEntry, digest: str) -> bytes:
    documents = entry.documents
    arrays = [
        *signed_arrays(documents.signed),
        ("event_times", np.ascontiguousarray(documents.event_times, dtype="<f8")),
        ("sources", np.ascontiguousarray(documents.sources, dtype="<u8")),
        *text_arrays("id", documents.ids),
    ]
    header = {
        "digest": digest,
        "input_topic": entry.input_topic,
        "positions": {str(p): o for p, o in sorted(entry.positions.items())},
        "final": entry.final,
        "settings": entry.settings,
    }
    if entry.input_topic_id is not None:  # read by releases that know it, passed over by older ones
        header["input_topic_id"] = entry.input_topic_id
    return pack_record(MAGIC, FORMAT_VERSION, header, arrays)


def _row_bytes(entry: ChangelogEntry) -> float:
    """Average encoded bytes per document."""
    ids, signed = entry.documents.ids, entry.documents.signed
    per_row = signed.sketches.shape[1] + 4 * signed.keys.shape[1] + 8 + 8 + 8
    per_row += 8 if signed.fingerprints is not None else 0
    per_row += 4 if signed.set_sizes is not None else 0
    per_row += 2 if signed.filled_bins is not None else 0
    per_row += sum(len(i) for i in ids) / len(ids)
    if signed.shingles is not None:
        per_row += (signed.shingles.values.nbytes + signed.shingles.ends.nbytes) / len(ids)
    return float(per_row)


def _slice(entry: ChangelogEntry, start: int, stop: int, final: bool) -> ChangelogEntry:
    documents = entry.documents
    part = IndexedBatch(
        documents.ids[start:stop],
        documents.signed.rows(start, stop),
        documents.event_times[start:stop],
        documents.sources[start:stop],
    )
    return replace(entry, documents=part, final=final)


def _positions(header: dict[str, Any]) -> dict[int, int]:
    """The header's input partition -> next offset (ValueError when it holds anything else)."""
    positions = field(header, "positions", dict)
    if not all(type(offset) is int for offset in positions.values()):
        raise ValueError("header field 'positions' holds an offset that is not an integer")
    return {int(partition): offset for partition, offset in positions.items()}


def _settings(header: dict[str, Any]) -> dict[str, object] | None:
    """The header's verdict settings, if it has them (ValueError when it holds anything else)."""
    settings = header.get("settings")
    if settings is not None and not isinstance(settings, dict):
        raise ValueError("header field 'settings' is not a JSON object")
    return settings


def _input_topic_id(header: dict[str, Any]) -> str | None:
    """The header's input topic id, if it has one (ValueError when it holds anything else)."""
    found = header.get("input_topic_id")
    if found is not None and not isinstance(found, str):
        raise ValueError("header field 'input_topic_id' is not a string")
    return found
