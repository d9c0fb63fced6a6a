"""``stream-dedup params``: the banding for a threshold, its S-curve, and its accuracy on a sample."""

import itertools
import json
import os
import random
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from stream_dedup.cli.main import main
from stream_dedup.text import Shingling, normalize, shingle_set

REPO_ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"
CURVE_LINE = re.compile(r"^  (\d\.\d\d)  (\d\.\d{6})(  <- threshold)?$")


def params(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str, str]:
    code = main(["params", *flags])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def s_curve(out: str) -> list[tuple[float, float, bool]]:
    rows = []
    for line in out.splitlines():
        match = CURVE_LINE.match(line)
        if match:
            rows.append((float(match[1]), float(match[2]), match[3] is not None))
    return rows


def candidate_probability(similarity: float, bands: int, rows: int) -> float:
    return 1.0 - (1.0 - similarity**rows) ** bands


def test_threshold_0_8_with_128_slots_chooses_16_bands_of_6_rows(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = params(capsys, "--threshold", "0.8", "--num-perm", "128")

    assert code == 0
    assert "threshold 0.8, num_perm 128, scheme oph" in out.splitlines()
    assert "bands (b) 16, rows per band (r) 6" in out.splitlines()


def test_prints_the_s_curve_from_0_1_to_1_with_the_threshold_marked(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = params(capsys, "--threshold", "0.8", "--num-perm", "128")

    curve = s_curve(out)
    assert [s for s, _, _ in curve] == [round(0.1 + 0.05 * i, 2) for i in range(19)]
    for similarity, probability, _ in curve:
        assert probability == pytest.approx(candidate_probability(similarity, 16, 6), abs=5e-7)
    assert [s for s, _, marked in curve if marked] == [0.8]
    probabilities = [p for _, p, _ in curve]
    assert probabilities == sorted(probabilities)


def test_prints_false_positive_and_false_negative_probabilities(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = params(capsys, "--threshold", "0.8", "--num-perm", "128")

    positive = re.search(r"^false positive probability \(mean over J < 0\.8\) (\d\.\d{4})$", out, re.M)
    negative = re.search(r"^false negative probability \(mean over J >= 0\.8\) (\d\.\d{5})$", out, re.M)
    assert positive and negative, out
    # Means of the S-curve below the threshold, and of its complement above it.
    below = [candidate_probability(0.8 * i / 4000, 16, 6) for i in range(4001)]
    above = [1 - candidate_probability(0.8 + 0.2 * i / 4000, 16, 6) for i in range(4001)]
    assert float(positive[1]) == pytest.approx(sum(below) / len(below), abs=2e-4)
    assert float(negative[1]) == pytest.approx(sum(above) / len(above), abs=2e-5)
    assert "candidate probability at threshold 0.9923" in out


@pytest.mark.parametrize("sketch_bits, error", [("1024", "0.0187"), ("4096", "0.0094")])
def test_prints_the_verification_sketch_size_and_its_standard_error_at_the_threshold(
    capsys: pytest.CaptureFixture[str], sketch_bits: str, error: str
) -> None:
    _, out, err = params(capsys, "--threshold", "0.8", "--sketch-bits", sketch_bits)

    assert err == ""
    bytes_per_document = int(sketch_bits) // 8
    line = f"verification sketch {sketch_bits} bits ({bytes_per_document} bytes per document): "
    assert f"{line}estimate standard error {error} at J = 0.8" in out.splitlines()


def test_explicit_16_bands_of_8_rows_are_used_as_given(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = params(capsys, "--threshold", "0.8", "--num-perm", "128", "--bands", "16", "--rows-per-band", "8")

    assert code == 0
    assert err == ""
    assert "bands (b) 16, rows per band (r) 8" in out.splitlines()
    curve = dict((s, p) for s, p, _ in s_curve(out))
    assert curve[0.8] == pytest.approx(candidate_probability(0.8, 16, 8), abs=5e-7)


@pytest.mark.parametrize(
    "flags, setting",
    [
        (["--threshold", "1.5"], "threshold"),
        (["--bands", "16"], "bands"),
        (["--bands", "16", "--rows-per-band", "9"], "bands"),
        (["--num-perm", "3"], "num_perm"),
    ],
)
def test_bad_setting_exits_with_code_2_and_names_the_setting(
    capsys: pytest.CaptureFixture[str], flags: list[str], setting: str
) -> None:
    code, out, err = params(capsys, *flags)

    assert code == 2
    assert out == ""
    assert err.startswith(f"stream-dedup: invalid setting '{setting}'")


def _words(rng: random.Random, count: int) -> list[str]:
    return ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(6, 10))) for _ in range(count)]


def planted_sample(path: Path, originals: int, planted: int) -> None:
    """``originals`` unrelated texts, then one near-copy (one word of 60 replaced) of each of the first ``planted``."""
    rng = random.Random(42)
    texts = [" ".join(_words(rng, 60)) for _ in range(originals)]
    records = [{"id": f"o{i}", "text": t} for i, t in enumerate(texts)]
    for i in range(planted):
        words = texts[i].split()
        words[30] = "planted"
        records.append({"id": f"p{i}", "text": " ".join(words)})
    lines = [json.dumps(r) for r in records]
    lines.insert(3, "this line is not JSON and is skipped")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_sample_reports_precision_and_recall_of_planted_near_duplicates(tmp_path: Path) -> None:
    planted_sample(tmp_path / "sample.jsonl", originals=30, planted=8)
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}

    result = subprocess.run(
        [sys.executable, "-m", "stream_dedup.cli.main", "params", "--threshold", "0.8", "--sample", "sample.jsonl"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 0, result.stderr
    tail = result.stdout.splitlines()[-4:]
    assert tail == [
        "sample sample.jsonl: 38 documents",
        "  pairs with exact J >= 0.8: 8",
        "  pairs flagged by method minhash: 8",
        "  precision 1.0000, recall 1.0000",
    ]


def test_sample_limit_caps_the_documents_measured(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    planted_sample(tmp_path / "sample.jsonl", originals=30, planted=8)

    # The first 30 documents are the unrelated originals: no true pair, nothing flagged.
    code, out, _ = params(capsys, "--sample", str(tmp_path / "sample.jsonl"), "--sample-limit", "30")

    assert code == 0
    assert out.splitlines()[-3:] == [
        "  pairs with exact J >= 0.8: 0",
        "  pairs flagged by method minhash: 0",
        "  precision 1.0000, recall 1.0000",
    ]
    assert f"sample {tmp_path / 'sample.jsonl'}: 30 documents" in out


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "holds no record to measure: it is empty"),
        ('{"id": "a", "body": "text under another field"}\nnot JSON\n', "all 2 lines were rejected (line 1: field"),
    ],
)
def test_a_sample_without_usable_records_is_refused_naming_the_file(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str, reason: str
) -> None:
    sample = tmp_path / "sample.jsonl"
    sample.write_text(content, encoding="utf-8")

    code, _, err = params(capsys, "--sample", str(sample))

    assert code == 1
    assert err.startswith(f"stream-dedup: sample {sample} ")
    assert reason in err


