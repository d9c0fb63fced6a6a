"""``stream-dedup dedup`` on compressed input, cut input, and files that are not JSON lines at all."""

import bz2
import gzip
import lzma
import random
import re
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest
import zstandard

from stream_dedup.cli.dedup_command import REJECTS_SHOWN

from .test_dedup_command import jsonl, near_copy, rejects, run_cli, text, verdict_records

COMPRESSORS: dict[str, Callable[[bytes], bytes]] = {
    "gzip": gzip.compress,
    "gzip, two members": lambda data: gzip.compress(data[: len(data) // 2]) + gzip.compress(data[len(data) // 2 :]),
    "bzip2": bz2.compress,
    "xz": lzma.compress,
    "zstd": zstandard.ZstdCompressor().compress,
    "zstd, two frames": lambda data: b"".join(
        zstandard.ZstdCompressor().compress(part) for part in (data[: len(data) // 3], data[len(data) // 3 :])
    ),
}


def corpus(count: int = 300) -> bytes:
    """JSON lines where every third record is a near-copy of an earlier one."""
    rng = random.Random(7)
    texts: list[str] = []
    for i in range(count):
        texts.append(near_copy(rng.choice(texts)) if texts and i % 3 == 0 else text(i))
    return jsonl(*({"id": f"doc-{i}", "text": t} for i, t in enumerate(texts)))


def decodable_lines(cut: bytes) -> int:
    """Whole lines in all that can be decoded of a gzip stream cut short."""
    return zlib.decompressobj(wbits=31).decompress(cut).count(b"\n")


@pytest.mark.parametrize("compress", COMPRESSORS.values(), ids=COMPRESSORS.keys())
def test_compressed_input_gives_the_verdicts_of_the_same_input_uncompressed(
    tmp_path: Path, compress: Callable[[bytes], bytes]
) -> None:
    data = corpus()
    (tmp_path / "plain.jsonl").write_bytes(data)
    # Known by its first bytes, not its name.
    (tmp_path / "packed.jsonl").write_bytes(compress(data))

    plain = run_cli("plain.jsonl", cwd=tmp_path)
    packed = run_cli("packed.jsonl", cwd=tmp_path)
    piped = run_cli("-", cwd=tmp_path, stdin=compress(data))

    assert plain.returncode == packed.returncode == piped.returncode == 0, packed.stderr.decode()
    expected = verdict_records(plain.stdout)
    assert len(expected) == 300 and sum(v["verdict"] == "duplicate" for v in expected) >= 90
    assert verdict_records(packed.stdout) == expected
    assert verdict_records(piped.stdout) == expected
    assert not (tmp_path / "rejects.jsonl").exists()


def test_input_cut_short_is_judged_up_to_its_last_whole_line_and_the_run_fails_naming_the_file(tmp_path: Path) -> None:
    data = corpus(3000)
    packed = gzip.compress(data)
    (tmp_path / "cut.jsonl.gz").write_bytes(packed[: len(packed) // 2])

    result = run_cli("cut.jsonl.gz", cwd=tmp_path)

    said = re.fullmatch(r"stream-dedup: cut.jsonl.gz cannot be read past line (\d+): .+\n", result.stderr.decode())
    assert result.returncode == 1 and said, result.stderr.decode()
    # The last few kilobytes decoded may wait in a buffer when the error comes.
    complete = int(said[1])
    assert 0.9 * decodable_lines(packed[: len(packed) // 2]) <= complete <= decodable_lines(packed[: len(packed) // 2])
    # Batches of 4,096: the lines read before the cut are judged, not dropped with their unfinished batch.
    assert [v["source"]["line"] for v in verdict_records(result.stdout)] == list(range(1, complete + 1))


def test_input_cut_short_leaves_no_report_and_an_earlier_one_as_it_was(tmp_path: Path) -> None:
    # The report was opened (emptied) before the run: a run that failed left an empty page in its place.
    packed = gzip.compress(corpus(3000))
    (tmp_path / "cut.jsonl.gz").write_bytes(packed[: len(packed) // 2])
    (tmp_path / "earlier.html").write_text("<p>an earlier run's report</p>")

    kept = run_cli("cut.jsonl.gz", "-o", "out.jsonl", "--report", "earlier.html", cwd=tmp_path)
    new = run_cli("cut.jsonl.gz", "-o", "out.jsonl", "--report", "new.html", cwd=tmp_path)

    assert kept.returncode == new.returncode == 1
    assert (tmp_path / "earlier.html").read_text() == "<p>an earlier run's report</p>"
    assert not (tmp_path / "new.html").exists()


def test_a_file_that_is_not_json_lines_names_a_few_rejects_on_standard_error_and_writes_all(tmp_path: Path) -> None:
    (tmp_path / "image.png").write_bytes(random.Random(3).randbytes(200_000))

    result = run_cli("image.png", cwd=tmp_path)

    written = rejects(tmp_path / "rejects.jsonl")
    said = result.stderr.decode().splitlines()
    assert result.returncode == 0 and len(written) > 5 * REJECTS_SHOWN
    assert [line for line in said if line.startswith("line ")] == [
        f"line {r['line']}: {r['reason']} (written to rejects.jsonl)" for r in written[:REJECTS_SHOWN]
    ]
    assert "more lines rejected: see rejects.jsonl (the summary counts them)" in said
    assert said[-1].endswith(f"{len(written)} rejected")
