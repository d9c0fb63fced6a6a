"""``watch --summary``: what the records read add up to, in a form read in five seconds.

Every figure comes from the records themselves, so it describes exactly the
records read, whatever the worker has done before or since:

- documents, duplicates and the duplicate rate count the verdicts (with
  containment on, ``contained`` and ``contains`` verdicts are counted apart,
  neither unique nor duplicates);
- dead letters count the dead-letter records read (``--dead-letters``), by reason;
- throughput is the verdicts over the time from the first document's Kafka
  timestamp to the last verdict's (when the input is fed at a fixed rate,
  that rate is what it shows; the capacity is in docs/benchmarks.md);
- latency is each verdict's Kafka timestamp minus its document's, which the
  worker sets just before it commits the batch (its metric
  ``stream_dedup_end_to_end_latency_seconds`` ends at the commit);
  quantiles are nearest-rank;
- the similarities of the duplicates, binned, show how many sit just above
  the threshold and how many are near-exact copies.
"""

import math
from collections import Counter
from dataclasses import dataclass, field

from stream_dedup.cli.terminal_text import Style, counted
from stream_dedup.cli.verdict_lines import ShownText, texts_lines
from stream_dedup.cli.watched_records import DeadLetterRecord, VerdictRecord, WatchedRecord
from stream_dedup.text.shown import printable

#: Duplicates kept as candidate examples (the first ones read): bounds memory on a long watch.
EXAMPLE_CANDIDATES = 1000
#: Columns of each example's text.
EXAMPLE_COLUMNS = 100
_BAR_COLUMNS = 30


@dataclass(frozen=True)
class SummaryFigures:
    """The numbers of a summary; ``None`` where the records read cannot give one."""

    documents: int
    duplicates: int
    #: Containment verdicts (``contained``, ``contains``): counted apart from the duplicates.
    contained: int
    contains: int
    dead_letters: int
    dead_letter_reasons: dict[str, int]
    other_records: int
    duplicate_rate: float | None
    throughput: float | None
    span_seconds: float | None
    latency_p50_ms: int | None
    latency_p99_ms: int | None


@dataclass
class WatchSummary:
    """Figures accumulated record by record.

    Memory does not grow with the verdicts read (a watch left running for
    days on a busy topic): latencies are counted per distinct millisecond
    (exact quantiles), similarities per bin of both widths a summary may
    show, and example candidates are bounded.
    """

    unique: int = 0
    duplicates: int = 0
    contained: int = 0
    contains: int = 0
    others: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)
    latencies_ms: Counter[int] = field(default_factory=Counter)
    similarities: "SimilarityBins" = field(default_factory=lambda: SimilarityBins())
    candidates: list[VerdictRecord] = field(default_factory=list)
    first_in_ms: int | None = None
    last_out_ms: int | None = None

    def add(self, record: WatchedRecord) -> None:
        if isinstance(record, DeadLetterRecord):
            self.dead_letters[record.reason] += 1
        elif not isinstance(record, VerdictRecord):
            self.others += 1
        elif record.verdict == "unique":
            self.unique += 1
            self._add_times(record)
        elif record.verdict in ("contained", "contains"):
            self.contained += record.verdict == "contained"
            self.contains += record.verdict == "contains"
            self._add_times(record)
        else:
            self.duplicates += 1
            self._add_times(record)
            if record.similarity is not None:
                self.similarities.add(record.similarity)
                if len(self.candidates) < EXAMPLE_CANDIDATES:
                    self.candidates.append(record)

    def _add_times(self, verdict: VerdictRecord) -> None:
        if verdict.source_timestamp is None or verdict.timestamp < 0:
            return
        self.latencies_ms[verdict.timestamp - verdict.source_timestamp] += 1
        if self.first_in_ms is None or verdict.source_timestamp < self.first_in_ms:
            self.first_in_ms = verdict.source_timestamp
        if self.last_out_ms is None or verdict.timestamp > self.last_out_ms:
            self.last_out_ms = verdict.timestamp

    def figures(self) -> SummaryFigures:
        documents = self.unique + self.duplicates + self.contained + self.contains
        span = None
        if self.first_in_ms is not None and self.last_out_ms is not None and self.last_out_ms > self.first_in_ms:
            span = (self.last_out_ms - self.first_in_ms) / 1000
        return SummaryFigures(
            documents=documents,
            duplicates=self.duplicates,
            contained=self.contained,
            contains=self.contains,
            dead_letters=sum(self.dead_letters.values()),
            dead_letter_reasons=dict(self.dead_letters.most_common()),
            other_records=self.others,
            duplicate_rate=self.duplicates / documents if documents else None,
            throughput=self.latencies_ms.total() / span if span else None,
            span_seconds=span,
            latency_p50_ms=nearest_rank(self.latencies_ms, 0.50),
            latency_p99_ms=nearest_rank(self.latencies_ms, 0.99),
        )

    def examples(self, count: int = 3) -> list[VerdictRecord]:
        """Duplicates spread over the similarities seen, from the least similar to the most (among the candidates).

        Spread over the distinct similarities, not over the duplicates: when
        most duplicates are exact copies, a median duplicate would be one too.
        """
        by_similarity: dict[float, VerdictRecord] = {}
        for verdict in self.candidates:
            by_similarity.setdefault(round(verdict.similarity or 0.0, 3), verdict)
        ranked = [by_similarity[similarity] for similarity in sorted(by_similarity)]
        if len(ranked) <= count:
            return ranked
        return [ranked[round(k * (len(ranked) - 1) / (count - 1))] for k in range(count)] if count > 1 else ranked[:1]


