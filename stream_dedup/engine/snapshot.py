"""Snapshots of the whole index: versioned, checksummed, written atomically, no pickle.

Layout of a snapshot file::

    b"SDEDUPSN"  magic
    u32          format version (little-endian)
    u64          header length
    header       UTF-8 JSON: signature parameters, detector state, array
                 directory (name, dtype, shape, offset, length), caller metadata
    arrays       raw little-endian array bytes, back to back
    16 bytes     XXH3-128 of everything above
    b"SDEDUPEN"  end magic

Loading checks, in order: the end magic (a truncated file fails here), the
checksum (a flipped bit anywhere fails here), the format version, then every
signature parameter against the running configuration, so a snapshot made
with other settings is refused with the name of the parameter that differs.
Past the checksum (a writer's bug, a hand-made file), the directory must lay
arrays of numbers back to back over the bytes, each named once, and each
index array must agree with the others. Nothing is loaded silently when it
is not exactly what was written.

A shard of a sharded stage (:class:`~stream_dedup.engine.sharding.ShardDetector`)
is snapshotted in the same file format: its index as above, plus the header's
``state.shard`` (``shards``, ``shard_index``, ``index_slots`` and the stream
measure its retention follows) and an array of sequence keys per generation.
:func:`load_shard_snapshot` refuses one of another shard, shard count, slot
count or signature parameters with :class:`ForeignSnapshotError` naming the
setting, and :func:`load_snapshot` refuses a shard's (it holds part of an index).

Writing goes to a temporary file in the same directory, is fsynced, renamed
over the target and the directory fsynced: a crash at any moment leaves
either the old snapshot or the new one, never a torn file under the name;
the temporary of a write killed with its process is left, and removed by
the next process to open the directory (:func:`abandoned_temporaries`).
"""

import io
import itertools
import json
import math
import os
import re
import stat
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xxhash

from stream_dedup.config import DetectionConfig, banding_kept, signature_difference
from stream_dedup.engine.detection import DetectorStats, DuplicateDetector
from stream_dedup.engine.detector import Detector
from stream_dedup.engine.sharding import ShardDetector
from stream_dedup.engine.simhash_detector import SimHashDetector, hamming_index
from stream_dedup.errors import CorruptSnapshotError, ForeignSnapshotError, IncompatibleSnapshotError
from stream_dedup.lsh.arena import Arena, ends_fit, ids_fit
from stream_dedup.lsh.band_table import BUCKET_SLOTS
from stream_dedup.lsh.generation import Generation
from stream_dedup.lsh.hamming import HammingIndex
from stream_dedup.lsh.index import BandIndex
from stream_dedup.lsh.retention import GenerationList, Stretch

MAGIC = b"SDEDUPSN"
END_MAGIC = b"SDEDUPEN"
#: 2: one-bit sketches, key halves and sources per document instead of 8-bit signatures.
FORMAT_VERSION = 2
_PREFIX = struct.Struct("<8sIQ")
_DIGEST_BYTES = 16
_TABLE_ARRAYS = ("docs", "fingerprints", "entries")
#: A write in progress is ``.NAME.tmp-PID-THREAD`` beside its target, renamed over it once whole.
_TEMPORARY = re.compile(r"\..+\.sds\.tmp-(\d+)-(\d+)")


@dataclass(frozen=True)
class SnapshotImage:
    """A detector's state frozen at one moment, ready to be written to a file.

    Capturing is quick (it copies only what later batches change in place);
    writing is slow (hundreds of megabytes, fsynced) and may run on another
    thread while the detector goes on processing.
    """

    header_bytes: bytes
    arrays: list[tuple[str, np.ndarray]]

    def write(self, path: str | os.PathLike[str]) -> int:
        """Write the snapshot to ``path`` atomically; return the file size."""
        target = Path(path)
        temporary = target.with_name(f".{target.name}.tmp-{os.getpid()}-{threading.get_ident()}")
        try:
            size = _write(temporary, self.header_bytes, self.arrays)
            os.replace(temporary, target)
        except BaseException:
            # A failed write (full disk, interrupted) must not leave a stray temporary behind.
            temporary.unlink(missing_ok=True)
            raise
        _fsync_directory(target.parent)
        return size


