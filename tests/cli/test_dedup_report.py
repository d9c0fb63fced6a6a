"""``stream-dedup dedup --report``: counts, the similarity histogram and the largest clusters of a run.

Clusters are checked against a union-find over the verdicts (truth computed without the
report's code); the page is read as served here and as Chromium renders it in
tests/cli/test_pictures_in_browser.py.
"""

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.charts import Bar
from stream_dedup.cli.dedup_report import BIN_WIDTH, DedupReport
from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Verdict
from tests.browser import PageElements
from tests.cli.test_dedup_command import containment_corpus, jsonl, near_copy, run_cli, text, verdict_records

HOSTILE = '<script>alert("x")</script>'


def union_find_sizes(matches: dict[int, int], lines: list[int]) -> dict[int, int]:
    """Size of each component of the graph line -- match, keyed by its smallest line."""
    parent = {line: line for line in lines}

    def find(line: int) -> int:
        while parent[line] != line:
            line = parent[line]
        return line

    for line, match in matches.items():
        a, b = find(line), find(match)
        parent[max(a, b)] = min(a, b)
    return dict(Counter(find(line) for line in lines))


@st.composite
def runs(draw: st.DrawFn) -> tuple[list[int], list[Verdict]]:
    """Increasing line numbers (with gaps: rejected lines) and a verdict for each; duplicates match earlier lines."""
    count = draw(st.integers(1, 60))
    gaps = draw(st.lists(st.integers(1, 3), min_size=count, max_size=count))
    lines = [sum(gaps[: i + 1]) for i in range(count)]
    verdicts = []
    for i, line in enumerate(lines):
        if i and draw(st.booleans()):
            match = lines[draw(st.integers(0, i - 1))]
            similarity = draw(st.sampled_from([0.8, 0.815, 0.9, 0.999, 1.0]))
            verdicts.append(Verdict(f"id{line}", "duplicate", f"id{match}", similarity, match))
        else:
            verdicts.append(Verdict(f"id{line}", "unique"))
    return lines, verdicts


@settings(deadline=None)  # time is not the point
@given(runs(), st.integers(1, 7))
def test_clusters_are_the_connected_groups_of_duplicates_and_their_matches(
    run: tuple[list[int], list[Verdict]], batch: int
) -> None:
    lines, verdicts = run
    report = DedupReport(DetectionConfig(threshold=0.8))
    for start in range(0, len(lines), batch):
        report.add(verdicts[start : start + batch], lines[start : start + batch])

    matches = {line: v.match_source for line, v in zip(lines, verdicts, strict=True) if v.match_source is not None}
    expected = {root: size for root, size in union_find_sizes(matches, lines).items() if size > 1}
    clusters = report.largest_clusters(count=len(lines))
    assert {c.original: c.size for c in clusters} == expected
    assert [c.size for c in clusters] == sorted((c.size for c in clusters), reverse=True)
    for cluster in clusters:
        assert cluster.copies == sorted(cluster.copies)[:3]
        assert all(line in matches for line in cluster.copies)
    assert report.documents == len(lines) and report.duplicates == len(matches)


def test_the_histogram_counts_duplicates_by_similarity_from_the_threshold_with_identical_ones_apart() -> None:
    report = DedupReport(DetectionConfig(threshold=0.8))
    similarities = [0.8, 0.8049, 0.815, 0.999, 1.0, 1.0]
    report.add(
        [Verdict("o", "unique")] + [Verdict(f"d{i}", "duplicate", "o", s, 1) for i, s in enumerate(similarities)],
        list(range(1, len(similarities) + 2)),
    )

    bars = report.histogram()

    assert len(bars) == round(0.2 / BIN_WIDTH) + 1
    counts = {bar.label: bar.value for bar in bars if bar.value}
    assert counts == {"0.80": 2, "0.81": 1, "0.99": 1, "1 (same)": 2}