def nearest_rank(counts: Counter[int], quantile: float) -> int | None:
    """The smallest value with at least ``quantile`` of the values (counted) at or below it; None for no values."""
    total = counts.total()
    if not total:
        return None
    rank, seen = max(1, math.ceil(quantile * total)), 0
    for value in sorted(counts):
        seen += counts[value]
        if seen >= rank:
            return value
    raise AssertionError("unreachable: the ranks add up to the total")


@dataclass
class SimilarityBins:
    """The duplicates' similarities, counted per bin of 0.05 and of 0.1 (which one a summary shows depends on the
    lowest), without keeping each."""

    fine: Counter[int] = field(default_factory=Counter)
    coarse: Counter[int] = field(default_factory=Counter)
    lowest: float = math.inf

    def add(self, similarity: float) -> None:
        self.fine[_bin(similarity, 20)] += 1
        self.coarse[_bin(similarity, 10)] += 1
        self.lowest = min(self.lowest, similarity)

    def shown(self) -> tuple[int, Counter[int]]:
        """Bins per unit and the counts of the bins to show: 0.05 wide, or 0.1 when some are below 0.7."""
        return (20, self.fine) if self.lowest >= 0.7 else (10, self.coarse)


def _bin(similarity: float, per_unit: int) -> int:
    """Bin k holds [k / per_unit, (k + 1) / per_unit); bin per_unit holds exactly 1 (and nothing above)."""
    return min(per_unit, math.floor(similarity * per_unit + 1e-9))


def render_summary(
    summary: WatchSummary,
    examples: list[tuple[VerdictRecord, ShownText, ShownText]],
    next_steps: list[str],
    style: Style,
    dead_letters_read: bool,
) -> list[str]:
    """The summary's lines: figures, the similarity bins, the examples with their texts, where to look next."""
    f = summary.figures()
    lines = [style.paint("summary", "strong")]
    rate = "" if f.duplicate_rate is None else f" ({100 * f.duplicate_rate:.1f}%)"
    unique = f.documents - f.duplicates - f.contained - f.contains
    containment = f", {f.contained} contained, {f.contains} contains" if f.contained or f.contains else ""
    duplicates = counted(f.duplicates, "duplicate")
    lines.append(f"  documents     {f.documents} judged: {unique} unique, {duplicates}{rate}{containment}")
    if dead_letters_read:
        # A reason is a header of the record read: escaped as on the dead letter's own line.
        reasons = ", ".join(f"{printable(reason)} {count}" for reason, count in f.dead_letter_reasons.items())
        lines.append(f"  dead letters  {f.dead_letters}" + (f" ({reasons})" if reasons else ""))
    else:
        lines.append("  dead letters  not read (watch --dead-letters reads the dead-letter topic too)")
    if f.other_records:
        lines.append(f"  other records {f.other_records} (neither verdicts nor dead letters)")
    if f.throughput is not None and f.span_seconds is not None:
        lines.append(
            f"  throughput    {f.throughput:,.0f} docs/s over {f.span_seconds:.1f} s "
            "(first document in, last verdict out)"
        )
    if f.latency_p50_ms is not None:
        lines.append(
            f"  latency       p50 {_duration(f.latency_p50_ms)}, p99 {_duration(f.latency_p99_ms)} "
            "(a document's Kafka timestamp to its verdict's)"
        )
    lines += _similarity_lines(summary.similarities, style)
    if examples:
        lines.append("  examples      duplicates from the least similar to the most:")
        for verdict, document, match in examples:
            similarity = "?" if verdict.similarity is None else f"{verdict.similarity:.3f}"
            lines.append(f"    similarity {similarity}")
            lines += texts_lines(document, match, style, EXAMPLE_COLUMNS)
    if next_steps:
        lines.append("  next          " + next_steps[0])
        lines += [f"                {step}" for step in next_steps[1:]]
    return lines


def _similarity_lines(similarities: SimilarityBins, style: Style) -> list[str]:
    """A bar per bin of 0.05 of the duplicates' similarity (0.1 when some are below 0.7); 1 has a bin of its own."""
    per_unit, bins = similarities.shown()
    if not bins:
        return []
    largest = max(bins.values())
    lines: list[str] = []
    for k in sorted(bins, reverse=True):
        label = "1.00" if k == per_unit else f"{k / per_unit:.2f}-{(k + 1) / per_unit:.2f}"
        bar = style.paint("█" * max(1, round(_BAR_COLUMNS * bins[k] / largest)), "duplicate")
        heading = "  similarity    " if not lines else " " * 16
        lines.append(f"{heading}{label:<10} {bar} {bins[k]}")
    return lines


def _duration(milliseconds: int | None) -> str:
    if milliseconds is None:
        return "?"
    return f"{milliseconds} ms" if abs(milliseconds) < 10_000 else f"{milliseconds / 1000:.1f} s"
