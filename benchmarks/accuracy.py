"""Precision and recall of streaming near-duplicate detection against exact brute force.

Ground truth, in stream order: document ``i`` is a duplicate iff some earlier document
``j < i`` has exact Jaccard(shingles(i), shingles(j)) >= t, with the shingle sets of
``stream_dedup.text`` (normalised text, character 10-shingles). It is computed exactly
with the all-pairs prefix filter: order shingles rarest first; if J(A, B) >= t then
the first ``|A| - ceil(t|A|) + 1`` shingles of A and the first ``|B| - ceil(t|B|) + 1``
of B share one, so an inverted index over those prefixes finds every candidate, and
each candidate's Jaccard is then computed exactly.

Against it: (a) ``stream_dedup.engine.Detector`` with the library defaults and, as a
second row, with exact verification; (b) datasketch ``MinHashLSH`` + ``MinHash``,
query-then-insert, duplicate when a candidate's estimated Jaccard >= t (``_anchors.py``),
fed the same shingle strings. Settings: t = 0.8, 128 permutations, character 10-shingles.
Corpus: real paragraphs with 30% planted near-duplicates (``corpus.py``).

Bar (from the issue): precision >= 0.995, recall >= 0.995, and no worse than datasketch.

    python benchmarks/accuracy.py [--quick] [--docs N]
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import numpy as np
from _anchors import stream_dedup as datasketch_stream
from _table import Row, print_table, stopwatch
from corpus import planted_stream

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector
from stream_dedup.text import Shingling, normalize, shingle_set

THRESHOLD, NUM_PERM, SHINGLE_SIZE = 0.8, 128, 10
BAR = 0.995


@dataclass(frozen=True)
class Scores:
    precision: float
    recall: float
    f1: float
    false_positives: int
    false_negatives: int


def exact_duplicates(sets: Sequence[set[str]], threshold: float) -> list[tuple[int | None, float]]:
    """Per document: (index of its most similar earlier document with J >= t, J) or (None, 0)."""
    vocab: dict[str, int] = {}
    ids = [np.fromiter((vocab.setdefault(s, len(vocab)) for s in sh), np.int64, len(sh)) for sh in sets]
    frequency = np.bincount(np.concatenate(ids), minlength=len(vocab))
    rank = np.empty(len(vocab), np.int64)
    rank[np.argsort(frequency, kind="stable")] = np.arange(len(vocab))
    ranked = [np.sort(rank[a]) for a in ids]
    postings: defaultdict[int, list[int]] = defaultdict(list)
    truth: list[tuple[int | None, float]] = []
    for i, a in enumerate(ranked):
        n = a.size
        prefix = a[: n - math.ceil(threshold * n - 1e-9) + 1].tolist()
        candidates = {j for r in prefix for j in postings[r]}
        best: tuple[int | None, float] = (None, 0.0)
        for j in sorted(candidates):
            m = ranked[j].size
            if threshold * n > m or threshold * m > n:  # sizes alone rule J >= t out
                continue
            common = np.intersect1d(a, ranked[j], assume_unique=True).size
            jaccard = common / (n + m - common)
            if jaccard >= threshold and jaccard > best[1]:
                best = (j, jaccard)
        truth.append(best)
        for r in prefix:
            postings[r].append(i)
    return truth


def score(predicted: Sequence[bool], actual: Sequence[bool]) -> Scores:
    tp = sum(p and a for p, a in zip(predicted, actual, strict=True))
    fp = sum(p and not a for p, a in zip(predicted, actual, strict=True))
    fn = sum(a and not p for p, a in zip(predicted, actual, strict=True))
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return Scores(precision, recall, f1, fp, fn)


def _span(values: Sequence[float]) -> str:
    return f"{min(values):.3f}-{max(values):.3f}" if values else "none"


def detector_verdicts(config: DetectionConfig, ids: list[str], texts: list[str], batch: int) -> list[str | None]:
    detector = Detector(config)
    out: list[str | None] = []
    for start in range(0, len(ids), batch):
        verdicts = detector.process(ids[start : start + batch], texts[start : start + batch])
        out += [v.duplicate_of if v.verdict == "duplicate" else None for v in verdicts]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description="precision/recall vs brute force and datasketch")
    parser.add_argument("--quick", action="store_true", help="3,000 documents instead of 20,000")
    parser.add_argument("--docs", type=int)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    docs = args.docs or (3_000 if args.quick else 20_000)

    stream = planted_stream(docs, dup_fraction=0.3, seed=args.seed)
    ids, texts = [d.id for d in stream], [d.text for d in stream]
    shingling = Shingling(unit="char", size=SHINGLE_SIZE)
    sets = [shingle_set(normalize(t), shingling) for t in texts]
    position = {doc_id: i for i, doc_id in enumerate(ids)}

    with stopwatch() as t_truth:
        truth = exact_duplicates(sets, THRESHOLD)
    actual = [j is not None for j, _ in truth]

    def pointer_ok(pointers: Sequence[str | None]) -> float:
        """Share of reported duplicate_of whose exact Jaccard with the document is >= t."""
        pairs = [(i, position[p]) for i, p in enumerate(pointers) if p is not None]
        good = sum(len(sets[i] & sets[j]) >= THRESHOLD * len(sets[i] | sets[j]) for i, j in pairs)
        return good / len(pairs) if pairs else 1.0

    config = DetectionConfig(threshold=THRESHOLD, num_perm=NUM_PERM, shingle_size=SHINGLE_SIZE, shingle_unit="char")
    variants = {"Detector": config}
    if "verification" in {f.name for f in fields(DetectionConfig)}:  # not every version has it
        variants["Detector, verification=exact"] = replace(config, verification="exact")  # type: ignore[call-arg]
    runs: dict[str, tuple[list[str | None], float]] = {}
    for name, cfg in variants.items():
        with stopwatch() as t:
            pointers = detector_verdicts(cfg, ids, texts, batch=1_000)
        runs[name] = (pointers, t[0])
    with stopwatch() as t_ds:
        anchor = [v.duplicate_of for v in datasketch_stream(zip(ids, sets, strict=True), THRESHOLD, NUM_PERM)]

    ds = score([p is not None for p in anchor], actual)
    rows = []
    for name, (pointers, _) in runs.items():
        ours = score([p is not None for p in pointers], actual)
        label = name
        rows += [
            Row(
                f"{label}: {metric}",
                getattr(ours, metric),
                "datasketch",
                getattr(ds, metric),
                f">= {BAR} and >= datasketch",
                getattr(ours, metric) >= max(BAR, getattr(ds, metric)),
                fmt=".4f",
            )
            for metric in ("precision", "recall")
        ]
        rows += [
            Row(
                f"{label}: F1",
                ours.f1,
                "datasketch",
                ds.f1,
                ">= datasketch",
                ours.f1 >= ds.f1,
                fmt=".4f",
            ),
            Row(
                f"{label}: false positives",
                ours.false_positives,
                "datasketch",
                ds.false_positives,
                lower_is_better=True,
            ),
            Row(
                f"{label}: false negatives",
                ours.false_negatives,
                "datasketch",
                ds.false_negatives,
                lower_is_better=True,
            ),
            Row(
                f"{label}: duplicate_of truly >= t",
                pointer_ok(pointers),
                "datasketch",
                pointer_ok(anchor),
                fmt=".4f",
            ),
        ]

    def jaccard(i: int, j: int) -> float:
        return len(sets[i] & sets[j]) / len(sets[i] | sets[j])

    def error_range(pointers: Sequence[str | None]) -> str:
        """Exact Jaccard behind the errors: near t means estimation noise, far means a bug."""
        fp = [jaccard(i, position[p]) for i, p in enumerate(pointers) if p is not None and not actual[i]]
        fn = [truth[i][1] for i, p in enumerate(pointers) if p is None and actual[i]]
        return f"false positives at exact J {_span(fp)}, false negatives at J {_span(fn)}"

    near = sum(1 for j, s in truth if j is not None and s < 1.0)
    print_table(
        f"accuracy: t={THRESHOLD}, {NUM_PERM} perms, char {SHINGLE_SIZE}-shingles, {docs:,} docs "
        f"({sum(actual):,} true duplicates, {near:,} of them not exact)",
        rows,
        [
            f"seconds: brute force {t_truth[0]:.1f}, "
            + ", ".join(f"{name} {seconds:.1f}" for name, (_, seconds) in runs.items())
            + f", datasketch {t_ds[0]:.1f}",
            *[f"{name}: {error_range(pointers)}" for name, (pointers, _) in runs.items()],
            f"datasketch: {error_range(anchor)}",
            "datasketch: MinHashLSH(threshold=0.8, num_perm=128) chooses its own bands; "
            "duplicate iff a candidate's estimated Jaccard >= t",
        ],
    )


if __name__ == "__main__":
    main()
