"""SimHash on one core: text to fingerprint, and the exact Hamming index at 1M (and 10M) fingerprints, k=3.

Fingerprints: 1 KB documents of real prose (``corpus.kilobyte_documents``), char
5-shingles, ``SimHasher.fingerprints`` on batches of 1,000, normalisation and
shingling included; both weightings. Anchor: the ``simhash`` PyPI package
(``Simhash(text)``: its own lower-casing, 4-character features counted by
frequency, MD5 per feature), on a subset because it is slow.

Index: a ``HammingIndex`` with ``choose_layout(3, N)`` is filled with ``N`` random
fingerprints (unrelated documents, the common case; 100k per ``add``), then the
next 20,000 documents are probed and inserted with ``search_and_add`` in batches
of 1,000 (a Kafka poll's worth); half of them are copies of stored documents with
1 to 3 bits flipped. Memory per document is read two ways: ``HammingIndex.nbytes``
and the growth of the process's resident set while filling (ids included, as
``doc-0000123``). Anchors, measured in the same run:

* ``simhash.SimhashIndex(k=3)`` (4 tables keyed on 16-bit blocks, the same layout,
  in Python dicts of sets of strings): ``get_near_dups`` then ``add`` one document
  at a time, after a fill of 100k (20k with --quick); memory is its resident-set
  growth per document over that fill.
* numpy brute force over the same ``N`` fingerprints: XOR and ``np.bitwise_count``
  of each query against every stored fingerprint (8 bytes a document plus ids).
  It is also the truth: the index's answers on the timed batches are compared
  with it, and any difference is a FAIL.

Each index contender runs in a fresh process, so memory freed by an earlier one
cannot hide its growth.

    python benchmarks/fingerprints.py [--quick]

(Not ``simhash.py``: a script of that name would shadow the ``simhash`` package it measures.)
"""

from __future__ import annotations

import _table

_table.pin_to_one_core()  # before numpy starts any thread pool

import argparse  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from typing import TypeVar  # noqa: E402

import numpy as np  # noqa: E402
import numpy.typing as npt  # noqa: E402
from _table import (  # noqa: E402
    Row,
    docs_per_second,
    isolated,
    print_table,
    rss_bytes,
    stopwatch,
    trimmed_rss_bytes,
)
from corpus import kilobyte_documents  # noqa: E402
from simhash import Simhash, SimhashIndex  # noqa: E402

from stream_dedup.lsh.hamming import HammingIndex  # noqa: E402
from stream_dedup.lsh.hamming_params import choose_layout  # noqa: E402
from stream_dedup.sketch.simhash import SimHasher, Weighting  # noqa: E402

K, BATCH, FILL_BATCH, PROBES = 3, 1_000, 100_000, 20_000

T = TypeVar("T")
Fingerprints = npt.NDArray[np.uint64]


def fingerprint_rate(texts: Sequence[str], weighting: Weighting) -> float:
    hasher = SimHasher(weighting=weighting)

    def sign(batch: Sequence[str]) -> None:
        for start in range(0, len(batch), BATCH):
            hasher.fingerprints(batch[start : start + BATCH])

    return docs_per_second(sign, texts)


def ids(start: int, n: int) -> list[str]:
    return [f"doc-{i:07d}" for i in range(start, start + n)]