def abandoned_temporaries(directory: Path) -> list[Path]:
    """Temporaries in ``directory`` of writes that died with their process (kill -9, the OOM killer) or thread.

    Never renamed, never used, each as large as a snapshot: nothing else
    removes them. A temporary of this process's id but of no thread of it
    is a dead process's too: a restarted container's process has its pid.
    """
    found = []
    for path in directory.glob(".*.sds.tmp-*"):
        match = _TEMPORARY.fullmatch(path.name)
        if match is not None and not _writing(int(match[1]), int(match[2])):
            found.append(path)
    return found


def _writing(pid: int, thread: int) -> bool:
    """Whether the thread ``thread`` of process ``pid`` may still be writing (another process: if it lives)."""
    if pid == os.getpid():
        return any(t.ident == thread for t in threading.enumerate())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


#: What a snapshot holds: a whole index, or one shard's part of it.
Snapshotted = DuplicateDetector | ShardDetector


def capture_snapshot(detector: Snapshotted, metadata: dict[str, Any] | None = None) -> SnapshotImage:
    """Freeze ``detector``'s state for :meth:`SnapshotImage.write`.

    ``metadata`` (JSON-serialisable) is stored as is: the Kafka stage keeps
    the input and changelog positions the snapshot covers there.
    """
    shard = detector if isinstance(detector, ShardDetector) else None
    whole = detector.detector if isinstance(detector, ShardDetector) else detector
    state: dict[str, Any]
    if isinstance(whole, SimHashDetector):
        # The export copies every array: the fingerprints are few bytes per document.
        hamming, exported = whole.index.export()
        arrays, state = list(exported.items()), {"hamming": hamming}
    elif isinstance(whole, Detector):
        arrays, generations = _collect_arrays(whole.index)
        state = {
            "generations": generations,
            "hot_bucket_skips": whole.index.hot_bucket_skips,
            "evicted_documents": whole.index.evicted_documents,
            "newest_event_time": _finite_or_none(whole.index.history.newest_event_time),
        }
    else:
        raise TypeError(f"cannot snapshot a {type(whole).__name__}")
    if shard is not None:
        # Filled rows of an arena never change, so the keys need no copy (as the arenas above).
        arrays += [(f"shard.keys.{base}", keys.values) for base, keys in shard.generation_keys.items()]
        state["shard"] = _shard_state(shard)
    directory, offset = [], 0
    for name, array in arrays:
        directory.append({"name": name, "dtype": array.dtype.str, "shape": list(array.shape), "offset": offset})
        offset += array.nbytes
    header = {
        "parameters": whole.config.signature_parameters(),
        "config": asdict(whole.config),
        "state": {**state, "stats": asdict(whole.stats)},
        "arrays": directory,
        "metadata": metadata or {},
    }
    return SnapshotImage(json.dumps(header, sort_keys=True).encode("utf-8"), arrays)


def _shard_state(shard: ShardDetector) -> dict[str, Any]:
    """Which shard this is, and the measure of the whole stream its generations follow."""
    stream = shard.stream
    return {
        "shards": shard.shards,
        "shard_index": shard.shard,
        "index_slots": shard.detector.config.index_slots,
        "key_generations": list(shard.generation_keys),
        "stream": {
            "stretches": [
                {
                    "base_seq": stretch.base_seq,
                    "documents": stretch.documents,
                    "id_bytes": stretch.id_bytes,
                    "first_event_time": _finite_or_none(stretch.first_event_time),
                    "last_event_time": _finite_or_none(stretch.last_event_time),
                }
                for stretch in stream.items
            ],
            "evicted_documents": stream.evicted_documents,
            "newest_event_time": _finite_or_none(stream.newest_event_time),
        },
    }


def save_snapshot(detector: Snapshotted, path: str | os.PathLike[str], metadata: dict[str, Any] | None = None) -> int:
    """Write ``detector``'s whole state to ``path`` atomically; return the file size."""
    return capture_snapshot(detector, metadata).write(path)