@pytest.mark.parametrize("threshold", [0.29, 0.57, 0.58, 0.8])
def test_the_histogram_starts_at_the_threshold_even_where_its_division_by_the_bin_width_rounds_down(
    threshold: float,
) -> None:
    # 0.57 / 0.01 is 56.99999999999999 in floating point: the first bar was 0.56, below every duplicate.
    report = DedupReport(DetectionConfig(threshold=threshold))
    report.add([Verdict("o", "unique"), Verdict("d", "duplicate", "o", threshold, 1)], [1, 2])

    bars = report.histogram()

    assert bars[0] == Bar(f"{threshold:.2f}", 1)
    assert len(bars) == round((1.0 - threshold) / BIN_WIDTH) + 1


@pytest.mark.parametrize("threshold", [0.8, 0.99])
def test_a_simhash_runs_histogram_starts_at_its_largest_distance_whatever_the_unread_threshold(
    threshold: float,
) -> None:
    # SimHash reports 1 - distance/64 and never reads the threshold: at 16 bits its duplicates go down to 0.75,
    # and those below the threshold were counted in its bar (0.8 or 0.99), a similarity no pair of them had.
    config = DetectionConfig(method="simhash", max_hamming=16, threshold=threshold)
    report = DedupReport(config)
    distances = [16, 13, 3, 0]
    report.add(
        [Verdict("o", "unique")]
        + [Verdict(f"d{i}", "duplicate", "o", round(1 - d / 64, 4), 1, d) for i, d in enumerate(distances)],
        list(range(1, len(distances) + 2)),
    )

    bars = report.histogram()

    assert bars[0].label == "0.75" and len(bars) == round(0.25 / BIN_WIDTH) + 1
    assert {bar.label: bar.value for bar in bars if bar.value} == {"0.75": 1, "0.79": 1, "0.95": 1, "1 (same)": 1}
    page = "".join(PageElements(report.render("in.jsonl", 0, 1.0)).text)
    assert "method simhash, within 16 bits of 64" in page and "SimHash similarity (1 - distance/64)" in page
    assert "threshold" not in page and "bands" not in page and "Jaccard" not in page


def test_a_combined_runs_report_names_its_hamming_distance_beside_the_threshold() -> None:
    report = DedupReport(DetectionConfig(method="combined", max_hamming=10))
    page = "".join(PageElements(report.render("-", 0, 1.0)).text)
    assert "method combined: threshold 0.8," in page and "within 10 bits of SimHash" in page


def corpus_with_clusters(path: Path) -> list[dict[str, str]]:
    """Four originals copied 3, 2, 1 and 0 times (near copies), shuffled after the originals; one hostile record."""
    originals = [{"id": f"original-{i}", "text": text(i, 30)} for i in range(4)]  # under 400 characters: not cut
    copies = [
        {"id": f"copy-{i}-{k}", "text": near_copy(originals[i]["text"]) + f" extra{k}"}
        for i, times in enumerate([3, 2, 1, 0])
        for k in range(times)
    ]
    random.Random(5).shuffle(copies)
    hostile = {"id": HOSTILE, "text": originals[3]["text"] + " " + HOSTILE}
    records = [*originals, *copies, hostile]
    path.write_bytes(jsonl(*records) + b"not json\n")
    return records


