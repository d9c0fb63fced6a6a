"""``stream-dedup params``: the banding for a threshold, its S-curve, and its accuracy on a sample."""

import argparse
import math

import numpy as np

from stream_dedup.cli.options import add_detection_options, config_from
from stream_dedup.cli.records import Record, read_records
from stream_dedup.engine.evaluation import measure

_CURVE_POINTS = np.round(np.arange(0.1, 1.0001, 0.05), 2)


def add_parser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser(
        "params",
        help="show the LSH banding chosen for a threshold, and measure it on a sample",
        description="Print bands and rows per band, the S-curve, false positive/negative "
        "probabilities and, with --sample, precision and recall against exact Jaccard.",
    )
    parser.add_argument("--sample", help="JSON-lines file of {id, text} to measure precision and recall on")
    parser.add_argument("--sample-limit", type=int, default=5000, help="documents of the sample used (default 5000)")
    add_detection_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    banding = config.banding()
    t = config.threshold
    print(f"threshold {t}, num_perm {config.num_perm}, scheme {config.scheme}")
    print(f"bands (b) {banding.bands}, rows per band (r) {banding.rows_per_band}")
    at_threshold = float(banding.collision_probability(t))
    print(f"S-curve midpoint {banding.midpoint():.3f}; candidate probability at threshold {at_threshold:.4f}")
    print(f"false positive probability (mean over J < {t}) {banding.false_positive_area(t):.4f}")
    print(f"false negative probability (mean over J >= {t}) {banding.false_negative_area(t):.5f}")
    error = math.sqrt((1.0 - t * t) / config.sketch_bits)
    print(
        f"verification sketch {config.sketch_bits} bits ({config.sketch_bits // 8} bytes per document): "
        f"estimate standard error {error:.4f} at J = {t}"
    )
    print("\n  J     P(candidate)")
    for s, p in zip(_CURVE_POINTS, banding.collision_probability(_CURVE_POINTS), strict=True):
        marker = "  <- threshold" if abs(s - t) < 0.025 else ""
        print(f"  {s:.2f}  {p:.6f}{marker}")
    if args.sample:
        with open(args.sample, encoding="utf-8", errors="surrogateescape") as source:
            records = [
                r for r in read_records(source, strip_punctuation=config.strip_punctuation) if isinstance(r, Record)
            ]
        texts = [r.text for r in records[: args.sample_limit]]
        result = measure(texts, config)
        print(f"\nsample {args.sample}: {result.documents} documents")
        print(f"  pairs with exact J >= {t}: {result.true_pairs}")
        print(f"  pairs flagged (candidate and estimate >= {t}): {result.flagged_pairs}")
        print(f"  precision {result.precision:.4f}, recall {result.recall:.4f}")
    return 0
