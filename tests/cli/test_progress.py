"""The end-of-run summary line of ``stream-dedup dedup``."""

import io
import time

import pytest

from stream_dedup.cli.progress import Progress
from stream_dedup.engine import DetectorStats


@pytest.mark.parametrize(
    "documents, seconds, rate", [(2, 14.0, "0.14 documents/s"), (30_000, 3.0, "10,000 documents/s"), (0, 1.0, "0.00")]
)
def test_the_rate_keeps_its_figures_when_documents_are_few_and_slow(
    monkeypatch: pytest.MonkeyPatch, documents: int, seconds: float, rate: str
) -> None:
    out = io.StringIO()
    progress = Progress(out)
    started = time.monotonic()
    monkeypatch.setattr(time, "monotonic", lambda: started + seconds)
    progress.finish(DetectorStats(documents=documents), 0)
    assert f", {seconds:.1f} s, {rate}" in out.getvalue()