def test_the_report_of_a_run_counts_its_verdicts_and_shows_its_largest_clusters_escaped(tmp_path: Path) -> None:
    records = corpus_with_clusters(tmp_path / "in.jsonl")

    result = run_cli("in.jsonl", "-o", "out.jsonl", "--report", "report.html", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    assert b"report written to report.html" in result.stderr
    verdicts = verdict_records((tmp_path / "out.jsonl").read_bytes())
    page = PageElements((tmp_path / "report.html").read_text(encoding="utf-8"))
    duplicates = [v for v in verdicts if v["verdict"] == "duplicate"]
    assert page.value("documents") == len(verdicts) == len(records)
    assert page.value("duplicates") == len(duplicates) == 7
    assert page.value("rejected") == 1
    assert "script" not in page.tags
    rows = page.tables["clusters"]
    by_cluster: dict[str, list[list[str]]] = {}
    for row in rows:
        by_cluster.setdefault(row[0], []).append(row)
    sizes = [(group[0][1], group[0][3]) for group in by_cluster.values()]
    assert sizes == [("4", "original-0"), ("3", "original-1"), ("2", "original-2"), ("2", "original-3")]
    texts = {record["id"]: record["text"] for record in records}
    for row in rows:
        assert row[5] == texts[row[3]]  # each example is its line's original text
    hostile_row = next(row for row in rows if row[3] == HOSTILE)
    assert hostile_row[5].endswith(HOSTILE)


def test_the_report_counts_every_verdict_kind_written_with_containment_on(tmp_path: Path) -> None:
    containment_corpus(tmp_path / "in.jsonl")

    containment = ("--containment-threshold", "0.8")
    result = run_cli("in.jsonl", "-o", "out.jsonl", *containment, "--report", "r.html", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    kinds = Counter(v["verdict"] for v in verdict_records((tmp_path / "out.jsonl").read_bytes()))
    page = PageElements((tmp_path / "r.html").read_text(encoding="utf-8"))
    shown = {kind: page.value(key) for kind, key in [("unique", "unique"), ("duplicate", "duplicates")]}
    shown |= {kind: page.value(kind) for kind in ("contained", "contains")}
    assert shown == kinds and set(kinds) == {"unique", "duplicate", "contained", "contains"}
    assert page.value("documents") == sum(kinds.values()) == 6


def test_a_report_of_standard_input_says_why_it_shows_no_texts(tmp_path: Path) -> None:
    original = text(1)
    stdin = jsonl({"id": "a", "text": original}, {"id": "b", "text": near_copy(original)})

    result = run_cli("-", "-o", "out.jsonl", "--report", "report.html", cwd=tmp_path, stdin=stdin)

    assert result.returncode == 0, result.stderr
    page = PageElements((tmp_path / "report.html").read_text(encoding="utf-8"))
    assert page.value("duplicates") == 1
    assert "standard input, which cannot be read twice" in "".join(page.text)
    assert [row[3] for row in page.tables["clusters"]] == ["", ""]


def test_a_run_without_duplicates_reports_none(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}, {"id": "b", "text": text(2)}))

    result = run_cli("in.jsonl", "-o", "out.jsonl", "--report", "report.html", cwd=tmp_path)

    assert result.returncode == 0, result.stderr
    page = PageElements((tmp_path / "report.html").read_text(encoding="utf-8"))
    assert page.value("duplicates") == 0 and "no-clusters" in page.attributes
    assert "no duplicates" in "".join(page.text)


def test_a_report_path_that_cannot_be_written_fails_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}))

    result = run_cli("in.jsonl", "--report", "missing/report.html", cwd=tmp_path)

    assert result.returncode == 2
    assert b"invalid setting '--report': missing/report.html" in result.stderr
    assert json.dumps("a").encode() not in result.stdout  # no verdict written


def test_a_report_path_that_cannot_be_written_leaves_an_earlier_runs_verdicts_as_they_were(tmp_path: Path) -> None:
    (tmp_path / "in.jsonl").write_bytes(jsonl({"id": "a", "text": text(1)}))
    assert run_cli("in.jsonl", "--output", "verdicts.jsonl", cwd=tmp_path).returncode == 0
    earlier = (tmp_path / "verdicts.jsonl").read_bytes()

    result = run_cli("in.jsonl", "--output", "verdicts.jsonl", "--report", "missing/report.html", cwd=tmp_path)

    assert result.returncode == 2
    assert earlier and (tmp_path / "verdicts.jsonl").read_bytes() == earlier
