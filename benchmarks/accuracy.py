"""Precision, recall and the realised S-curve against exact brute force, on several real streams.

Ground truth, in stream order: document ``i`` is a duplicate iff some earlier document
``j < i`` has exact Jaccard(shingles(i), shingles(j)) >= t, with the shingle sets of
``stream_dedup.text`` (normalised text, character 10-shingles). It is computed exactly
with the all-pairs prefix filter: order shingles rarest first; if J(A, B) >= t then
the first ``|A| - ceil(t|A|) + 1`` shingles of A and the first ``|B| - ceil(t|B|) + 1``
of B share one, so an inverted index over those prefixes finds every candidate, and
each candidate's Jaccard is then computed exactly. It is run at a lower threshold
(0.5) to know every document's best earlier Jaccard down to there, for the S-curve.

Against it: (a) ``stream_dedup.engine.Detector`` with the library defaults as
``stream-dedup dedup`` runs it (pairs within 4 standard errors of the threshold settled
by their spooled texts), the same by the sketch alone (a library caller who gives no
texts), and with exact verification; (b) datasketch ``MinHashLSH`` + ``MinHash``,
query-then-insert, duplicate when a candidate's estimated Jaccard >= t (``_anchors.py``),
fed the same shingle strings. Settings: t = 0.8, 128 permutations, character 10-shingles.

The seed 002 methods on the same streams: ``simhash`` at ``max_hamming`` 3 (Manku et
al.'s setting) and 10 (the distance Jaccard 0.8 gives equal-size sets), and
``combined`` at 10, scored against the Jaccard truth above and, for SimHash, against
its own notion of near, exact cosine similarity of the shingle sets: document ``i``
is a duplicate iff an earlier one has ``|A & B| / sqrt(|A| |B|) >= cos(pi k / 64)``,
the cosine whose expected fingerprint distance is ``k``. Cosine truth comes from the
same prefix filter run at Jaccard ``c**2`` (cosine ``c`` implies Jaccard ``>= c**2``,
reached when one set contains the other).

Streams (``corpus.py``), each built to be dense near the threshold:
* paragraphs: real paragraphs with 30% planted edited copies of graded strength;
* editions: real paragraphs republished in 7 successive editions, each an edit of the last;
* titles: titles and one-liners, half at most 10 characters, 30% re-posted with an edit.

The realised S-curve: the share of documents flagged duplicate, by their best earlier
exact Jaccard, and the Jaccard where it crosses 50%: a sharp threshold is a steep
curve crossing at t.

Bars (from the issues): default F1 >= 0.98 on every stream; exact verification
precision and recall >= 0.995; no worse than datasketch.

    python benchmarks/accuracy.py [--quick] [--docs N]
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from _anchors import stream_dedup as datasketch_stream
from _table import Row, print_table, stopwatch
from corpus import Document, editions_stream, planted_stream, title_stream

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from stream_dedup.engine.evaluation import detection_rates, midpoint
from stream_dedup.text import Shingling, normalize, normalize_all, shingle_set
from stream_dedup.text.spool import TextSpool

THRESHOLD, NUM_PERM, SHINGLE_SIZE = 0.8, 128, 10
BAR_F1 = 0.98


@dataclass(frozen=True)
class Scores:
    precision: float
    recall: float
    f1: float
    false_positives: int
    false_negatives: int


def rarest_first(sets: Sequence[set[str]]) -> list[np.ndarray]:
    """Each set as sorted integer ranks of its elements, rarest first over all the sets (for prefix filters)."""
    vocab: dict[str, int] = {}
    ids = [np.fromiter((vocab.setdefault(s, len(vocab)) for s in sh), np.int64, len(sh)) for sh in sets]
    frequency = np.bincount(np.concatenate(ids), minlength=len(vocab))
    rank = np.empty(len(vocab), np.int64)
    rank[np.argsort(frequency, kind="stable")] = np.arange(len(vocab))
    return [np.sort(rank[a]) for a in ids]


def exact_duplicates(
    sets: Sequence[set[str]], threshold: float, measure: str = "jaccard"
) -> list[tuple[int | None, float]]:
    """Per document: (index of its most similar earlier document with similarity >= t, similarity) or (None, 0).

    ``measure`` is ``"jaccard"`` or ``"cosine"``; candidates are every pair the
    prefix filter gives at the Jaccard that the threshold implies.
    """
    prefix_threshold = threshold if measure == "jaccard" else threshold * threshold
    ranked = rarest_first(sets)
    postings: defaultdict[int, list[int]] = defaultdict(list)
    truth: list[tuple[int | None, float]] = []
    for i, a in enumerate(ranked):
        n = a.size
        prefix = a[: n - math.ceil(prefix_threshold * n - 1e-9) + 1].tolist()
        candidates = {j for r in prefix for j in postings[r]}
        best: tuple[int | None, float] = (None, 0.0)
        for j in sorted(candidates):
            m = ranked[j].size
            if prefix_threshold * n > m or prefix_threshold * m > n:  # sizes alone rule it out
                continue
            common = np.intersect1d(a, ranked[j], assume_unique=True).size
            similarity = common / (n + m - common) if measure == "jaccard" else common / math.sqrt(n * m)
            if similarity >= threshold and similarity > best[1]:
                best = (j, similarity)
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


def detector_verdicts(
    config: DetectionConfig, ids: list[str], texts: list[str], batch: int, settle: bool = True
) -> list[str | None]:
    """Verdicts as ``stream-dedup dedup`` gives them: pairs near the threshold settled by the spooled texts
    (``settle=False``: by the sketch alone, as a library caller without texts gets them)."""
    detector = make_detector(config)
    normalized = normalize_all(texts)
    out: list[str | None] = []
    with TextSpool() as spool:
        for start in range(0, len(ids), batch):
            lines = list(range(start + 1, start + 1 + len(normalized[start : start + batch])))
            spool.add(lines, normalized[start : start + batch])
            verdicts = detector.process(
                ids[start : start + batch],
                normalized[start : start + batch],
                normalized=True,
                sources=lines,
                document_texts=spool if settle else None,
            )
            out += [v.duplicate_of if v.verdict == "duplicate" else None for v in verdicts]
    return out


CURVE_LOW = 0.5
CURVE_EDGES = np.round(np.concatenate((np.arange(0.5, 0.7, 0.05), np.arange(0.7, 0.9, 0.02), [0.9, 0.95, 1.0])), 3)


@dataclass(frozen=True)
class Run:
    """One contender's verdicts on one stream: the id of each document's match, or None."""

    name: str
    pointers: list[str | None]
    seconds: float


def evaluate(name: str, stream: Sequence[Document]) -> tuple[list[Row], list[str]]:
    ids, texts = [d.id for d in stream], [d.text for d in stream]
    shingling = Shingling(unit="char", size=SHINGLE_SIZE)
    sets = [shingle_set(normalize(t), shingling) for t in texts]
    with stopwatch() as t_truth:
        truth = exact_duplicates(sets, CURVE_LOW)
    best = np.array([similarity if j is not None else 0.0 for j, similarity in truth])
    actual = [b >= THRESHOLD for b in best]

    config = DetectionConfig(threshold=THRESHOLD, num_perm=NUM_PERM, shingle_size=SHINGLE_SIZE, shingle_unit="char")
    runs = []
    for label, cfg, settle in (
        ("default", config, True),
        ("sketch alone", config, False),
        ("exact", replace(config, verification="exact"), True),
    ):
        with stopwatch() as t:
            pointers = detector_verdicts(cfg, ids, texts, batch=1_000, settle=settle)
        runs.append(Run(label, pointers, t[0]))
    seed_002 = []
    for method, distance in SEED_002_RUNS:
        with stopwatch() as t:
            cfg = replace(config, method=method, max_hamming=distance)
            pointers = detector_verdicts(cfg, ids, texts, batch=1_000)
        seed_002.append(Run(f"{method} k={distance}", pointers, t[0]))
    with stopwatch() as t_ds:
        anchor = [v.duplicate_of for v in datasketch_stream(zip(ids, sets, strict=True), THRESHOLD, NUM_PERM)]
    ds = score([p is not None for p in anchor], actual)

    rows = []
    for run in runs:
        ours = score([p is not None for p in run.pointers], actual)
        bar = 0.995 if run.name == "exact" else None
        for metric in ("precision", "recall", "f1"):
            value = getattr(ours, metric)
            target = BAR_F1 if run.name == "default" and metric == "f1" else bar
            rows.append(
                Row(
                    f"{name}, {run.name}: {metric}",
                    value,
                    "datasketch",
                    getattr(ds, metric),
                    f">= {target}" if target else "",
                    value >= target if target else None,
                    fmt=".4f",
                )
            )
    rows += seed_002_rows(name, seed_002, sets, actual, ds)
    curves = {run.name: detection_rates(best, [p is not None for p in run.pointers], CURVE_EDGES) for run in runs}
    curves["datasketch"] = detection_rates(best, [p is not None for p in anchor], CURVE_EDGES)
    notes = [
        f"{name}: {len(stream):,} docs, {sum(actual):,} true duplicates; seconds: brute force {t_truth[0]:.1f}, "
        + ", ".join(f"{r.name} {r.seconds:.1f}" for r in runs + seed_002)
        + f", datasketch {t_ds[0]:.1f}",
        f"{name}: detection rate by best earlier exact J (50% point: "
        + ", ".join(f"{label} {midpoint(curve):.3f}" for label, curve in curves.items())
        + ")",
    ]
    for bucket in curves["default"]:
        shares = "  ".join(
            f"{label} {next(b.rate for b in curve if b.low == bucket.low):.3f}" for label, curve in curves.items()
        )
        notes.append(f"    J >= {bucket.low:.2f} ({bucket.count:5,} docs): {shares}")
    return rows, notes


#: (method, max_hamming) of the seed 002 rows.
SEED_002_RUNS = (("simhash", 3), ("simhash", 10), ("combined", 10))


def seed_002_rows(
    name: str, runs: list[Run], sets: Sequence[set[str]], jaccard_truth: list[bool], ds: Scores
) -> list[Row]:
    """P/R/F1 of the SimHash and combined runs against Jaccard truth; SimHash F1 also against cosine truth."""
    rows = []
    cosine_truth: dict[int, list[bool]] = {}
    for run in runs:
        flagged = [p is not None for p in run.pointers]
        ours = score(flagged, jaccard_truth)
        for metric in ("precision", "recall", "f1"):
            rows.append(
                Row(
                    f"{name}, {run.name}: {metric}", getattr(ours, metric), "datasketch", getattr(ds, metric), fmt=".4f"
                )
            )
        if run.name.startswith("simhash"):
            distance = int(run.name.split("k=")[1])
            if distance not in cosine_truth:
                cosine = math.cos(math.pi * distance / 64)
                cosine_truth[distance] = [j is not None for j, _ in exact_duplicates(sets, cosine, "cosine")]
            truth = cosine_truth[distance]
            cosine = math.cos(math.pi * distance / 64)
            rows.append(Row(f"{name}, {run.name}: f1 vs cosine >= {cosine:.3f}", score(flagged, truth).f1, fmt=".4f"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description="precision/recall and S-curves vs brute force and datasketch")
    parser.add_argument("--quick", action="store_true", help="3,000 documents per stream instead of 20,000")
    parser.add_argument("--docs", type=int)
    args = parser.parse_args()
    docs = args.docs or (3_000 if args.quick else 20_000)
    streams = {
        "paragraphs": planted_stream(docs, dup_fraction=0.3, seed=7),
        "editions": editions_stream(docs // 7, editions=7),
        "titles": title_stream(docs),
    }
    rows, notes = [], []
    for name, stream in streams.items():
        stream_rows, stream_notes = evaluate(name, stream)
        rows += stream_rows
        notes += stream_notes
    notes.append(
        "datasketch: MinHashLSH(threshold=0.8, num_perm=128) chooses its own bands; "
        "duplicate iff a candidate's estimated Jaccard >= t"
    )
    print_table(f"accuracy: t={THRESHOLD}, {NUM_PERM} perms, char {SHINGLE_SIZE}-shingles", rows, notes)


if __name__ == "__main__":
    main()
