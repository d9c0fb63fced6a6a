"""Snapshots that pass their checksum but do not hold what a snapshot holds: refused as corrupt, never a crash.

A writer's bug or a hand-made file can checksum right and still have arrays
of other lengths than the document count, ends past the id bytes, a negative
size, null metadata or state of the wrong JSON types. Each must raise
:class:`CorruptSnapshotError`, so the snapshot store moves on to an older one.
"""

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector, load_snapshot, make_detector
from stream_dedup.engine.sharding import ShardDetector, sequence_keys
from stream_dedup.engine.snapshot import (
    SnapshotImage,
    Snapshotted,
    capture_snapshot,
    load_shard_snapshot,
    read_snapshot_metadata,
)
from stream_dedup.errors import CorruptSnapshotError, IncompatibleSnapshotError
from stream_dedup.lsh import IndexedBatch
from tests.corpus import make_corpus

CONFIG = DetectionConfig(verification="exact", containment_threshold=0.8, index_slots=2)
Arrays = dict[str, np.ndarray]


def detector_of(documents: int = 30) -> Detector:
    detector = Detector(CONFIG)
    detector.process([f"d{i}" for i in range(documents)], make_corpus(documents, seed=6), event_times=[1.0] * documents)
    return detector


def written(
    tmp_path: Path,
    change_arrays: Callable[[Arrays], None] = lambda arrays: None,
    change_header: Callable[[dict[str, Any]], None] = lambda header: None,
    detector: Snapshotted | None = None,
) -> Path:
    """A snapshot, checksummed right, of what ``change_arrays`` and ``change_header`` leave of a detector's."""
    image = capture_snapshot(detector or detector_of(), {"changelog_offset": 5})
    header = json.loads(image.header_bytes)
    arrays = {name: np.array(array) for name, array in image.arrays}
    change_arrays(arrays)
    directory, offset = [], 0
    for name, array in arrays.items():
        directory.append({"name": name, "dtype": array.dtype.str, "shape": list(array.shape), "offset": offset})
        offset += array.nbytes
    header["arrays"] = directory
    change_header(header)
    path = tmp_path / "index.snap"
    SnapshotImage(json.dumps(header).encode(), list(arrays.items())).write(path)
    return path


def test_the_rewrite_helper_keeps_a_snapshot_loadable(tmp_path: Path) -> None:
    detector, metadata = load_snapshot(written(tmp_path), CONFIG)
    assert len(detector) == 30 and metadata == {"changelog_offset": 5}


def drop_last_row(name: str) -> Callable[[Arrays], None]:
    def change(arrays: Arrays) -> None:
        arrays[f"generation0.{name}"] = arrays[f"generation0.{name}"][:-1]

    return change


@pytest.mark.parametrize("name", ["key_highs", "sources", "id_ends", "shingle_ends", "set_sizes", "entries"])
def test_an_array_of_another_length_than_the_documents_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(CorruptSnapshotError, match="generation 0 do not hold 30 documents"):
        load_snapshot(written(tmp_path, drop_last_row(name)), CONFIG)


@pytest.mark.parametrize(
    "ends",
    [lambda ends: ends + 1, lambda ends: ends[::-1].copy()],
    ids=["past-the-bytes", "not-in-order"],
)
def test_id_ends_that_do_not_cut_the_id_bytes_in_order_are_refused(
    tmp_path: Path, ends: Callable[[np.ndarray], np.ndarray]
) -> None:
    def change(arrays: Arrays) -> None:
        arrays["generation0.id_ends"] = ends(arrays["generation0.id_ends"])

    with pytest.raises(CorruptSnapshotError, match="generation 0"):
        load_snapshot(written(tmp_path, change), CONFIG)


def not_utf8(arrays: Arrays) -> None:
    arrays["generation0.id_bytes"][0] = 0xFF


def a_character_cut(arrays: Arrays) -> None:
    """The first id, "d0é", ends in the middle of its "é" (two bytes): the halves are UTF-8 only together."""
    arrays["generation0.id_ends"][0] -= 1


