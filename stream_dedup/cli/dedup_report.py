"""``stream-dedup dedup --report FILE.html``: one self-contained page about an offline run.

Counts (documents, and of each verdict: unique, duplicates and their share,
with containment on contained and contains, so that they add up to the
documents; rejected lines), the histogram
of the duplicates' similarities, and the largest clusters of copies with
example texts, so that a person can judge the verdicts by reading them.

A *cluster* is an original and every document that duplicates it, directly
or through a chain (a copy of a copy): each duplicate's match is an earlier
line, so a line's cluster is known when its verdict is, and kept in two
arrays (its original's line, its match's line and the similarity to it:
12 bytes per input line)
instead of the texts. The
example texts are read back from the input file at the end, for the few
lines shown; from standard input they cannot be, and the report says so.

Example:
    >>> report = DedupReport(DetectionConfig())
    >>> report.add([Verdict("a", "unique"), Verdict("b", "duplicate", "a", 0.9, 1)], [1, 2])
    >>> report.largest_clusters()
    [Cluster(original=1, size=2, copies=[2])]
"""

import json
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from html import escape
from typing import NamedTuple

import numpy as np

from stream_dedup.charts import Bar, Figure, bar_chart, html_figures, html_page, html_table
from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Verdict
from stream_dedup.engine.documents import DocumentFields, read_json_document
from stream_dedup.engine.field_paths import find_field
from stream_dedup.lsh.hamming_params import FINGERPRINT_BITS

#: Width of a similarity bin of the histogram.
BIN_WIDTH = 0.01
#: Characters of an example text shown.
EXCERPT_CHARACTERS = 400


class Cluster(NamedTuple):
    """An original (its line), how many documents the cluster holds, and the lines of its first copies."""

    original: int
    size: int
    copies: list[int]


class Example(NamedTuple):
    """A line's id and text, read back from the input for the report."""

    id: str
    text: str


class DedupReport:
    """What an offline run found, gathered as its verdicts come.

    Args:
        config: the detection settings of the run (shown, and the histogram starts at the lowest similarity
            its method reports: the threshold, or for ``simhash`` that of ``max_hamming`` bits).
    """

    def __init__(self, config: DetectionConfig) -> None:
        self.config = config
        self.documents = 0
        #: Verdicts by kind (``unique``, ``duplicate``, ``contained``, ``contains``).
        self.verdicts: Counter[str] = Counter()
        #: Per input line: the line of its cluster's original (itself for an original or a line without a document).
        self._original = array("i", [0])
        #: Per input line: the line its verdict matched (0 for none), and the similarity to it.
        self._match = array("i", [0])
        self._similarity = array("f", [0.0])
        self._copies: Counter[int] = Counter()
        # Rounded before the floor: 0.57 / 0.01 is 56.99999999999999, and the bars began a bin below the threshold.
        self._low = float(np.floor(round(_lowest_similarity(config) / BIN_WIDTH, 6)) * BIN_WIDTH)
        self._bins = [0] * (round((1.0 - self._low) / BIN_WIDTH) + 1)  # the last: similarity 1 (identical)

    def add(self, verdicts: Sequence[Verdict], lines: Sequence[int]) -> None:
        """Note the verdicts of the documents on ``lines`` (increasing, as read)."""
        if not lines:
            return
        if lines[-1] >= len(self._original):
            start = len(self._original)
            self._original.extend(range(start, lines[-1] + 1))
            self._match.extend(array("i", bytes(4 * (lines[-1] + 1 - start))))  # zeros
            self._similarity.extend(array("f", bytes(4 * (lines[-1] + 1 - start))))
        self.documents += len(verdicts)
        self.verdicts.update(verdict.verdict for verdict in verdicts)
        for verdict, line in zip(verdicts, lines, strict=True):
            if verdict.verdict != "duplicate" or verdict.match_source is None:
                continue
            original = self._original[verdict.match_source]
            self._original[line] = original
            self._match[line] = verdict.match_source
            self._copies[original] += 1
            similarity = verdict.similarity or 0.0
            self._similarity[line] = similarity
            self._bins[self._bin(similarity)] += 1

    @property
    def duplicates(self) -> int:
        """Documents reported ``duplicate``."""
        return self.verdicts["duplicate"]

    def _bin(self, similarity: float) -> int:
        """The histogram bin of ``similarity``: the last for identical texts, else a bin of the range."""
        last = len(self._bins) - 1
        if similarity >= 1.0:
            return last
        return min(max(int((similarity - self._low) / BIN_WIDTH + 1e-9), 0), last - 1)

    def largest_clusters(self, count: int = 10, copies: int = 3) -> list[Cluster]:
        """The ``count`` clusters with the most documents (ties: the earliest original), with their first copies."""
        ranked = sorted(self._copies.items(), key=lambda item: (-item[1], item[0]))[:count]
        originals = np.frombuffer(self._original, dtype=np.int32)
        clusters = []
        for original, size in ranked:
            members = np.flatnonzero(originals == original)
            clusters.append(Cluster(original, size + 1, [int(m) for m in members[members != original][:copies]]))
        return clusters

    def histogram(self) -> list[Bar]:
        """Duplicates by similarity, in bins of :data:`BIN_WIDTH` from the threshold, the last for identical texts."""
        bars = [Bar(f"{self._low + i * BIN_WIDTH:.2f}", count) for i, count in enumerate(self._bins[:-1])]
        return [*bars, Bar("1 (same)", self._bins[-1])]

    def render(self, source: str, rejected: int, seconds: float, examples: Mapping[int, Example] | None = None) -> str:
        """The page; ``examples`` (line -> id and text) fill the clusters' rows, None when they could not be read."""
        share = self.duplicates / self.documents if self.documents else None
        clusters = self.largest_clusters()
        figures = [
            Figure("documents", "documents", f"{self.documents:,}", self.documents),
            *(self._verdict_figure(kind) for kind in self._kinds()),
            Figure("duplicate-share", "duplicate share", "-" if share is None else f"{share:.1%}", share),
            Figure("rejected", "rejected lines", f"{rejected:,}", rejected),
            Figure("clusters", "originals with copies", f"{len(self._copies):,}", len(self._copies)),
            Figure("throughput", "documents/s", f"{self.documents / seconds:,.0f}" if seconds else "-"),
        ]
        parameters = f"{_method_parameters(self.config)}, parameters {self.config.fingerprint()}"
        body = [
            f"<h1>stream-dedup report: {escape(source)}</h1>",
            f'<div class="subtitle">{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {seconds:.1f} s. '
            f"{escape(parameters)}</div>",
            html_figures(figures),
            "<h2>Similarity of the duplicates to their match</h2>",
            bar_chart(
                self.histogram(),
                title=f"{self.duplicates:,} duplicates by {_similarity_kind(self.config)}",
                x_label="similarity (bins of 0.01; the last: identical after normalisation)",
                y_label="duplicates",
                width=900,
                empty="no duplicates",
            ),
            f"<h2>The {len(clusters)} largest clusters</h2>",
            '<p class="note">A cluster is an original and every document that duplicates it, directly or '
            "through a copy of a copy; up to three copies of each are shown.</p>",
            self._clusters_table(clusters, examples),
        ]
        return html_page(f"stream-dedup report: {source}", "".join(body))

    def _kinds(self) -> tuple[str, ...]:
        """The verdict kinds the run can report: every verdict written is in one of their counts."""
        if self.config.containment_threshold is None:
            return ("unique", "duplicate")
        return ("unique", "duplicate", "contained", "contains")

    def _verdict_figure(self, kind: str) -> Figure:
        """The count of verdicts ``kind``, its element id the plural the page always had for duplicates."""
        key = {"duplicate": "duplicates"}.get(kind, kind)
        return Figure(key, key, f"{self.verdicts[kind]:,}", self.verdicts[kind])

    def _clusters_table(self, clusters: Sequence[Cluster], examples: Mapping[int, Example] | None) -> str:
        if not clusters:
            return '<p id="no-clusters" class="note">No duplicates: no cluster.</p>'
        note = ""
        if examples is None:
            examples = {}
            note = '<p class="note">Texts are not shown: the input was standard input, which cannot be read twice.</p>'
        rows = []
        for rank, cluster in enumerate(clusters, start=1):
            for line in [cluster.original, *cluster.copies]:
                example = examples.get(line, Example("", ""))
                copy = line != cluster.original
                match = f"{self._similarity[line]:.3f} to line {self._match[line]}" if copy else "original"
                excerpt = example.text[:EXCERPT_CHARACTERS] + ("..." if len(example.text) > EXCERPT_CHARACTERS else "")
                rows.append([rank, cluster.size, line, example.id, match, excerpt])
        headers = ["cluster", "documents", "line", "id", "similarity to its match", "text"]
        return note + html_table(headers, rows, [0, 1, 2], "clusters", prose=[5])


