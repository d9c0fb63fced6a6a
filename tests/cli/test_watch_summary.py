"""``watch --summary``: figures that add up, quantiles by the book, examples spread over the similarities."""

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_dedup.cli.terminal_text import Style
from stream_dedup.cli.verdict_lines import ShownText
from stream_dedup.cli.watch_summary import WatchSummary, nearest_rank, render_summary
from stream_dedup.cli.watched_records import DeadLetterRecord, VerdictRecord, watched_record

from .consumed import T0, consumed, verdict_value


def _verdict(doc_id: str, similarity: float | None = None, sent_ms: int = 0, judged_ms: int = 100) -> VerdictRecord:
    """A verdict of a document timestamped ``T0 + sent_ms`` whose verdict is timestamped ``T0 + judged_ms``."""
    duplicate_of = None if similarity is None else "orig"
    value = verdict_value(
        doc_id, duplicate_of, similarity, source=(0, 1, T0 + sent_ms), match=(0, 0) if duplicate_of else None
    )
    record = watched_record(consumed(value, timestamp=T0 + judged_ms))
    assert isinstance(record, VerdictRecord)
    return record


def test_the_figures_add_up() -> None:
    summary = WatchSummary()
    for i in range(6):
        summary.add(_verdict(f"u{i}", sent_ms=1000 * i, judged_ms=1000 * i + 10 * (i + 1)))
    for i, similarity in enumerate([1.0, 0.93, 0.85, 1.0]):
        summary.add(_verdict(f"d{i}", similarity, sent_ms=6000 + 1000 * i, judged_ms=6000 + 1000 * i + 100))
    summary.add(DeadLetterRecord("invalid_json", "not JSON", None))
    summary.add(DeadLetterRecord("invalid_json", "not JSON", None))
    summary.add(DeadLetterRecord("empty_text", "empty", None))
    summary.add(watched_record(consumed(b"not a verdict")))
    figures = summary.figures()
    assert (figures.documents, figures.duplicates, figures.dead_letters, figures.other_records) == (10, 4, 3, 1)
    assert figures.dead_letter_reasons == {"invalid_json": 2, "empty_text": 1}
    assert figures.duplicate_rate == 0.4
    assert figures.span_seconds == 9.1  # first document in at T0, last verdict out at T0 + 9,100 ms
    assert figures.throughput == 10 / 9.1
    latencies = [10, 20, 30, 40, 50, 60, 100, 100, 100, 100]
    assert (figures.latency_p50_ms, figures.latency_p99_ms) == (50, 100)
    assert sorted(summary.latencies_ms.elements()) == latencies


def test_nothing_read_gives_no_figures() -> None:
    figures = WatchSummary().figures()
    assert (figures.documents, figures.duplicate_rate, figures.throughput, figures.latency_p50_ms) == (
        0,
        None,
        None,
        None,
    )
    lines = render_summary(WatchSummary(), [], [], Style(colour=False), dead_letters_read=False)
    assert lines[1] == "  documents     0 judged: 0 unique, 0 duplicates"
    assert "not read" in lines[2]


def test_verdicts_without_timestamps_count_but_time_nothing() -> None:
    summary = WatchSummary()
    value = b'{"id": "a", "verdict": "unique", "source": {"topic": "d", "partition": 0, "offset": 1, "timestamp": -1}}'
    summary.add(watched_record(consumed(value)))
    figures = summary.figures()
    assert figures.documents == 1 and figures.throughput is None and figures.latency_p99_ms is None


@given(
    st.lists(st.integers(min_value=-1000, max_value=10**6), min_size=1, max_size=300),
    st.sampled_from([0.5, 0.9, 0.99, 1.0]),
)
def test_nearest_rank_matches_its_definition(values: list[int], quantile: float) -> None:
    chosen = nearest_rank(Counter(values), quantile)
    at_or_below = sum(1 for v in values if v <= chosen)  # type: ignore[operator]
    assert chosen in values and at_or_below >= quantile * len(values)
    assert all(
        sum(1 for v in values if v <= smaller) < quantile * len(values) for smaller in values if smaller < chosen
    )  # type: ignore[operator]


def test_examples_spread_over_the_similarities_not_the_duplicates() -> None:
    summary = WatchSummary()
    for i in range(50):
        summary.add(_verdict(f"exact{i}", 1.0))
    for i, similarity in enumerate([0.81, 0.9, 0.95]):
        summary.add(_verdict(f"near{i}", similarity))
    assert [v.similarity for v in summary.examples()] == [0.81, 0.95, 1.0]
    assert [v.id for v in summary.examples(2)] == ["near0", "exact0"]