def _write(temporary: Path, header_bytes: bytes, arrays: list[tuple[str, np.ndarray]]) -> int:
    """Write prefix, header, arrays, checksum and end marker to ``temporary``, fsynced; return the size."""
    digest = xxhash.xxh3_128()
    with open(temporary, "wb") as out:
        for chunk in (_PREFIX.pack(MAGIC, FORMAT_VERSION, len(header_bytes)), header_bytes):
            digest.update(chunk)
            out.write(chunk)
        for _, array in arrays:
            data = np.ascontiguousarray(array).reshape(-1).view(np.uint8).data
            digest.update(data)
            out.write(data)
        out.write(digest.digest())
        out.write(END_MAGIC)
        out.flush()
        os.fsync(out.fileno())
        return out.tell()


def load_snapshot(path: str | os.PathLike[str], config: DetectionConfig) -> tuple[DuplicateDetector, dict[str, Any]]:
    """Read a snapshot written by :func:`save_snapshot` for a detector with ``config``.

    Returns the restored detector and the metadata saved with it. Raises
    :class:`CorruptSnapshotError` for a damaged or foreign file,
    :class:`IncompatibleSnapshotError` for one made with other signature
    parameters and :class:`ForeignSnapshotError` for a shard's.
    """
    source = Path(path)
    with malformed_as_corrupt(source):
        header, arrays = _read(source)
        state = header["state"]
        if "shard" in state:
            raise ForeignSnapshotError(
                f"{source} holds shard {state['shard']['shard_index']} of {state['shard']['shards']} of an index, "
                "not a whole one: a shard's snapshots belong in its own directory (SNAPSHOT_DIR/shard-K)"
            )
        _check_parameters(source, header["parameters"], config.signature_parameters())
        detector: DuplicateDetector
        if config.method == "simhash":
            hamming = HammingIndex.restore(state["hamming"], arrays, hamming_index(config))
            _check_numbering(hamming.history, "the index")
            detector = SimHashDetector(config, hamming)
        else:
            detector = Detector(config)
            _restore_index(detector, state, arrays)
        detector.stats = _stats(state["stats"])
        return detector, _metadata(source, header)