def test_simhash_shows_the_hamming_tables_and_the_probes_per_query(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["params", "--method", "simhash", "--max-hamming", "3", "--max-documents", "4000000"]) == 0
    out = capsys.readouterr().out
    assert "Hamming index: 4 tables, levels [4], key bits [16, 16, 16, 16]" in out
    # 4 tables x 4,000,000 / 2**16 documents share a query's key, on average.
    assert "expected fingerprints probed per query at 4,000,000 documents (max_documents): 244.1" in out
    assert "bands (b)" not in out  # no banding: simhash has none


def svg_series(path: Path) -> dict[str, int]:
    """Each series of a chart: its label and how many points it has."""
    root = ET.parse(path).getroot()  # raises if the file is not well-formed XML
    return {g.attrib["data-label"]: int(g.attrib["data-points"]) for g in root.iter(f"{SVG}g")}


def brute_force_pairs(path: Path, low: float) -> int:
    """Pairs of the sample's documents with exact Jaccard of character 5-shingles ``>= low``, all compared."""
    texts = [json.loads(line)["text"] for line in path.read_text().splitlines() if line.startswith("{")]
    sets = [shingle_set(normalize(t), Shingling(unit="char", size=5)) for t in texts]
    return sum(len(a & b) / len(a | b) >= low for a, b in itertools.combinations(sets, 2))