@pytest.mark.parametrize("config", [CONFIG, DetectionConfig(method="simhash")], ids=["banded", "hamming"])
@pytest.mark.parametrize("change", [not_utf8, a_character_cut], ids=["not-utf8", "character-cut"])
def test_ids_that_do_not_read_back_as_utf8_are_refused(
    tmp_path: Path, config: DetectionConfig, change: Callable[[Arrays], None]
) -> None:
    """Loaded, the first match of such a document raised UnicodeDecodeError mid-batch, after every restart."""
    detector = make_detector(config)
    detector.process([f"d{i}é" for i in range(10)], make_corpus(10, seed=6), event_times=[1.0] * 10)

    with pytest.raises(CorruptSnapshotError, match="generation 0"):
        load_snapshot(written(tmp_path, change, detector=detector), config)


def test_ids_of_any_script_load_as_they_were(tmp_path: Path) -> None:
    ids = ["é", "", "日本語", "d3", "🦀x", "Ω"] + [f"d{i}" for i in range(6, 10)]
    detector = make_detector(CONFIG)
    detector.process(ids, make_corpus(10, seed=6), event_times=[1.0] * 10)

    restored, _ = load_snapshot(written(tmp_path, detector=detector), CONFIG)

    assert restored.index.ids_of(np.arange(10, dtype=np.int64)) == ids


def test_a_band_table_naming_a_document_not_stored_is_refused(tmp_path: Path) -> None:
    def change(arrays: Arrays) -> None:
        arrays["generation0.docs"].reshape(-1)[0] = 31

    with pytest.raises(CorruptSnapshotError, match="generation 0"):
        load_snapshot(written(tmp_path, change), CONFIG)


def test_a_missing_array_is_refused(tmp_path: Path) -> None:
    def change(arrays: Arrays) -> None:
        del arrays["generation0.key_highs"]

    with pytest.raises(CorruptSnapshotError, match=r"lacks array 'generation0\.key_highs'"):
        load_snapshot(written(tmp_path, change), CONFIG)


def test_a_negative_size_is_refused(tmp_path: Path) -> None:
    def change(header: dict[str, Any]) -> None:
        header["arrays"][-1]["shape"] = [-1]

    with pytest.raises(CorruptSnapshotError, match="has shape \\[-1\\]"):
        load_snapshot(written(tmp_path, change_header=change), CONFIG)