def read_snapshot_metadata(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The caller's metadata saved with a snapshot, checked by its checksum, whatever its parameters.

    Says whose a snapshot is without restoring it: one of other signature
    parameters may be another group's, in a snapshot directory shared.
    Raises :class:`CorruptSnapshotError` as the loaders do.
    """
    source = Path(path)
    with malformed_as_corrupt(source):
        header, _ = _read(source, arrays_wanted=False)
        return _metadata(source, header)


def load_shard_snapshot(
    path: str | os.PathLike[str], config: DetectionConfig, shard: int, shards: int
) -> tuple[ShardDetector, dict[str, Any]]:
    """Read a shard's snapshot for shard ``shard`` of ``shards`` with ``config``.

    Raises :class:`CorruptSnapshotError` for a damaged or foreign file and
    :class:`ForeignSnapshotError`, naming the setting, for a snapshot of a whole
    index or of another ``shards``, ``shard_index``, ``index_slots`` or
    signature parameters: a shard can always rebuild from the sequenced topic
    instead, so none of these needs to stop it.
    """
    source = Path(path)
    with malformed_as_corrupt(source):
        header, arrays = _read(source)
        restored = _restore_shard(source, header, arrays, config, shard, shards)
        return restored, _metadata(source, header)


def _restore_shard(
    source: Path,
    header: dict[str, Any],
    arrays: dict[str, np.ndarray],
    config: DetectionConfig,
    shard: int,
    shards: int,
) -> ShardDetector:
    """Shard ``shard`` of ``shards`` as the snapshot ``source`` holds it (see :func:`load_shard_snapshot`)."""
    state = header["state"]
    made_by = state.get("shard")
    if made_by is None:
        raise ForeignSnapshotError(f"{source} holds a whole index, not a shard's part of one (setting role)")
    running = {"shards": shards, "shard_index": shard, "index_slots": config.index_slots}
    for name, value in running.items():
        if made_by[name] != value:
            raise ForeignSnapshotError(
                f"{source} was made with {name}={made_by[name]} but this shard runs with {name}={value}: "
                "it holds other documents"
            )
    try:
        _check_parameters(source, header["parameters"], config.signature_parameters())
    except IncompatibleSnapshotError as error:
        raise ForeignSnapshotError(str(error)) from error
    restored = ShardDetector(config, shard, shards)
    if isinstance(restored.detector, SimHashDetector):
        HammingIndex.restore(state["hamming"], arrays, restored.detector.index)
        _check_numbering(restored.detector.index.history, "the index")
    else:
        _restore_index(restored.detector, state, arrays)
    restored.detector.stats = _stats(state["stats"])
    restored.generation_keys = _shard_keys(restored, made_by["key_generations"], arrays)
    stream = made_by["stream"]
    restored.stream.items = [_restore_stretch(meta) for meta in stream["stretches"]]
    _check_numbering(restored.stream, "the stream's measure")
    restored.stream.evicted_documents = _count(stream["evicted_documents"], "stream.evicted_documents")
    restored.stream.newest_event_time = _none_to(stream["newest_event_time"], float("-inf"))
    return restored


def _shard_keys(restored: ShardDetector, bases: list[int], arrays: dict[str, np.ndarray]) -> dict[int, Arena]:
    """The sequence keys of each of ``restored``'s generations (by base): int64, one per document it holds.

    Restored otherwise, the shard would answer with other documents' keys,
    or fail on its first match in a generation without enough of them.
    """
    held = {generation.base_seq: len(generation) for generation in restored.detector.index.history.items}
    keys = {base: arrays[f"shard.keys.{base}"] for base in bases}
    for base, documents in held.items():
        found = keys.get(base, np.empty(0, dtype=np.int64))
        if found.dtype != np.int64 or found.shape != (documents,):
            raise CorruptSnapshotError(
                f"snapshot: the sequence keys of the generation from {base} are {found.dtype.str} of shape "
                f"{found.shape}, not one int64 per each of its {documents} documents"
            )
    if not keys.keys() <= held.keys():
        raise CorruptSnapshotError(f"snapshot: sequence keys of generations {sorted(keys)}, held {sorted(held)}")
    return {base: Arena.of(values) for base, values in keys.items()}


@contextmanager
def malformed_as_corrupt(source: Path) -> Iterator[None]:
    """Reading ``source``: a header of the wrong shape or JSON types is a corrupt snapshot, not a crash.

    Its checksum passed, so only a writer's bug or a hand-made file gets here;
    the store then skips it for an older snapshot, as for a flipped bit. Every
    such error names ``source`` (the index's own checks do not know it), as
    does an index export of another format: that one stops the stage, and the
    operator must know which file to move away.
    """
    try:
        yield
    except (CorruptSnapshotError, IncompatibleSnapshotError) as error:
        if str(error).startswith(str(source)):
            raise
        raise type(error)(f"{source}: {error}") from error
    # A size past what numpy can hold raises OverflowError; a header nested past Python's stack, RecursionError.
    except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError, RecursionError) as error:
        raise CorruptSnapshotError(
            f"{source} does not hold what a snapshot holds ({error!r}): move it away "
            "(an older snapshot, or the changelog, is used instead)"
        ) from error


def _metadata(source: Path, header: dict[str, Any]) -> dict[str, Any]:
    """The caller's metadata saved with the snapshot, which must be a JSON object."""
    metadata = header["metadata"]
    if not isinstance(metadata, dict):
        raise CorruptSnapshotError(f"{source} has metadata {str(metadata)[:40]}, not a JSON object: move it away")
    return metadata


def _read(source: Path, arrays_wanted: bool = True) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The verified header and the arrays (none unless ``arrays_wanted``), each read from the file into its own.

    The file is read a piece at a time, never whole: held whole beside the
    arrays copied out of it, a restore took twice the index's memory at its
    peak, past the headroom the deploy sizes beside the index (a quarter),
    and an index that had grown to its limit was killed at every restart,
    which no older snapshot can help. Sizes are checked against the file's
    before anything is allocated, and nothing is trusted before the checksum
    is: a directory that cannot be read still has the rest of the file hashed,
    so that a flipped bit is said to be one.
    """
    with _opened(source) as file:
        size = os.fstat(file.fileno()).st_size
        prefix = file.read(_PREFIX.size)
        if size < _PREFIX.size + _DIGEST_BYTES + len(END_MAGIC) or prefix[: len(MAGIC)] != MAGIC:
            raise CorruptSnapshotError(f"{source} is not a stream-dedup snapshot (bad magic or too short)")
        content_end = size - _DIGEST_BYTES - len(END_MAGIC)
        file.seek(content_end)
        stored_digest, end_magic = file.read(_DIGEST_BYTES), file.read()
        if end_magic != END_MAGIC:
            raise CorruptSnapshotError(f"{source} is truncated (no end marker); delete it or restore a good copy")
        _, version, header_length = _PREFIX.unpack(prefix)
        file.seek(_PREFIX.size)
        header_bytes = file.read(min(header_length, content_end - _PREFIX.size))
        digest = xxhash.xxh3_128(prefix)
        digest.update(header_bytes)
        arrays: dict[str, np.ndarray] = {}
        try:
            header = json.loads(header_bytes.decode("utf-8"))
            if arrays_wanted:
                body = content_end - _PREFIX.size - header_length
                for name, dtype, shape in _directory(header["arrays"], body):
                    arrays[name] = _array_read(file, dtype, shape, digest)
        except (KeyError, IndexError, TypeError, ValueError, AttributeError, OverflowError, RecursionError) as error:
            unreadable: Exception | None = error
        else:
            unreadable = None
        _hash_up_to(file, content_end, digest)
        if digest.digest() != stored_digest:
            raise CorruptSnapshotError(f"{source} fails its checksum: the file is damaged; do not use it")
    if version != FORMAT_VERSION:
        raise IncompatibleSnapshotError(
            f"{source} has snapshot format {version}; this release reads format {FORMAT_VERSION} only, "
            "and never guesses at another. Load it with the release that wrote it, or move it away "
            "and start from an empty index (the Kafka stage then replays its changelog)."
        )
    if unreadable is not None:
        raise unreadable
    return header, arrays


@contextmanager
def _opened(source: Path) -> Iterator[io.BufferedReader]:
    """``source`` open for reading, which must be a regular file (CorruptSnapshotError for anything else of its name).

    Read as a file, a FIFO waited for a writer (the stage hung at its restore
    without a word) and a device such as /dev/zero never ended.
    """
    # Opening a FIFO without O_NONBLOCK waits for a writer; a regular file's reads ignore the flag.
    with open(os.open(source, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:
        if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
            raise CorruptSnapshotError(
                f"{source} is not a regular file: move it away (an older snapshot, or the changelog, is used instead)"
            )
        yield file


def _directory(entries: list[dict[str, Any]], body: int) -> list[tuple[str, np.dtype[Any], list[int]]]:
    """Name, dtype and shape of each array the directory lists: arrays of numbers laid back to back over the
    ``body`` bytes after the header, each named once (ValueError otherwise, before any is allocated)."""
    listed: list[tuple[str, np.dtype[Any], list[int]]] = []
    names: set[str] = set()
    position = 0  # the writer puts the arrays back to back, in the directory's order, and nothing after
    for entry in entries:
        name, dtype, shape, offset = entry["name"], np.dtype(entry["dtype"]), entry["shape"], entry["offset"]
        if dtype.kind not in "biuf" or name in names:
            raise ValueError(f"array {name!r} has dtype {dtype.str}, not a number's, or is named twice")
        if not all(type(size) is int and size >= 0 for size in shape):
            raise ValueError(f"array {name!r} has shape {shape}")  # -1 would let numpy guess
        length = math.prod(shape) * dtype.itemsize
        if type(offset) is not int or offset != position or position + length > body:
            raise ValueError(
                f"array {name!r} of shape {shape} is said to start at byte {offset}; the arrays before it end at "
                f"byte {position}, of {body}"
            )
        listed.append((name, dtype, shape))
        names.add(name)
        position += length
    if position != body:
        raise ValueError(f"{body - position} bytes of arrays the directory does not list")
    return listed


def _array_read(
    file: io.BufferedReader, dtype: np.dtype[Any], shape: list[int], digest: "xxhash.xxh3_128"
) -> np.ndarray:
    """The next array of ``file``, of ``dtype`` and ``shape``, its bytes added to ``digest``."""
    values = np.empty(math.prod(shape), dtype=dtype)
    data = values.view(np.uint8)
    if file.readinto(data.data) != data.size:
        raise ValueError("the file ended inside an array: it changed while it was read")
    digest.update(data.data)
    return values.reshape(shape)


def _hash_up_to(file: io.BufferedReader, end: int, digest: "xxhash.xxh3_128") -> None:
    """Add the bytes of ``file`` from where it is to ``end`` to ``digest``, a megabyte at a time."""
    while (left := end - file.tell()) > 0:
        piece = file.read(min(left, 1 << 20))
        if not piece:
            break
        digest.update(piece)


def _restore_index(detector: Detector, state: dict[str, Any], arrays: dict[str, np.ndarray]) -> None:
    """Fill ``detector``'s empty index (it keeps its own retention) with the snapshot's generations."""
    config = detector.config
    index = detector.index
    index.history.items = [
        _restore_generation(config, detector, meta, arrays, i) for i, meta in enumerate(state["generations"])
    ]
    _check_numbering(index.history, "the index")
    index.hot_bucket_skips = _count(state["hot_bucket_skips"], "hot_bucket_skips")
    index.history.evicted_documents = _count(state["evicted_documents"], "evicted_documents")
    index.history.newest_event_time = _none_to(state["newest_event_time"], float("-inf"))


def _restore_stretch(meta: dict[str, Any]) -> Stretch:
    stretch = Stretch(_count(meta["base_seq"], "stretch base_seq"))
    stretch.documents = _count(meta["documents"], "stretch documents")
    stretch.id_bytes = _count(meta["id_bytes"], "stretch id_bytes")
    stretch.first_event_time = _none_to(meta["first_event_time"], float("inf"))
    stretch.last_event_time = _none_to(meta["last_event_time"], float("-inf"))
    return stretch


def _collect_arrays(index: BandIndex) -> tuple[list[tuple[str, np.ndarray]], list[dict[str, Any]]]:
    arrays: list[tuple[str, np.ndarray]] = []
    generations = []
    newest = index.generations[-1]
    for i, generation in enumerate(index.generations):
        for name, array in _generation_arrays(generation).items():
            # Later batches write into the newest generation's band tables in
            # place; everything else (older generations, the arenas' filled
            # rows) stays as it is, so only those tables need a copy.
            in_place = generation is newest and name in _TABLE_ARRAYS
            arrays.append((f"generation{i}.{name}", array.copy() if in_place else array))
        generations.append(
            {
                "base_seq": generation.base_seq,
                "first_event_time": _finite_or_none(generation.first_event_time),
                "last_event_time": _finite_or_none(generation.last_event_time),
            }
        )
    return arrays, generations


def _generation_arrays(generation: Generation) -> dict[str, np.ndarray]:
    """Everything a generation holds, by name: what a snapshot stores and restores."""
    arrays = {
        "sketches": generation.sketches.values,
        "key_highs": generation.key_highs.values,
        "sources": generation.sources.values,
        "id_bytes": generation.ids.bytes.values,
        "id_ends": generation.ids.ends.values,
        "docs": generation.tables.docs,
        "fingerprints": generation.tables.fingerprints,
        "entries": generation.tables.entries,
    }
    if generation.shingles is not None:
        arrays["shingle_values"] = generation.shingles.values.values
        arrays["shingle_ends"] = generation.shingles.ends.values
    if generation.fingerprints is not None:
        arrays["simhash_fingerprints"] = generation.fingerprints.values
    if generation.set_sizes is not None:
        arrays["set_sizes"] = generation.set_sizes.values
    return arrays


def _restore_generation(
    config: DetectionConfig, detector: Detector, meta: dict[str, Any], arrays: dict[str, np.ndarray], i: int
) -> Generation:
    generation = Generation(
        config.sketch_bits // 8,
        detector.banding.bands + 1,
        _count(meta["base_seq"], f"generation {i}'s base_seq"),
        detector.exact,
        keep_fingerprints=config.uses_simhash,
        keep_set_sizes=detector.index.keep_set_sizes,
    )
    kept_as = {name: values.dtype for name, values in _generation_arrays(generation).items()}
    parts = _generation_parts(detector, arrays, i, kept_as)
    generation.sketches = Arena.of(parts["sketches"])
    generation.key_highs = Arena.of(parts["key_highs"])
    generation.sources = Arena.of(parts["sources"])
    generation.ids.bytes = Arena.of(parts["id_bytes"])
    # uint64 before ids were sealed at 2 GiB.
    generation.ids.ends = Arena.of(parts["id_ends"].astype(np.uint32, copy=False))
    generation.tables.docs = parts["docs"]
    generation.tables.fingerprints = parts["fingerprints"]
    generation.tables.entries = parts["entries"]
    if generation.shingles is not None:
        generation.shingles.values = Arena.of(parts["shingle_values"])
        generation.shingles.ends = Arena.of(parts["shingle_ends"])
    if generation.fingerprints is not None:
        generation.fingerprints = Arena.of(parts["simhash_fingerprints"])
    if generation.set_sizes is not None:
        generation.set_sizes = Arena.of(parts["set_sizes"])
    generation.first_event_time = _none_to(meta["first_event_time"], float("inf"))
    generation.last_event_time = _none_to(meta["last_event_time"], float("-inf"))
    return generation


def _generation_parts(
    detector: Detector, arrays: dict[str, np.ndarray], i: int, kept_as: dict[str, np.dtype[Any]]
) -> dict[str, np.ndarray]:
    """Generation ``i``'s arrays, by name, checked against each other as ``HammingIndex.restore`` checks its own.

    Every array has the dtype a generation keeps it in (``kept_as``), every
    per-document array has a row per sketch, the ends cut their bytes in
    order, the band tables are of the running bands, name stored documents
    only and count their entries right: restored otherwise, they would answer
    for the wrong documents, or grow without bound.
    """
    index = detector.index
    names = _generation_names(detector.exact, detector.config.uses_simhash, index.keep_set_sizes)
    try:
        parts = {name: arrays[f"generation{i}.{name}"] for name in names}
    except KeyError as missing:
        raise CorruptSnapshotError(f"snapshot lacks array {missing}") from None
    for name, values in parts.items():
        # Id ends were uint64 before ids were sealed at 2 GiB (see _restore_generation).
        if values.dtype != kept_as[name] and not (name == "id_ends" and values.dtype == np.uint64):
            raise CorruptSnapshotError(
                f"snapshot: array generation{i}.{name} is {values.dtype.str}, not {kept_as[name].str}"
            )
    documents = parts["sketches"].shape[0] if parts["sketches"].ndim else -1
    tables = detector.banding.bands + 1
    rows = {"sketches": (detector.config.sketch_bits // 8,), "key_highs": (tables,), "sources": ()}
    rows.update({name: () for name in ("simhash_fingerprints", "set_sizes") if name in parts})
    docs = parts["docs"]
    consistent = (
        all(parts[name].shape == (documents, *row) for name, row in rows.items())
        and parts["id_bytes"].ndim == 1
        and ids_fit(parts["id_ends"], parts["id_bytes"], documents)
        and ("shingle_ends" not in parts or _shingles_fit(parts, documents))
        and docs.ndim == 3
        and docs.shape[0] == tables
        and docs.shape[2] == BUCKET_SLOTS
        and docs.shape == parts["fingerprints"].shape
        and parts["entries"].shape == (tables,)
        and (docs.size == 0 or int(docs.max()) <= documents)
        and _tables_count_their_entries(docs, parts["fingerprints"], parts["entries"])
        and _probes_end(parts["fingerprints"])
    )
    if not consistent:
        raise CorruptSnapshotError(f"snapshot: arrays of generation {i} do not hold {documents} documents alike")
    return parts


def _tables_count_their_entries(docs: np.ndarray, fingerprints: np.ndarray, entries: np.ndarray) -> bool:
    """Whether a slot holds a document exactly where it holds a fingerprint, and ``entries`` counts them per band.

    The count decides when a table grows, and by how much: one too high
    would have the next batch allocate terabytes. A band at a time: masks of
    the whole tables took half their size again at the restore's peak.
    """
    for band, (band_docs, band_fingerprints) in enumerate(zip(docs, fingerprints, strict=True)):
        used = band_fingerprints != 0
        if not (used == (band_docs != 0)).all() or entries[band] != np.count_nonzero(used):
            return False
    return True


def _probes_end(fingerprints: np.ndarray) -> bool:
    """Whether each band has a bucket whose last slot is free, where a lookup of a key not stored stops.

    A lookup goes on to the next bucket (wrapping around) from one whose last
    slot is used: in a band of no other, it looked for a new key forever, and
    the stage hung on its first batch. Tables fill buckets from their first
    slot and grow at 75% full, so a whole one always has such a bucket.
    """
    return bool((fingerprints[:, :, -1] == 0).any(axis=1).all())


def _generation_names(exact: bool, simhash: bool, set_sizes: bool) -> list[str]:
    """The arrays a generation of a detector keeping these stores (see :func:`_generation_arrays`)."""
    names = ["sketches", "key_highs", "sources", "id_bytes", "id_ends", *_TABLE_ARRAYS]
    names += ["shingle_values", "shingle_ends"] if exact else []
    names += ["simhash_fingerprints"] if simhash else []
    names += ["set_sizes"] if set_sizes else []
    return names


def _shingles_fit(parts: dict[str, np.ndarray], documents: int) -> bool:
    return parts["shingle_values"].ndim == 1 and ends_fit(
        parts["shingle_ends"], parts["shingle_values"].size, documents
    )


def _check_parameters(source: Path, stored: dict[str, Any], running: dict[str, Any]) -> None:
    difference = signature_difference(stored, running)
    if difference is not None:
        name, made_with, runs_with = difference
        raise IncompatibleSnapshotError(
            f"{source} was made with {name}={made_with!r} but this run uses "
            f"{name}={runs_with!r}; its signatures are not comparable. Run with the snapshot's "
            f"settings{banding_kept(name, stored)}, or start from an empty index: move the snapshot away "
            "(the Kafka stage's changelog holds the same signatures: there, run with a new group_id instead)."
        )


def _stats(stats: dict[str, Any]) -> DetectorStats:
    """The detector's counters as the header holds them (ValueError when one is not a count)."""
    return DetectorStats(**{name: _count(value, f"stats.{name}") for name, value in stats.items()})


def _count(value: object, what: str) -> int:
    """A count or a sequence number of the header: a JSON integer, not below zero (ValueError otherwise).

    Taken as it is, a string or a float would fail the stage, or number
    documents wrong, long after the snapshot was loaded.
    """
    if type(value) is not int or value < 0:
        raise ValueError(f"{what} is {str(value)[:40]!r}, not a count")
    return value


def _check_numbering(history: GenerationList[Any], what: str) -> None:
    """Each generation of ``what`` numbers its documents on from where the one before ends; there is one at least.

    Overlapping, a sequence number would name two documents (the band
    tables' matches would be answered with another document's id); with
    none, the first batch fails.
    """
    if not history.items:
        raise CorruptSnapshotError(f"snapshot: {what} holds no generation")
    _count(history.items[0].base_seq, "the first generation's base_seq")
    for before, after in itertools.pairwise(history.items):
        if after.base_seq != before.base_seq + len(before):
            raise CorruptSnapshotError(
                f"snapshot: a generation of {what} numbers its documents from {after.base_seq}, "
                f"not from {before.base_seq + len(before)} where the one before it ends"
            )


def _finite_or_none(value: float) -> float | None:
    return value if np.isfinite(value) else None


def _none_to(value: object, default: float) -> float:
    """A time the header holds, ``default`` for None (ValueError when it is not a finite number)."""
    if value is None:
        return default
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        raise ValueError(f"a time is {str(value)[:40]!r}, not a number")
    return float(value)


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
