"""What ``params`` prints about containment: the stored banding, its cost, the partitions and the recall."""

from dataclasses import replace

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.containment import containment_standard_error
from stream_dedup.lsh.ensemble_params import EnsembleParameters, implied_jaccard

#: Set sizes (distinct shingles) whose probe plans are shown: a short paragraph, a page, a long article.
SHOWN_QUERY_SIZES = (100, 300, 1000)
#: Bytes per document per band: a table slot (6 bytes at 50-75% load) and the key's high half.
_BYTES_PER_BAND = 12
_SET_SIZE_BYTES = 4


def containment_plan_lines(config: DetectionConfig) -> list[str]:
    """The containment part of ``params``; none while ``containment_threshold`` is off."""
    ensemble = config.containment()
    if ensemble is None:
        return []
    c, ratio, banding = ensemble.threshold, ensemble.max_ratio, ensemble.banding
    plain = replace(config, containment_threshold=None).banding()
    extra = _SET_SIZE_BYTES + _BYTES_PER_BAND * (banding.bands - plain.bands)
    errors = ", ".join(f"{r:g}x {containment_standard_error(c, r, config.sketch_bits):.3f}" for r in _ratios(ratio))
    lines = [
        "",
        f"containment {c}: contained / contains for pairs at most {ratio:g}x apart in set size",
        f"  the index is banded for containment (the bands above): candidate probability "
        f"{ensemble.recall_at(ratio):.4f} at the hardest pair (containment {c}, sizes {ratio:g}x apart, "
        f"Jaccard {ensemble.lowest_jaccard:.3f}); near-duplicates are found through the same bands",
        f"  memory: about {extra:+d} bytes per document against the {plain.bands} bands of {plain.rows_per_band} rows "
        f"without containment ({_SET_SIZE_BYTES} of set size, ~{_BYTES_PER_BAND} per band)",
        f"  estimate standard error at containment {c} ({config.sketch_bits}-bit sketches), by size ratio: {errors}",
        "",
        "  size ratio  Jaccard at the threshold  P(candidate), all bands",
    ]
    for r in _ratios(ratio):
        jaccard = float(implied_jaccard(c, 1.0, r))
        lines.append(f"  {r:<10.2f}  {jaccard:<24.3f}  {float(banding.collision_probability(jaccard)):.6f}")
    lines += _partition_lines(ensemble)
    return lines


def _partition_lines(ensemble: EnsembleParameters) -> list[str]:
    """For a few query sizes, each size partition judged: bands given and recall at its hardest pair."""
    lines = [
        "",
        f"  size partitions ({ensemble.partitions.per_doubling} per doubling) a query judges for containment, and "
        f"the bands (of {ensemble.banding.bands}) through which a match in each counts: enough for recall "
        f"{ensemble.min_recall} at the partition's hardest pair, and {ensemble.jaccard_recall} at "
        f"J = {ensemble.jaccard_threshold} where near-duplicates can be",
    ]
    for query in SHOWN_QUERY_SIZES:
        plan = ensemble.partition_plan(query)
        lines.append(f"  query of {query} shingles: {len(plan)} partitions")
        lines.append("    sizes        bands  lowest Jaccard  recall")
        for probe in plan:
            sizes = f"{probe.smallest}-{probe.largest}"
            lines.append(f"    {sizes:<11}  {probe.bands:<5}  {probe.lowest_jaccard:<14.3f}  {probe.recall:.4f}")
    return lines


def _ratios(max_ratio: float) -> list[float]:
    """1, then steps of a quarter, up to ``max_ratio`` (which is always shown)."""
    ratios = [1.0 + 0.25 * k for k in range(int((max_ratio - 1.0) / 0.25) + 1)]
    return ratios if ratios[-1] == max_ratio else [*ratios, max_ratio]
