"""Index throughput and memory at 1M documents, the default banding (t=0.8: 16 bands of 6 rows).

stream_dedup: a ``Detector`` with the default settings (128-byte one-bit sketches,
16 band tables and the content-key table, a source per document) is filled with 1M
documents of random sketches and keys (unrelated documents: the common case of a
stream, nothing to verify), then the next
100k are probed and inserted through ``Detector.process_signed`` in batches of
1,000 (a Kafka poll's worth). Text-to-signature time is excluded: ``signatures.py``
measures it. Memory per document is read two ways at 1M: ``Detector.memory_bytes()``
and the growth of the process's resident set while filling.

Each contender runs in a fresh process of its own, so that memory it finds already
freed (by an earlier contender) cannot hide its resident-set growth. Each rate is the
best of three equal consecutive slices of its probe documents (the machine is shared;
the least disturbed slice is the fairest reading for everyone).

Anchors, measured in the same run on the same kind of signatures:

* datasketch ``MinHashLSH(num_perm=128, params=(16, 8))``: ``query`` then ``insert``
  one document at a time, after a fill of 100k (20k with --quick). Its memory per
  document is the resident-set growth over that fill, extrapolated to 1M as a constant
  per document (datasketch's dicts of sets grow about linearly).
* rensa ``RMinHashLSH(threshold=0.8, num_perm=128, num_bands=16)``: filled to the same
  count as stream_dedup with ``insert_matrix``; probe+insert is
  ``insert_matrix_and_query_duplicate_flags`` on the same batches. It keeps integer
  keys and no signatures (flags only, no verification), so it does less work per
  document than either of the others.

Bars (from the issue): >= 200,000 docs/s probe+insert at 1M indexed, <= 400 bytes/doc.

    python benchmarks/index.py [--quick]
"""

from __future__ import annotations

import argparse

import numpy as np
import numpy.typing as npt
from _table import Row, best_rate, isolated, print_table, rss_bytes, stopwatch, trimmed_rss_bytes
from datasketch import MinHash, MinHashLSH
from rensa import RMinHash, RMinHashLSH

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector
from stream_dedup.lsh import IndexedBatch, SignedBatch

NUM_PERM, BANDS, ROWS = 128, 16, 8
FILL_BATCH, PROBE_BATCH = 10_000, 1_000
BAR_RATE, BAR_BYTES = 200_000, 400


def random_signatures(rng: np.random.Generator, n: int) -> npt.NDArray[np.uint32]:
    return rng.integers(0, 2**32, size=(n, NUM_PERM), dtype=np.uint32)


def ids(start: int, n: int) -> list[str]:
    return [f"d{i:09d}" for i in range(start, start + n)]


