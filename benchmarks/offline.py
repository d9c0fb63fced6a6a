"""The offline command end to end against a datasketch streaming job, on the same JSONL file.

Both run as separate processes, timed wall clock from start to exit (interpreter start,
imports, reading, hashing, indexing, writing verdicts):

* ours: ``python -m stream_dedup.cli.main dedup IN --output OUT --threshold 0.8
  --num-perm 128 --shingle-size 5 --shingle-unit char``
* anchor: ``python benchmarks/_anchors.py IN --output OUT ...``: reads the JSONL,
  lower-cases and shingles each text in Python, ``MinHash.update_batch``, query-then-
  insert ``MinHashLSH``, one verdict line per record (see ``_anchors.py``).
* ours with ``--report OUT.html`` (clusters kept per line, texts read back, the page
  written), against ours without it: what the report costs.
* ours on a stream of exact copies (the same number of records, each a copy of one of
  the planted stream's first 8 texts: a crawler fetching the same pages again),
  against ours on the planted stream. Each copy's hot band values hold hundreds of
  its earlier copies; the earliest copy bounds what it is measured against
  (``engine/exact_copies.py``), or it ran at a fifth of the normal rate.

Each is run twice, alternating, and its faster run counts.

Input: real paragraphs with 30% planted near-duplicates (``corpus.py``), 35,000
records (5,000 with --quick). Both outputs are checked to have one line per record,
and the share of records on whose verdict the two agree is printed.

Bars: >= 10x the datasketch job (issue 1); the report costs at most 5% (issue 11); exact
copies at least 0.7x the planted stream's rate.

    python benchmarks/offline.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from _table import Row, print_table, stopwatch
from corpus import planted_stream, write_jsonl

HERE = Path(__file__).resolve().parent
SETTINGS = ["--threshold", "0.8", "--num-perm", "128", "--shingle-size", "5"]
BAR = 10.0
REPORT_BAR = 0.95
COPIES_BAR = 0.7
#: Distinct texts of the exact-copies stream.
COPIED_TEXTS = 8
ROUNDS = 2


def run(command: list[str]) -> float:
    """Wall-clock seconds of ``command``; its stderr is shown if it fails."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parent), os.environ.get("PYTHONPATH")])),
    }
    with stopwatch() as t:
        done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr}")
    return t[0]


def verdicts(path: Path) -> dict[str, str]:
    with open(path, encoding="utf-8") as lines:
        return {r["id"]: r["verdict"] for r in map(json.loads, lines)}


def main() -> None:
    parser = argparse.ArgumentParser(description="offline command vs a datasketch job, end to end")
    parser.add_argument("--quick", action="store_true", help="5,000 records instead of 35,000")
    args = parser.parse_args()
    docs = 5_000 if args.quick else 35_000

    with tempfile.TemporaryDirectory() as tmp:
        source, ours_out, anchor_out, report, copies = (
            Path(tmp, "in.jsonl"),
            Path(tmp, "ours.jsonl"),
            Path(tmp, "ds.jsonl"),
            Path(tmp, "report.html"),
            Path(tmp, "copies.jsonl"),
        )
        stream = [d.record() for d in planted_stream(docs, dup_fraction=0.3, seed=7)]
        write_jsonl(source, stream)
        copied = [record["text"] for record in stream[:COPIED_TEXTS]]
        write_jsonl(copies, ({"id": f"copy-{i}", "text": copied[i % COPIED_TEXTS]} for i in range(docs)))
        size_mb = source.stat().st_size / 1e6
        ours_command = [sys.executable, "-m", "stream_dedup.cli.main", "dedup", str(source)]
        ours_command += ["--output", str(ours_out), *SETTINGS, "--shingle-unit", "char"]
        anchor_command = [sys.executable, str(HERE / "_anchors.py"), str(source)]
        anchor_command += ["--output", str(anchor_out), *SETTINGS]
        # Alternate the two and keep each one's best: the machine is shared, and
        # a burst of other work during one run would otherwise decide the ratio.
        ours, anchor, reported, copying = float("inf"), float("inf"), float("inf"), float("inf")
        copies_command = [*ours_command[:4], str(copies), "--output", str(Path(tmp, "copies-out.jsonl"))]
        copies_command += [*SETTINGS, "--shingle-unit", "char"]
        for _ in range(ROUNDS):
            ours = min(ours, run(ours_command))
            anchor = min(anchor, run(anchor_command))
            reported = min(reported, run([*ours_command, "--report", str(report)]))
            copying = min(copying, run(copies_command))
        ours_v, anchor_v = verdicts(ours_out), verdicts(anchor_out)

    if len(ours_v) != docs or len(anchor_v) != docs:
        sys.exit(f"expected {docs} verdicts, got {len(ours_v)} (ours) and {len(anchor_v)} (datasketch)")
    agree = sum(ours_v[k] == anchor_v[k] for k in ours_v) / docs
    rows = [
        Row(
            "records/s end to end",
            docs / ours,
            "datasketch job",
            docs / anchor,
            f">= {BAR:.0f}x",
            anchor / ours >= BAR,
        ),
        Row("wall seconds", ours, "datasketch job", anchor, lower_is_better=True, fmt=".2f"),
        Row(
            "records/s with --report",
            docs / reported,
            "ours without",
            docs / ours,
            f">= {REPORT_BAR:.2f}x",
            ours / reported >= REPORT_BAR,
        ),
        Row(
            f"records/s, exact copies of {COPIED_TEXTS} texts",
            docs / copying,
            "ours, planted stream",
            docs / ours,
            f">= {COPIES_BAR:.1f}x",
            ours / copying >= COPIES_BAR,
        ),
        Row(
            "duplicates found",
            sum(v == "duplicate" for v in ours_v.values()),
            "datasketch job",
            sum(v == "duplicate" for v in anchor_v.values()),
        ),
    ]
    print_table(
        f"offline: {docs:,} records ({size_mb:.1f} MB JSONL), t=0.8, 128 perms, char 5-shingles",
        rows,
        [f"verdicts agree on {agree:.2%} of records (different hashing and banding, so not all)"],
    )


if __name__ == "__main__":
    main()