def test_plot_draws_the_theoretical_s_curve_and_marks_the_threshold(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    plot = tmp_path / "curve.svg"

    code, out, _ = params(capsys, "--threshold", "0.8", "--plot", str(plot))

    assert code == 0
    assert out.splitlines()[-1] == f"S-curve drawn to {plot}"
    assert svg_series(plot) == {"P(candidate) = 1 - (1 - s^6)^16, in theory": 201}
    assert "threshold 0.8" in plot.read_text()


def test_plot_with_a_sample_adds_the_shares_of_its_pairs_found_by_exact_jaccard(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    planted_sample(tmp_path / "sample.jsonl", originals=30, planted=8)
    plot = tmp_path / "curve.svg"

    code, out, _ = params(capsys, "--sample", str(tmp_path / "sample.jsonl"), "--plot", str(plot))

    assert code == 0
    pairs = brute_force_pairs(tmp_path / "sample.jsonl", 0.4)
    assert pairs == 8  # the planted near-copies; unrelated texts share almost no shingle
    assert f"({pairs:,} pairs by exact Jaccard)" in out
    series = svg_series(plot)
    measured = [label for label in series if "measured" in label]
    assert measured[0].startswith(f"shared a band, measured on sample.jsonl: {pairs} pairs of 38 documents")
    assert measured[1].startswith("reported duplicate, measured")
    # Each planted pair is one point of one bucket: at most as many points as pairs.
    assert all(1 <= series[label] <= pairs for label in measured)


def test_simhash_plot_draws_the_chance_of_a_pair_within_k_bits_and_what_the_sample_measured(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    planted_sample(tmp_path / "sample.jsonl", originals=30, planted=8)
    plot = tmp_path / "curve.svg"

    code, out, _ = params(
        capsys,
        "--method",
        "simhash",
        "--max-hamming",
        "6",
        "--sample",
        str(tmp_path / "sample.jsonl"),
        "--plot",
        str(plot),
    )

    assert code == 0
    assert "J     P(within 6 bits), sets of equal size" in out
    series = svg_series(plot)
    assert series["P(within 6 of 64 bits), sets of equal size, in theory"] == 201
    (measured,) = [label for label in series if "measured" in label]
    assert measured.startswith("reported duplicate, measured on sample.jsonl: 8 pairs of 38 documents")
    assert "SimHash: duplicate within 6 of 64 bits" in plot.read_text()


def test_plot_to_a_path_that_cannot_be_written_fails_before_measuring(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    planted_sample(tmp_path / "sample.jsonl", originals=30, planted=8)

    code, out, err = params(
        capsys, "--sample", str(tmp_path / "sample.jsonl"), "--plot", str(tmp_path / "no" / "x.svg")
    )

    assert code == 2
    assert "sample" not in out
    assert str(tmp_path / "no" / "x.svg") in err
    assert "--plot" in err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="a Linux device")
def test_plot_to_a_full_device_fails_naming_the_flag_the_path_and_the_reason(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, _, err = params(capsys, "--plot", "/dev/full")

    assert code == 1
    assert err == "stream-dedup: cannot write /dev/full (--plot): No space left on device\n"


def test_plot_onto_the_sample_is_refused_and_leaves_the_sample_whole(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sample = tmp_path / "sample.jsonl"
    planted_sample(sample, originals=30, planted=8)
    before = sample.read_bytes()

    code, _, err = params(capsys, "--sample", str(sample), "--plot", str(tmp_path / "." / "sample.jsonl"))

    assert code == 2
    assert "'--plot'" in err and "is the input" in err
    assert sample.read_bytes() == before


# --- containment ------------------------------------------------------------------------

PARTITION_LINE = re.compile(r"^    (\d+)-(\d+) +(\d+) +(\d\.\d{3}) +(\d\.\d{4})$")


def test_containment_bands_the_index_and_shows_memory_and_recall_by_size_ratio(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = params(capsys, "--containment-threshold", "0.8", "--containment-max-ratio", "2")
    assert code == 0
    lines = out.splitlines()
    # With containment on, the index's banding (and the S-curve shown) is the containment banding.
    assert "bands (b) 17, rows per band (r) 2" in lines
    assert "about +16 bytes per document against the 16 bands of 6 rows without containment" in out
    ratio_two = next(line for line in lines if line.startswith("  2.00 "))
    assert float(ratio_two.split()[-1]) == pytest.approx(candidate_probability(0.8 / 2.2, 17, 2), abs=1e-6)
    assert float(ratio_two.split()[-1]) >= 0.9


def test_containment_partitions_cover_the_judged_sizes_with_recall_at_least_the_target(
    capsys: pytest.CaptureFixture[str],
) -> None:
    _, out, _ = params(capsys, "--containment-threshold", "0.9", "--containment-min-recall", "0.9")
    sections = out.split("  query of ")[1:]
    assert [int(section.split()[0]) for section in sections] == [100, 300, 1000]
    for section in sections:
        query = int(section.split()[0])
        rows = [PARTITION_LINE.match(line) for line in section.splitlines()]
        partitions = [(int(m[1]), int(m[2]), int(m[3]), float(m[4]), float(m[5])) for m in rows if m]
        # Contiguous partitions from at most query/2 to at least query*2.
        assert partitions[0][0] <= query / 2 and partitions[-1][1] >= query * 2
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(partitions))
        for _, _, bands, lowest, recall in partitions:
            assert recall >= 0.9 - 1e-4
            assert recall == pytest.approx(candidate_probability(lowest, bands, 3), abs=2e-3)


def test_no_containment_lines_while_it_is_off(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = params(capsys, "--containment-max-ratio", "3")
    assert "containment" not in out