def random_batch(rng: np.random.Generator, config: DetectionConfig, start: int, n: int) -> IndexedBatch:
    """``n`` unrelated documents as the index receives them: random sketches and (odd) keys.

    With containment on, set sizes of 1 KB documents (800-1,200 shingles).
    """
    tables = config.banding().bands + 1
    sizes = rng.integers(800, 1200, n).astype(np.uint32) if config.containment_threshold is not None else None
    signed = SignedBatch(
        rng.integers(0, 256, (n, config.sketch_bits // 8), dtype=np.uint8),
        rng.integers(0, 2**32, (n, tables), dtype=np.uint32) | np.uint32(1),
        set_sizes=sizes,
    )
    return IndexedBatch(ids(start, n), signed, np.zeros(n), np.arange(start, start + n, dtype=np.uint64))


def stream_dedup_run(
    fill: int, probe: int, config: DetectionConfig | None = None
) -> tuple[float, float, float, float, float, float]:
    """(fill docs/s, probe+insert docs/s, memory_bytes()/doc, RSS/doc, RSS/doc after malloc_trim, slowest batch s)."""
    rng = np.random.default_rng(1)
    config = config or DetectionConfig(threshold=0.8, num_perm=NUM_PERM)
    rss_before = rss_bytes()
    detector = Detector(config)
    slowest = 0.0  # a batch that triggers a table growth rehashes everything: a stall
    with stopwatch() as t_fill:
        for start in range(0, fill, FILL_BATCH):
            batch = random_batch(rng, config, start, FILL_BATCH)
            with stopwatch() as t_batch:
                detector.process_signed(batch)
            slowest = max(slowest, t_batch[0])
    rss_per_doc = (rss_bytes() - rss_before) / len(detector)
    trimmed_per_doc = (trimmed_rss_bytes() - rss_before) / len(detector)
    index_per_doc = detector.memory_bytes() / len(detector)
    batches = [random_batch(rng, config, fill + start, PROBE_BATCH) for start in range(0, probe, PROBE_BATCH)]
    rate = best_rate(lambda part: [detector.process_signed(batch) for batch in part], batches, PROBE_BATCH)
    return fill / t_fill[0], rate, index_per_doc, rss_per_doc, trimmed_per_doc, slowest


def datasketch_run(fill: int, probe: int) -> tuple[float, float]:
    """(query+insert docs/s after ``fill``, RSS growth per document over the fill)."""
    rng = np.random.default_rng(2)

    def minhashes(n: int) -> list[MinHash]:
        return [MinHash(num_perm=NUM_PERM, hashvalues=row, scheme="affine32") for row in random_signatures(rng, n)]

    rss_before = rss_bytes()
    lsh = MinHashLSH(num_perm=NUM_PERM, params=(BANDS, ROWS))
    for start in range(0, fill, FILL_BATCH):
        for key, m in zip(ids(start, FILL_BATCH), minhashes(FILL_BATCH), strict=True):
            lsh.insert(key, m)
    rss_per_doc = (rss_bytes() - rss_before) / fill
    batch = list(zip(ids(fill, probe), minhashes(probe), strict=True))

    def query_insert(part: list[tuple[str, MinHash]]) -> None:
        for key, m in part:
            lsh.query(m)
            lsh.insert(key, m)

    return best_rate(query_insert, batch), rss_per_doc


def rensa_run(fill: int, probe: int) -> tuple[float, float]:
    """(insert+flag docs/s after ``fill``, RSS growth per document over the fill)."""
    rng = np.random.default_rng(3)
    tokens_per_doc = 8

    def digests(n: int) -> object:  # random token sets give random signatures
        tokens = rng.integers(0, 2**63, size=n * tokens_per_doc, dtype=np.uint64)
        offsets = np.arange(0, n * tokens_per_doc + 1, tokens_per_doc, dtype=np.uint64)
        return RMinHash.digest_matrix_from_flat_token_hashes(tokens, offsets, NUM_PERM, 42)

    rss_before = rss_bytes()
    lsh = RMinHashLSH(threshold=0.8, num_perm=NUM_PERM, num_bands=BANDS)
    for start in range(0, fill, FILL_BATCH):
        lsh.insert_matrix(digests(FILL_BATCH), start_key=start)
    rss_per_doc = (rss_bytes() - rss_before) / fill
    batches = [(fill + start, digests(PROBE_BATCH)) for start in range(0, probe, PROBE_BATCH)]

    def insert_flag(part: list[tuple[int, object]]) -> None:
        for start, matrix in part:
            lsh.insert_matrix_and_query_duplicate_flags(matrix, start_key=start)

    return best_rate(insert_flag, batches, PROBE_BATCH), rss_per_doc


def main() -> None:
    parser = argparse.ArgumentParser(description="index probe+insert throughput and memory per document")
    parser.add_argument("--quick", action="store_true", help="100k indexed instead of 1M")
    args = parser.parse_args()
    fill, probe = (100_000, 20_000) if args.quick else (1_000_000, 100_000)
    ds_fill, ds_probe = (20_000, 5_000) if args.quick else (100_000, 20_000)

    fill_rate, rate, index_bytes, rss_bytes_per_doc, trimmed_bytes_per_doc, slowest = isolated(
        stream_dedup_run, fill, probe
    )
    ds_rate, ds_bytes = isolated(datasketch_run, ds_fill, ds_probe)
    rensa_rate, rensa_bytes = isolated(rensa_run, fill, probe)

    at = f"{fill:,} indexed"
    rows = [
        Row(
            f"probe+insert docs/s, {at}",
            rate,
            f"datasketch, {ds_fill:,} indexed",
            ds_rate,
            f">= {BAR_RATE:,}/s",
            rate >= BAR_RATE,
        ),
        Row(f"probe+insert docs/s, {at}", rate, f"rensa insert+flags, {at}", rensa_rate),
        Row(
            f"bytes/doc by memory_bytes(), {at}",
            index_bytes,
            f"datasketch RSS/doc at {ds_fill:,} (extrap.)",
            ds_bytes,
            f"<= {BAR_BYTES}",
            index_bytes <= BAR_BYTES,
            lower_is_better=True,
        ),
        Row(
            f"bytes/doc by RSS growth, {at}",
            rss_bytes_per_doc,
            f"datasketch RSS/doc at {ds_fill:,} (extrap.)",
            ds_bytes,
            f"<= {BAR_BYTES}",
            rss_bytes_per_doc <= BAR_BYTES,
            lower_is_better=True,
        ),
        Row(
            f"bytes/doc by RSS growth after malloc_trim, {at}",
            trimmed_bytes_per_doc,
            f"datasketch RSS/doc at {ds_fill:,} (extrap.)",
            ds_bytes,
            f"<= {BAR_BYTES}",
            trimmed_bytes_per_doc <= BAR_BYTES,
            lower_is_better=True,
        ),
        Row(
            f"bytes/doc by RSS growth, {at}",
            rss_bytes_per_doc,
            f"rensa RSS/doc, {at}",
            rensa_bytes,
            lower_is_better=True,
        ),
    ]
    print_table(
        f"index: stream_dedup defaults at t=0.8 (16 bands x 6 rows + content key, 1,024-bit sketches); "
        f"anchors {BANDS} bands x {ROWS} rows, {NUM_PERM} perms; random signatures, probe batches of {PROBE_BATCH:,}",
        rows,
        [
            f"stream_dedup fill (batches of {FILL_BATCH:,}, 0 -> {fill:,}): "
            f"{fill_rate:,.0f} docs/s; slowest batch {slowest:.2f} s (table growth)",
            "datasketch bytes/doc: measured at the smaller count, taken as constant per document",
            "ids: 10-character strings for stream_dedup and datasketch; rensa keys are integers",
        ],
    )


if __name__ == "__main__":
    main()