@pytest.mark.parametrize(
    "change",
    [
        lambda header: header.update(metadata=None),
        lambda header: header.update(metadata=[1, 2]),
        lambda header: header.update(state=None),
        lambda header: header["state"].update(generations="many"),
        lambda header: header["state"].update(generations=[None]),
        lambda header: header["state"].update(stats=[]),
        lambda header: header["state"]["stats"].update(unknown=1),
        lambda header: header.update(parameters=7),
        lambda header: header.update(arrays={}),
    ],
    ids=[
        "metadata-null",
        "metadata-list",
        "state-null",
        "generations-string",
        "generation-null",
        "stats-list",
        "stats-unknown-field",
        "parameters-number",
        "arrays-object",
    ],
)
def test_a_header_of_the_wrong_json_types_is_refused(tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    with pytest.raises(CorruptSnapshotError, match=r"index\.snap"):
        load_snapshot(written(tmp_path, change_header=change), CONFIG)


def test_a_shard_snapshot_of_the_wrong_json_types_is_refused(tmp_path: Path) -> None:
    shard = ShardDetector(CONFIG, 0, 2)
    texts = make_corpus(20, seed=7)
    signed = shard.detector.sign(texts)
    batch = IndexedBatch([f"d{i}" for i in range(20)], signed, np.ones(20), np.arange(20, dtype=np.uint64))
    shard.answer(batch, sequence_keys(0, 20))

    def change(header: dict[str, Any]) -> None:
        header["state"]["shard"]["stream"] = None

    with pytest.raises(CorruptSnapshotError, match=r"index\.snap"):
        load_shard_snapshot(written(tmp_path, change_header=change, detector=shard), CONFIG, 0, 2)


@pytest.mark.parametrize(
    "change",
    [
        lambda header: header["arrays"][-1].update(shape=[2**64]),
        lambda header: header["arrays"][-1].update(shape=[0, 2**70]),
        lambda header: header["arrays"][-1].update(offset=2**64),
    ],
    ids=["size-past-u64", "size-past-u64-of-none", "offset-past-u64"],
)
def test_a_size_or_offset_numpy_cannot_hold_is_refused(
    tmp_path: Path, change: Callable[[dict[str, Any]], None]
) -> None:
    with pytest.raises(CorruptSnapshotError, match=r"index\.snap"):
        load_snapshot(written(tmp_path, change_header=change), CONFIG)


@pytest.mark.parametrize("read", [lambda path: load_snapshot(path, CONFIG), read_snapshot_metadata])
def test_a_header_nested_past_the_stack_is_refused(tmp_path: Path, read: Callable[[Path], object]) -> None:
    path = tmp_path / "deep.snap"
    SnapshotImage(b"[" * 100_000 + b"]" * 100_000, []).write(path)
    with pytest.raises(CorruptSnapshotError, match=r"deep\.snap"):
        read(path)


def shift_first_offset(header: dict[str, Any]) -> None:
    header["arrays"][0]["offset"] = True  # JSON true: 1 to Python


def overlap_last_array(header: dict[str, Any]) -> None:
    header["arrays"][-1]["offset"] = 0


@pytest.mark.parametrize(
    "change",
    [shift_first_offset, overlap_last_array],
    ids=["offset-true", "offsets-overlapping"],
)
def test_an_array_directory_that_does_not_lay_the_arrays_back_to_back_is_refused(
    tmp_path: Path, change: Callable[[dict[str, Any]], None]
) -> None:
    """The writer lays each array right after the one before: read from anywhere else, its bytes are others'."""
    with pytest.raises(CorruptSnapshotError, match=r"index\.snap"):
        load_snapshot(written(tmp_path, change_header=change), CONFIG)


def test_bytes_after_the_last_array_listed_are_refused(tmp_path: Path) -> None:
    def change(arrays: Arrays) -> None:
        arrays["unlisted"] = np.zeros(3, dtype=np.uint8)

    def unlist(header: dict[str, Any]) -> None:
        header["arrays"].pop()

    with pytest.raises(CorruptSnapshotError, match="3 bytes of arrays the directory does not list"):
        load_snapshot(written(tmp_path, change, unlist), CONFIG)


def test_an_array_listed_twice_is_refused(tmp_path: Path) -> None:
    """Else the second would stand for the first, whose bytes nothing would read."""

    def change(arrays: Arrays) -> None:
        arrays["again"] = arrays["generation0.sources"]

    def rename(header: dict[str, Any]) -> None:
        header["arrays"][-1]["name"] = "generation0.sources"

    with pytest.raises(CorruptSnapshotError, match="named twice"):
        load_snapshot(written(tmp_path, change, rename), CONFIG)


@pytest.mark.parametrize("dtype", ["|O", "|V8", "<U2", "<M8[s]", "<c16"])
def test_an_array_of_a_dtype_that_is_not_a_number_is_refused(tmp_path: Path, dtype: str) -> None:
    def change(header: dict[str, Any]) -> None:
        header["arrays"][-1]["dtype"] = dtype
        header["arrays"][-1]["shape"] = [0]

    with pytest.raises(CorruptSnapshotError, match="not a number's"):
        load_snapshot(written(tmp_path, change_header=change), CONFIG)


@pytest.mark.parametrize(
    "name", ["sketches", "key_highs", "sources", "id_ends", "docs", "fingerprints", "entries", "shingle_values"]
)
@pytest.mark.parametrize("dtype", ["<f8", ">u8", "<i4"])
def test_an_index_array_of_another_dtype_is_refused(tmp_path: Path, name: str, dtype: str) -> None:
    """Cast on restore, its values would be other than written (a float's, a byte-swapped number's)."""

    def change(arrays: Arrays) -> None:
        arrays[f"generation0.{name}"] = arrays[f"generation0.{name}"].astype(dtype)

    with pytest.raises(CorruptSnapshotError, match=rf"generation0\.{name} is {dtype}"):
        load_snapshot(written(tmp_path, change), CONFIG)


def test_id_ends_of_uint64_as_written_before_ids_were_sealed_still_load(tmp_path: Path) -> None:
    def change(arrays: Arrays) -> None:
        arrays["generation0.id_ends"] = arrays["generation0.id_ends"].astype("<u8")

    detector, _ = load_snapshot(written(tmp_path, change), CONFIG)
    assert detector.index.ids_of(np.array([0, 29], dtype=np.int64)) == ["d0", "d29"]


SIMHASH = DetectionConfig(method="simhash")


@pytest.mark.parametrize("name", ["fingerprints", "sources", "skipped", "id_bytes", "id_ends"])
def test_a_hamming_index_array_of_another_dtype_is_refused(tmp_path: Path, name: str) -> None:
    simhash = make_detector(SIMHASH)
    simhash.process([f"d{i}" for i in range(10)], make_corpus(10, seed=6))

    def change(arrays: Arrays) -> None:
        arrays[f"generation0.{name}"] = arrays[f"generation0.{name}"].astype("<f8")

    with pytest.raises(CorruptSnapshotError, match=rf"generation0\.{name} is <f8"):
        load_snapshot(written(tmp_path, change, detector=simhash), SIMHASH)


def test_a_hamming_index_export_of_another_format_is_refused_naming_the_file(tmp_path: Path) -> None:
    """Refused as incompatible, it stops the stage (as a snapshot of another format does): the file must be named."""
    simhash = make_detector(SIMHASH)
    simhash.process([f"d{i}" for i in range(10)], make_corpus(10, seed=6))

    def earlier_format(header: dict[str, Any]) -> None:
        header["state"]["hamming"]["format"] = "stream-dedup/hamming-index/1"

    path = written(tmp_path, change_header=earlier_format, detector=simhash)
    with pytest.raises(IncompatibleSnapshotError, match=rf"^{re.escape(str(path))}: .*hamming-index/1"):
        load_snapshot(path, SIMHASH)


def shard_of(documents: int) -> ShardDetector:
    shard = ShardDetector(CONFIG, 0, 2)
    signed = shard.detector.sign(make_corpus(documents, seed=7))
    ids = [f"d{i}" for i in range(documents)]
    shard.answer(
        IndexedBatch(ids, signed, np.ones(documents), np.arange(documents, dtype=np.uint64)),
        sequence_keys(0, documents),
    )
    return shard


@pytest.mark.parametrize(
    "keys",
    [lambda keys: keys[:-1], lambda keys: keys.astype("<f8"), lambda keys: keys.astype("<u8")],
    ids=["one-short", "float", "unsigned"],
)
def test_shard_sequence_keys_that_are_not_one_int64_per_document_are_refused(
    tmp_path: Path, keys: Callable[[np.ndarray], np.ndarray]
) -> None:
    def change(arrays: Arrays) -> None:
        arrays["shard.keys.0"] = keys(arrays["shard.keys.0"])

    with pytest.raises(CorruptSnapshotError, match="sequence keys of the generation from 0"):
        load_shard_snapshot(written(tmp_path, change, detector=shard_of(20)), CONFIG, 0, 2)


def test_shard_sequence_keys_of_a_generation_not_held_are_refused(tmp_path: Path) -> None:
    def change(arrays: Arrays) -> None:
        arrays["shard.keys.99"] = np.zeros(0, dtype=np.int64)

    def list_it(header: dict[str, Any]) -> None:
        header["state"]["shard"]["key_generations"].append(99)

    with pytest.raises(CorruptSnapshotError, match=r"generations \[0, 99\], held \[0\]"):
        load_shard_snapshot(written(tmp_path, change, list_it, detector=shard_of(20)), CONFIG, 0, 2)


def test_a_shard_snapshot_rewritten_unchanged_loads_with_its_keys(tmp_path: Path) -> None:
    shard = shard_of(20)
    restored, _ = load_shard_snapshot(written(tmp_path, detector=shard), CONFIG, 0, 2)
    assert restored.generation_keys[0].values.tolist() == shard.generation_keys[0].values.tolist()


@pytest.mark.parametrize(
    "change",
    [
        lambda header: header["state"].update(hot_bucket_skips="many"),
        lambda header: header["state"].update(evicted_documents=-5),
        lambda header: header["state"]["stats"].update(documents="30"),
        lambda header: header["state"]["stats"].update(duplicates=True),
        lambda header: header["state"]["generations"][0].update(base_seq="0"),
        lambda header: header["state"]["generations"][0].update(base_seq=0.5),
        lambda header: header["state"]["generations"][0].update(first_event_time="1.0"),
        lambda header: header["state"]["generations"][0].update(last_event_time=float("nan")),
    ],
    ids=[
        "skips-string",
        "evicted-negative",
        "stats-string",
        "stats-boolean",
        "base-seq-string",
        "base-seq-float",
        "time-string",
        "time-nan",
    ],
)
def test_a_count_or_time_of_another_json_type_is_refused(
    tmp_path: Path, change: Callable[[dict[str, Any]], None]
) -> None:
    """Loaded as they are, such values fail the stage, or number documents wrong, long after the load."""
    with pytest.raises(CorruptSnapshotError, match=r"not a (count|number)"):
        load_snapshot(written(tmp_path, change_header=change), CONFIG)


def three_generations() -> Detector:
    """60 documents in generations of 20 (retention of 60 documents seals one every 20)."""
    detector = Detector(DetectionConfig(**{**CONFIG.__dict__, "max_documents": 60}))
    texts = make_corpus(60, seed=6)
    for start in range(0, 60, 20):
        detector.process([f"d{i}" for i in range(start, start + 20)], texts[start : start + 20])
    return detector


@pytest.mark.parametrize("base_seq", [0, 25])
def test_generations_that_do_not_number_their_documents_on_from_each_other_are_refused(
    tmp_path: Path, base_seq: int
) -> None:
    """Overlapping, one sequence number would name two documents; with a gap, none."""
    detector = three_generations()
    assert [len(generation) for generation in detector.index.history.items][:3] == [20, 20, 20]

    def change(header: dict[str, Any]) -> None:
        header["state"]["generations"][1]["base_seq"] = base_seq

    with pytest.raises(CorruptSnapshotError, match=f"numbers its documents from {base_seq}, not from 20"):
        load_snapshot(written(tmp_path, change_header=change, detector=detector), detector.config)


def test_an_index_of_no_generation_is_refused(tmp_path: Path) -> None:
    def change(header: dict[str, Any]) -> None:
        header["state"]["generations"] = []

    with pytest.raises(CorruptSnapshotError, match="holds no generation"):
        load_snapshot(written(tmp_path, change_header=change, detector=Detector(CONFIG)), CONFIG)


@pytest.mark.parametrize(
    "change",
    [
        lambda stream: stream.update(evicted_documents="0"),
        lambda stream: stream["stretches"][0].update(documents=-1),
        lambda stream: stream["stretches"][0].update(id_bytes=1.5),
    ],
    ids=["evicted-string", "documents-negative", "id-bytes-float"],
)
def test_a_shard_stream_count_of_another_json_type_is_refused(
    tmp_path: Path, change: Callable[[dict[str, Any]], None]
) -> None:
    def change_stream(header: dict[str, Any]) -> None:
        change(header["state"]["shard"]["stream"])

    with pytest.raises(CorruptSnapshotError, match="not a count"):
        load_shard_snapshot(written(tmp_path, change_header=change_stream, detector=shard_of(20)), CONFIG, 0, 2)


@pytest.mark.parametrize(
    "change",
    [
        lambda arrays: arrays["generation0.entries"].__setitem__(0, 2**36),
        lambda arrays: arrays["generation0.entries"].__setitem__(0, arrays["generation0.entries"][0] - 1),
        lambda arrays: (
            arrays["generation0.fingerprints"]
            .reshape(-1)
            .__setitem__(int(np.flatnonzero(arrays["generation0.docs"].reshape(-1))[0]), 0)
        ),
    ],
    ids=["entries-of-terabytes", "entries-one-short", "document-without-fingerprint"],
)
def test_band_tables_that_do_not_count_their_entries_are_refused(
    tmp_path: Path, change: Callable[[Arrays], None]
) -> None:
    """The count decides when a table grows: one of 2**36 had the next batch ask for terabytes."""
    with pytest.raises(CorruptSnapshotError, match="generation 0"):
        load_snapshot(written(tmp_path, change), CONFIG)


def fill_the_last_slot_of_every_bucket(arrays: Arrays, band: int, documents: int = 30) -> None:
    """Band ``band``'s tables with the last slot of each bucket used (by a stored document), counted right."""
    docs, fingerprints = arrays["generation0.docs"][band], arrays["generation0.fingerprints"][band]
    docs[:, -1] = np.arange(docs.shape[0]) % documents + 1
    fingerprints[:, -1] = 1  # odd, as a stored key's
    arrays["generation0.entries"][band] = np.count_nonzero(arrays["generation0.fingerprints"][band])


def fill_every_slot(arrays: Arrays) -> None:
    docs, fingerprints = arrays["generation0.docs"][0], arrays["generation0.fingerprints"][0]
    docs[:] = (np.arange(docs.size) % 30 + 1).reshape(docs.shape)
    fingerprints[:] = 1
    arrays["generation0.entries"][0] = docs.size


@pytest.mark.parametrize(
    "change",
    [fill_every_slot, lambda arrays: fill_the_last_slot_of_every_bucket(arrays, band=3)],
    ids=["every-slot", "last-slot-of-every-bucket"],
)
def test_a_band_table_whose_every_bucket_ends_used_is_refused(tmp_path: Path, change: Callable[[Arrays], None]) -> None:
    """A lookup moves on from a bucket whose last slot is used: in such a band, it looked for a new key forever.

    Tables never get there (they fill each bucket from its first slot, and grow at 75% full); loaded, the
    stage hung on its first batch, without a word.
    """
    with pytest.raises(CorruptSnapshotError, match="generation 0"):
        load_snapshot(written(tmp_path, change), CONFIG)


def test_band_tables_with_a_free_last_slot_somewhere_in_each_band_still_load(tmp_path: Path) -> None:
    """Full buckets are legitimate (an entry then goes on to the next): only a band of nothing else is refused."""

    def all_but_one(arrays: Arrays) -> None:
        fill_the_last_slot_of_every_bucket(arrays, band=3)
        arrays["generation0.docs"][3, 0, -1] = arrays["generation0.fingerprints"][3, 0, -1] = 0
        arrays["generation0.entries"][3] -= 1

    detector, _ = load_snapshot(written(tmp_path, all_but_one), CONFIG)
    assert len(detector) == 30


@pytest.mark.parametrize(
    "change",
    [
        lambda stream: stream.update(stretches=[]),
        lambda stream: stream["stretches"][1].update(base_seq=stream["stretches"][0]["base_seq"]),
    ],
    ids=["no-stretch", "stretches-overlapping"],
)
def test_a_shard_stream_measure_that_does_not_number_the_stream_on_is_refused(
    tmp_path: Path, change: Callable[[dict[str, Any]], None]
) -> None:
    """With no stretch, the shard failed on its first batch; overlapping, it would evict at the wrong time."""
    shard = ShardDetector(DetectionConfig(**{**CONFIG.__dict__, "max_documents": 40}), 0, 2)
    texts = make_corpus(60, seed=3)
    for start in range(0, 60, 20):
        signed = shard.detector.sign(texts[start : start + 20])
        ids = [f"d{i}" for i in range(start, start + 20)]
        batch = IndexedBatch(ids, signed, np.ones(20), np.arange(20, dtype=np.uint64))
        shard.answer(batch, sequence_keys(start, 20))

    def change_stream(header: dict[str, Any]) -> None:
        change(header["state"]["shard"]["stream"])

    with pytest.raises(CorruptSnapshotError, match="the stream's measure"):
        load_shard_snapshot(written(tmp_path, change_header=change_stream, detector=shard), shard.detector.config, 0, 2)