def test_the_summary_reads_in_five_seconds() -> None:
    summary = WatchSummary()
    summary.add(_verdict("u1", sent_ms=0, judged_ms=40))
    example = _verdict("ad-2", 0.857, sent_ms=1000, judged_ms=1060)
    summary.add(example)
    summary.add(DeadLetterRecord("invalid_json", "not JSON", None))
    texts = (
        ShownText("ad-2", "sunny flat near the park, rent 900"),
        ShownText("ad-1", "sunny flat near the park, rent 950"),
    )
    lines = render_summary(summary, [(example, *texts)], ["metrics http://127.0.0.1:9400/metrics"], Style(False), True)
    assert lines == [
        "summary",
        "  documents     2 judged: 1 unique, 1 duplicate (50.0%)",
        "  dead letters  1 (invalid_json 1)",
        "  throughput    2 docs/s over 1.1 s (first document in, last verdict out)",
        "  latency       p50 40 ms, p99 60 ms (a document's Kafka timestamp to its verdict's)",
        "  similarity    0.85-0.90  ██████████████████████████████ 1",
        "  examples      duplicates from the least similar to the most:",
        "    similarity 0.857",
        "    document  ad-2  «sunny flat near the park, rent» 900",
        "    match     ad-1  «sunny flat near the park, rent» 950",
        "  next          metrics http://127.0.0.1:9400/metrics",
    ]


def test_similarity_bins_are_wider_when_similarities_are_low() -> None:
    summary = WatchSummary()
    for similarity in (0.55, 0.62, 0.97, 1.0, 1.0):
        summary.add(_verdict("d", similarity))
    lines = [line for line in render_summary(summary, [], [], Style(False), False) if "█" in line]
    labels = [line.split()[-3] if line.startswith("  similarity") else line.split()[0] for line in lines]
    assert labels == ["1.00", "0.90-1.00", "0.60-0.70", "0.50-0.60"]
    assert [int(line.split()[-1]) for line in lines] == [2, 1, 1, 1]


def test_containment_verdicts_are_counted_apart_from_duplicates() -> None:
    summary = WatchSummary()
    summary.add(_verdict("u0"))
    summary.add(_verdict("d0", 0.9))
    for kind, doc_id in (("contained", "c0"), ("contained", "c1"), ("contains", "c2")):
        value = verdict_value(doc_id, "orig", 0.5, source=(0, 1, T0), match=(0, 0), containment=(kind, 0.95))
        record = watched_record(consumed(value, timestamp=T0 + 100))
        assert isinstance(record, VerdictRecord)
        summary.add(record)
    figures = summary.figures()
    assert (figures.documents, figures.duplicates, figures.contained, figures.contains) == (5, 1, 2, 1)
    assert figures.duplicate_rate == 0.2
    assert summary.similarities.shown() == (20, Counter({18: 1}))
    lines = render_summary(summary, [], [], Style(colour=False), dead_letters_read=False)
    assert lines[1] == "  documents     5 judged: 1 unique, 1 duplicate (20.0%), 2 contained, 1 contains"


def test_a_dead_letter_reason_cannot_drive_the_terminal_from_the_summary() -> None:
    summary = WatchSummary()
    summary.add(DeadLetterRecord("\x1b[2J\x1b]0;owned\x07\u202eevil", "error", None))
    lines = render_summary(summary, [], [], Style(colour=False), dead_letters_read=True)
    assert lines[2] == "  dead letters  1 (\\x1b[2J\\x1b]0;owned\\x07\\u202eevil 1)"


@pytest.mark.parametrize("similarity", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_a_record_with_a_similarity_no_number_is_another_record_and_the_summary_still_ends(similarity: str) -> None:
    value = verdict_value("d0", "orig", 0.5, source=(0, 1, T0), match=(0, 0)).replace(b"0.5", similarity.encode())
    summary = WatchSummary()
    summary.add(watched_record(consumed(value, timestamp=T0 + 100)))
    summary.add(_verdict("d1", 0.9))
    lines = render_summary(summary, [], [], Style(colour=False), dead_letters_read=False)
    assert lines[1] == "  documents     1 judged: 0 unique, 1 duplicate (100.0%)"
    assert "  other records 1 (neither verdicts nor dead letters)" in lines


def test_memory_does_not_grow_with_the_verdicts_read() -> None:
    """A watch left running for days on a busy topic kept two numbers per verdict."""
    summary = WatchSummary()
    for i in range(20_000):
        summary.add(_verdict(f"d{i}", 0.8 + (i % 200) / 1000, sent_ms=i, judged_ms=i + 40 + i % 3))
    assert len(summary.latencies_ms) == 3 and summary.latencies_ms.total() == 20_000
    per_unit, bins = summary.similarities.shown()
    assert per_unit == 20 and sorted(bins) == [16, 17, 18, 19] and bins.total() == 20_000
    assert (summary.figures().latency_p50_ms, summary.figures().latency_p99_ms) == (41, 42)