def stream(fill: int, probes: int, seed: int = 12) -> tuple[Fingerprints, Fingerprints]:
    """``fill`` random fingerprints, then ``probes`` more of which every other one is a stored one, 1-3 bits off."""
    rng = np.random.default_rng(seed)
    stored = rng.integers(0, 2**64, fill, dtype=np.uint64)
    queries = rng.integers(0, 2**64, probes, dtype=np.uint64)
    flips = np.zeros(probes // 2, dtype=np.uint64)
    for _ in range(3):
        flips |= np.uint64(1) << rng.integers(0, 64, probes // 2).astype(np.uint64)
    queries[::2] = stored[rng.integers(0, fill, probes // 2)] ^ flips
    return stored, queries


def stream_dedup_run(fill: int, probes: int) -> tuple[float, float, float, float, float, int]:
    """(probe+insert docs/s, nbytes/doc, RSS growth/doc, trimmed RSS growth/doc, probed/query, mismatches)."""
    stored, queries = stream(fill, probes)
    index = HammingIndex(choose_layout(K, fill))
    before = trimmed_rss_bytes()
    for start in range(0, fill, FILL_BATCH):
        index.add(stored[start : start + FILL_BATCH], ids(start, min(FILL_BATCH, fill - start)))
    grown = rss_bytes() - before
    trimmed = trimmed_rss_bytes() - before
    nbytes = index.nbytes / len(index)
    probed = sum(g.runs.search(index.layout.keys(queries[:BATCH]))[0].size for g in index.generations) / BATCH
    found = []
    with stopwatch() as t:
        for start in range(0, probes, BATCH):
            found.append(index.search_and_add(queries[start : start + BATCH], ids(fill + start, BATCH)))
    mismatches = 0
    batches = probes // BATCH
    for number in sorted({0, batches // 2, batches - 1}):  # first, middle and last batch
        start = number * BATCH
        rows, seqs = brute_force(queries[start : start + BATCH], np.concatenate([stored, queries[:start]]))
        truth = set(zip(rows, seqs, strict=True))
        answer = set(zip(found[number].rows.tolist(), found[number].seqs.tolist(), strict=True))
        mismatches += len(truth ^ answer)
    return probes / t[0], nbytes, grown / fill, trimmed / fill, probed, mismatches


def brute_force(batch: Fingerprints, earlier: Fingerprints) -> tuple[list[int], list[int]]:
    """Pairs (row, earlier position) within K; rows of the batch also pair with its earlier rows."""
    everything = np.concatenate([earlier, batch])
    rows, seqs = [], []
    for row, fingerprint in enumerate(batch):
        near = np.flatnonzero(np.bitwise_count(everything[: earlier.size + row] ^ fingerprint) <= K)
        rows.extend([row] * near.size)
        seqs.extend(near.tolist())
    return rows, seqs


def brute_force_run(fill: int, probes: int) -> tuple[float, float]:
    """(probe+insert docs/s, bytes/doc) of numpy brute force over a growing array of fingerprints."""
    stored, queries = stream(fill, probes)
    store = np.empty(fill + probes, dtype=np.uint64)
    store[:fill] = stored
    size = fill
    with stopwatch() as t:
        for start in range(0, probes, BATCH):
            batch = queries[start : start + BATCH]
            brute_force(batch, store[:size])
            store[size : size + batch.size] = batch
            size += batch.size
    return probes / t[0], store.itemsize + np.mean([len(i) + 8 for i in ids(0, 1000)])


def simhash_package_run(fill: int, probes: int) -> tuple[float, float]:
    """(get_near_dups + add docs/s, RSS growth/doc) of ``simhash.SimhashIndex``."""
    stored, queries = stream(fill, probes)
    before = trimmed_rss_bytes()
    index = SimhashIndex([], f=64, k=K)
    for doc_id, value in zip(ids(0, fill), stored.tolist(), strict=True):
        index.add(doc_id, Simhash(value))
    grown = trimmed_rss_bytes() - before
    with stopwatch() as t:
        for doc_id, value in zip(ids(fill, probes), queries.tolist(), strict=True):
            fingerprint = Simhash(value)
            index.get_near_dups(fingerprint)
            index.add(doc_id, fingerprint)
    return probes / t[0], grown / fill


def main() -> None:
    parser = argparse.ArgumentParser(description="SimHash fingerprints and the exact Hamming index, one core")
    parser.add_argument("--quick", action="store_true", help="fewer documents; no 10M index")
    args = parser.parse_args()
    n_ours, n_anchor = (6_000, 600) if args.quick else (30_000, 3_000)
    anchor_fill, anchor_probes = (20_000, 2_000) if args.quick else (100_000, 5_000)
    sizes = (1_000_000,) if args.quick else (1_000_000, 10_000_000)

    texts = kilobyte_documents(n_ours)
    as_set = fingerprint_rate(texts, "set")
    by_frequency = fingerprint_rate(texts, "frequency")
    package = docs_per_second(lambda batch: [Simhash(text) for text in batch], texts[:n_anchor])

    ours = {n: isolated(stream_dedup_run, n, PROBES) for n in sizes}
    ours_small = isolated(stream_dedup_run, anchor_fill, anchor_probes)
    brute = isolated(brute_force_run, sizes[0], 2 * BATCH)
    anchor_rate, anchor_bytes = isolated(simhash_package_run, anchor_fill, anchor_probes)

    rows = [
        Row("fingerprints/s, set weighting (default)", as_set, "simhash Simhash(text)", package),
        Row("fingerprints/s, frequency weighting", by_frequency, "simhash Simhash(text)", package),
        Row(
            f"probe+insert docs/s at {anchor_fill:,}",
            ours_small[0],
            "simhash SimhashIndex k=3",
            anchor_rate,
        ),
        Row(
            f"bytes/doc (RSS growth, trimmed) at {anchor_fill:,}",
            ours_small[3],
            "simhash SimhashIndex k=3",
            anchor_bytes,
            lower_is_better=True,
        ),
    ]
    for n, (rate, nbytes, grown, trimmed, probed, mismatches) in ours.items():
        rows += [
            Row(
                f"probe+insert docs/s at {n:,}",
                rate,
                *(("numpy brute force", brute[0]) if n == sizes[0] else ("", None)),
            ),
            Row(
                f"bytes/doc (nbytes) at {n:,}",
                nbytes,
                *(("numpy brute force", brute[1]) if n == sizes[0] else ("", None)),
                bar="<= 64",
                passed=nbytes <= 64,
                lower_is_better=True,
            ),
            Row(f"bytes/doc (RSS growth, trimmed) at {n:,}", trimmed, bar="<= 64", passed=trimmed <= 64),
            Row(f"bytes/doc (RSS growth incl. freed merge buffers) at {n:,}", grown),
            Row(
                f"fingerprints probed/query at {n:,}",
                probed,
                "expected (layout)",
                choose_layout(K, n).expected_probes(n),
                fmt=",.1f",
                lower_is_better=True,
            ),
            Row(
                f"mismatches vs brute force at {n:,} (3 batches)", mismatches, bar="0", passed=mismatches == 0, fmt="d"
            ),
        ]
    layouts = [
        f"layout at {n:,}: levels {choose_layout(K, n).levels}, {choose_layout(K, n).tables} tables, "
        f"key bits {choose_layout(K, n).key_bits}, {choose_layout(K, n).table_bytes} table bytes/doc"
        for n in sizes
    ]
    print_table(
        "SimHash (char 5-shingles, 1 KB docs) and the exact Hamming index (k=3), one core",
        rows,
        notes=[
            *layouts,
            f"fingerprints: {n_ours:,} docs ours, {n_anchor:,} for the simhash package (best of 3 slices)",
            f"probe+insert: {PROBES:,} docs in batches of {BATCH:,}, half of them 1-3 bits from a stored one",
            f"simhash SimhashIndex: filled with {anchor_fill:,} (pure Python); ours at the same size for comparison",
            f"numpy brute force: {2 * BATCH:,} docs against {sizes[0]:,}",
            "RSS 'trimmed' is after malloc_trim: glibc otherwise keeps the last merge's freed temporaries",
        ],
    )


if __name__ == "__main__":
    main()
