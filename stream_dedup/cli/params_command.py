"""``stream-dedup params``: the banding for a threshold, its S-curve, and its accuracy on a sample."""

import argparse
import math
from contextlib import ExitStack
from pathlib import Path

import numpy as np

from stream_dedup.cli.containment_plan import containment_plan_lines
from stream_dedup.cli.flag_types import non_empty_text, whole_number
from stream_dedup.cli.interruption import interruptible
from stream_dedup.cli.options import add_detection_options, config_from
from stream_dedup.cli.output_files import open_output, writing
from stream_dedup.cli.output_paths import refuse_clashes, refuse_unwritable
from stream_dedup.cli.records import Reject, input_lines, read_records
from stream_dedup.cli.s_curve_plot import curve_edges, s_curve_svg
from stream_dedup.config import EXPECTED_DOCUMENTS, DetectionConfig
from stream_dedup.engine.evaluation import RealisedCurve, measure, realised_curve
from stream_dedup.errors import InputError
from stream_dedup.lsh.hamming_curve import expected_distance, within_distance_probability

_CURVE_POINTS = np.round(np.arange(0.1, 1.0001, 0.05), 2)


def add_parser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    parser = subparsers.add_parser(
        "params",
        help="show the LSH banding chosen for a threshold, and measure it on a sample",
        description="Print bands and rows per band, the S-curve, false positive/negative "
        "probabilities, with --containment-threshold the containment banding, size partitions and "
        "recall, and, with --sample, precision and recall against exact Jaccard; "
        "with --plot, draw the S-curve (and what the sample measured) to an SVG file.",
    )
    parser.add_argument(
        "--sample", type=non_empty_text, help="JSON-lines file of {id, text} to measure precision and recall on"
    )
    parser.add_argument(
        "--sample-limit",
        type=whole_number(1, 10**7),
        default=5000,
        help="documents of the sample used (default 5000)",
    )
    parser.add_argument(
        "--plot",
        type=non_empty_text,
        metavar="FILE.svg",
        help="draw the S-curve and the threshold (SimHash: the chance of a pair within --max-hamming bits) to this "
        "SVG file; with --sample, also the share of the sample's pairs detected, by exact Jaccard",
    )
    add_detection_options(parser)
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    config = config_from(args)
    if args.plot:
        # ``--plot`` on the sample emptied it before it was read: refused as dedup refuses its outputs.
        refuse_clashes(args.sample or "-", {"--plot": args.plot})
        # Checked first, written last: a path that cannot be written fails before the sample is measured,
        # and a run stopped while measuring leaves an earlier plot as it was.
        refuse_unwritable({"--plot": args.plot})
    with interruptible():
        print(f"method {config.method}")
        if config.uses_minhash:
            _print_banding(config)
        if config.uses_simhash:
            _print_hamming_layout(config)
        for line in containment_plan_lines(config):
            print(line)
        texts = _sample_accuracy(args.sample, args.sample_limit, config) if args.sample else None
        if args.plot:
            measured = _measure_curve(texts, config) if texts is not None else None
            svg = s_curve_svg(config, measured, Path(args.sample).name if args.sample else "")
            with ExitStack() as stack, writing("--plot", args.plot):
                open_output(stack, "--plot", args.plot).write(svg)
            print(f"\nS-curve drawn to {args.plot}")
    return 0


def _print_hamming_layout(config: DetectionConfig) -> None:
    """The Hamming index's tables, and what a query costs at the expected index size."""
    layout = config.hamming_layout()
    documents = config.max_documents or EXPECTED_DOCUMENTS
    sized_by = "max_documents" if config.max_documents else "default, set max_documents to size it"
    k = config.max_hamming
    print(f"\nSimHash: 64-bit fingerprints, {config.simhash_weighting} weighting, duplicate within {k} bits")
    print(f"  similarity reported: 1 - distance/64 (>= {1 - k / 64:.4f})")
    # Charikar: a bit differs with probability angle/pi; equal-size sets at Jaccard J have cosine 2J/(1+J).
    print(f"  expected distance at cosine c: 64*acos(c)/pi; {k} bits is cosine {math.cos(math.pi * k / 64):.3f}")
    print("  expected distance at Jaccard J (equal-size sets):", end="")
    for jaccard in (0.5, 0.7, 0.8, 0.9, 0.95):
        print(f"  J={jaccard}: {float(expected_distance(jaccard)):.1f}", end="")
    print()
    print(f"  Hamming index: {layout.tables} tables, levels {list(layout.levels)}, key bits {list(layout.key_bits)}")
    print(f"  table bytes per document {layout.table_bytes} (plus 8 fingerprint, 8 source, id)")
    print(
        f"  expected fingerprints probed per query at {documents:,} documents ({sized_by}): "
        f"{layout.expected_probes(documents):.1f}"
    )
    print(f"\n  J     P(within {k} bits), sets of equal size")
    for s, p in zip(_CURVE_POINTS, within_distance_probability(_CURVE_POINTS, k), strict=True):
        print(f"  {s:.2f}  {p:.6f}")


def _sample_accuracy(path: str, limit: int, config: DetectionConfig) -> list[str]:
    """Print the method's precision and recall on the sample against exact Jaccard; return its texts."""
    texts = _sample_texts(path, limit, config)
    result = measure(texts, config)
    t = config.threshold
    print(f"\nsample {path}: {result.documents} documents")
    print(f"  pairs with exact J >= {t}: {result.true_pairs}")
    print(f"  pairs flagged by method {config.method}: {result.flagged_pairs}")
    print(f"  precision {result.precision:.4f}, recall {result.recall:.4f}")
    return texts


def _sample_texts(path: str, limit: int, config: DetectionConfig) -> list[str]:
    """The normalised texts of the sample's first ``limit`` usable records.

    A sample with none (an empty file, every line rejected: another format,
    other field names) is refused naming the file and the first line's
    reason: measuring no documents failed deep in numpy with a traceback.
    """
    texts: list[str] = []
    rejects, first_reject = 0, None
    for record in read_records(input_lines(path), folding=config.shingling().folding):
        if isinstance(record, Reject):
            rejects, first_reject = rejects + 1, first_reject or record
            continue
        texts.append(record.text)
        if len(texts) == limit:
            break
    if texts:
        return texts
    if first_reject is None:
        raise InputError(f"sample {path} holds no record to measure: it is empty")
    raise InputError(
        f"sample {path} holds no usable record: all {rejects} lines were rejected "
        f"(line {first_reject.line}: {first_reject.reason})"
    )


def _print_banding(config: DetectionConfig) -> None:
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


def _measure_curve(texts: list[str], config: DetectionConfig) -> RealisedCurve:
    """The realised S-curve of the sample, printed as a table (what the plot shows)."""
    curve = realised_curve(texts, config, curve_edges(config.threshold))
    print(f"\n  J bucket     pairs  candidates  reported  in theory   ({curve.pairs:,} pairs by exact Jaccard)")
    for candidate, reported in zip(curve.candidates, curve.flagged, strict=True):
        print(
            f"  {candidate.low:.2f}-{min(candidate.high, 1.0):.2f} {candidate.count:9,}  "
            f"{candidate.rate:10.3f}  {reported.rate:8.3f}  {_in_theory(candidate.centre, config):9.3f}"
        )
    return curve


def _in_theory(jaccard: float, config: DetectionConfig) -> float:
    """The chance a pair at ``jaccard`` becomes a candidate: banding's, or SimHash's (sets of equal size)."""
    if config.uses_minhash:
        return float(config.banding().collision_probability(jaccard))
    return float(within_distance_probability(jaccard, config.max_hamming))