def read_examples(lines: Iterable[str], wanted: set[int], id_field: str, text_field: str) -> dict[int, Example]:
    """The id and original text of each wanted line (numbered from 1) of a JSON-lines input."""
    found = {}
    for number, line in enumerate(lines, start=1):
        if number in wanted:
            # Checked again before json.loads: the file may have changed since the run.
            fields = read_json_document(line, id_field, text_field)
            if isinstance(fields, DocumentFields) and fields.id is not None:
                text = find_field(json.loads(line), text_field)
                found[number] = Example(fields.id, str(text))
    return found


def _lowest_similarity(config: DetectionConfig) -> float:
    """The lowest similarity a duplicate of ``config``'s method can have: the threshold, or for ``simhash``
    (which does not read the threshold) ``1 - max_hamming / 64``."""
    if config.method == "simhash":
        return 1.0 - config.max_hamming / FINGERPRINT_BITS
    return config.threshold


def _method_parameters(config: DetectionConfig) -> str:
    """What decided the run's duplicates, as the page's subtitle shows them: only settings its method reads."""
    shingles = f"{config.shingle_unit} {config.shingle_size}-shingles"
    if config.method == "simhash":
        return (
            f"method simhash, within {config.max_hamming} bits of {FINGERPRINT_BITS}, {shingles}, "
            f"{config.simhash_weighting} weighting"
        )
    banding = config.banding()
    minhash = (
        f"threshold {config.threshold:g}, {banding.bands} bands x {banding.rows_per_band} rows of "
        f"{config.num_perm}, {shingles}, verification {config.verification}"
    )
    if config.method == "combined":
        return f"method combined: {minhash}, within {config.max_hamming} bits of SimHash"
    return minhash


def _similarity_kind(config: DetectionConfig) -> str:
    """What a duplicate's similarity is under ``config``'s method."""
    if config.method == "simhash":
        return f"SimHash similarity (1 - distance/{FINGERPRINT_BITS})"
    return "estimated Jaccard similarity"
