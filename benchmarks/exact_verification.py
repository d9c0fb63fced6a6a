"""Exact verification at a low threshold: time, peak memory and precision beside the default.

A low threshold (t=0.5) with short character shingles (k=5) makes LSH return many
candidates per document: pieces of real prose share common words, so most candidate
pairs sit around J 0.1-0.4. Exact verification must sort through all of them without
holding them all at once.

Corpus: 50,000 documents of about 270 characters (real paragraphs cut into pieces, as
dictionary entries or listings are), 30% planted edited copies (``corpus.py``).

Each mode runs in a fresh process, so its peak resident set is its own:
* default: ``verification="estimate"`` (the anchor);
* exact: ``verification="exact"``.

Precision: every ``duplicate_of`` a mode reports is checked by exact Jaccard of the two
documents' shingle sets (brute force on the reported pairs).

Bars (from the issue): exact <= 3x the default's time and <= 1.5 GB peak; precision 1.0.

    python benchmarks/exact_verification.py [--quick]
"""

from __future__ import annotations

import argparse
import resource
import time

from _table import Row, isolated, print_table
from corpus import planted_stream, real_paragraphs

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector
from stream_dedup.text import Shingling, normalize, shingle_set

THRESHOLD, SHINGLE_SIZE, PIECE, BATCH = 0.5, 5, 270, 1_000
BAR_TIME_RATIO, BAR_PEAK_BYTES = 3.0, 1.5e9


def pieces() -> list[str]:
    """Real paragraphs (of 100 characters or more) cut into pieces of about ``PIECE`` characters at word boundaries.

    A paragraph's last piece is kept when it has at least 150 characters.
    """
    out = []
    for paragraph in real_paragraphs(min_chars=100, max_chars=1_000_000):
        piece = ""
        for word in paragraph.split():
            piece = f"{piece} {word}" if piece else word
            if len(piece) >= PIECE:
                out.append(piece)
                piece = ""
        if len(piece) >= 150:
            out.append(piece)
    return out


def run(verification: str, docs: int) -> tuple[float, int, list[tuple[int, int]]]:
    """(seconds, peak RSS bytes, reported (document, match) positions) of one mode, in this process."""
    stream = planted_stream(docs, seed=5, paragraphs=pieces())
    texts = [d.text for d in stream]
    config = DetectionConfig(threshold=THRESHOLD, shingle_size=SHINGLE_SIZE, verification=verification)  # type: ignore[arg-type]
    detector = Detector(config)
    position = {d.id: i for i, d in enumerate(stream)}
    reported = []
    started = time.perf_counter()
    for start in range(0, len(texts), BATCH):
        ids = [d.id for d in stream[start : start + BATCH]]
        for verdict in detector.process(ids, texts[start : start + BATCH]):
            if verdict.duplicate_of is not None:
                reported.append((position[verdict.id], position[verdict.duplicate_of]))
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return seconds, peak, reported


def precision(docs: int, reported: list[tuple[int, int]]) -> float:
    texts = [d.text for d in planted_stream(docs, seed=5, paragraphs=pieces())]
    shingling = Shingling("char", SHINGLE_SIZE)
    good = 0
    for i, j in reported:
        a, b = shingle_set(normalize(texts[i]), shingling), shingle_set(normalize(texts[j]), shingling)
        good += len(a & b) >= THRESHOLD * len(a | b)
    return good / len(reported) if reported else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description="exact verification at t=0.5: time, peak memory, precision")
    parser.add_argument("--quick", action="store_true", help="10,000 documents instead of 50,000")
    args = parser.parse_args()
    docs = 10_000 if args.quick else 50_000

    default_seconds, default_peak, default_reported = isolated(run, "estimate", docs)
    exact_seconds, exact_peak, exact_reported = isolated(run, "exact", docs)
    exact_precision = precision(docs, exact_reported)
    rows = [
        Row(
            "exact: seconds",
            exact_seconds,
            "default (estimate)",
            default_seconds,
            f"<= {BAR_TIME_RATIO:.0f}x default",
            exact_seconds <= BAR_TIME_RATIO * default_seconds,
            lower_is_better=True,
            fmt=".1f",
        ),
        Row(
            "exact: peak RSS MB",
            exact_peak / 1e6,
            "default (estimate)",
            default_peak / 1e6,
            f"<= {BAR_PEAK_BYTES / 1e6:,.0f}",
            exact_peak <= BAR_PEAK_BYTES,
            lower_is_better=True,
        ),
        Row(
            "exact: precision of duplicate_of",
            exact_precision,
            "default (estimate)",
            precision(docs, default_reported),
            "1.0",
            exact_precision == 1.0,
            fmt=".4f",
        ),
        Row("exact: duplicates reported", len(exact_reported), "default (estimate)", len(default_reported)),
    ]
    print_table(
        f"exact verification: t={THRESHOLD}, char {SHINGLE_SIZE}-shingles, {docs:,} documents of ~{PIECE} characters",
        rows,
        [f"batches of {BATCH:,}; each mode in a fresh process (peak RSS includes the interpreter and the corpus)"],
    )


if __name__ == "__main__":
    main()
