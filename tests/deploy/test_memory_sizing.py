"""The single-process stage's memory limit, and the rule its manifests give for sizing it, against the index.

Retention keeps at least ``max_documents`` and up to a quarter more (it evicts a quarter at a time),
and the newest generation's tables are made for a quarter of ``max_documents`` at once. An index of
the pod's own detection settings, with ``max_documents`` scaled down to :data:`CAPACITY`, is filled
here with unrelated documents (random sketches and keys, as most of a stream is) past its first
eviction, and its peak ``Detector.memory_bytes()`` per ``max_documents`` is what a limit must hold.
The manifests said "~315 bytes per document, plus a quarter": 394 bytes per ``max_documents``
against about 510 measured, so that a limit sized by it for 5M documents fell 0.6 GB short.
"""

from __future__ import annotations

import dataclasses
import re
from functools import cache

import numpy as np

from stream_dedup.cli.settings_sources import resolve_settings
from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector
from stream_dedup.lsh import IndexedBatch, SignedBatch

from .deployfiles import KUBERNETES, manifest, pod_environment

CAPACITY = 100_000
#: The headroom the manifests' rule adds to its bytes per document: a quarter.
HEADROOM = 1.25
_STATED = re.compile(r"~(\d+)\s+bytes\s+per\s+document")
_QUANTITY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


@cache
def peak_bytes_per_max_document(detection: DetectionConfig) -> float:
    """Peak ``memory_bytes()`` of an index of ``detection`` at ``max_documents`` = :data:`CAPACITY`, per document."""
    config = dataclasses.replace(detection, max_documents=CAPACITY)
    rng = np.random.default_rng(7)
    detector, tables, batch, peak = Detector(config), config.banding().bands + 1, 10_000, 0
    for first in range(0, 2 * CAPACITY, batch):  # the first eviction comes at 1.25 x CAPACITY
        signed = SignedBatch(
            rng.integers(0, 256, (batch, config.sketch_bits // 8), dtype=np.uint8),
            rng.integers(0, 2**32, (batch, tables), dtype=np.uint32) | np.uint32(1),
        )
        ids = [f"ad-{number:07d}" for number in range(first, first + batch)]  # as the sample corpus' ids
        detector.process_signed(
            IndexedBatch(ids, signed, np.zeros(batch), np.arange(first, first + batch, dtype=np.uint64))
        )
        peak = max(peak, detector.memory_bytes())
    return peak / CAPACITY


def single_stage() -> tuple[int, DetectionConfig]:
    """The memory limit (bytes) and the detection settings of the single-process stage's pods."""
    statefulset = manifest("statefulset.yaml")
    settings = resolve_settings({}, pod_environment(KUBERNETES, statefulset, 0))
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    amount, unit = re.fullmatch(r"(\d+)(Ki|Mi|Gi)", container["resources"]["limits"]["memory"]).groups()  # type: ignore[union-attr]
    return int(amount) * _QUANTITY[unit], settings.detection


def test_the_memory_limit_holds_the_retained_index_with_a_quarter_for_the_process() -> None:
    limit, detection = single_stage()
    assert detection.max_documents is not None, "retention must bound the index in a pod with a memory limit"
    needed = detection.max_documents * peak_bytes_per_max_document(detection) * HEADROOM
    assert limit >= needed, f"a limit of {limit / 2**30:.2f} GiB, the index and its quarter need {needed / 2**30:.2f}"


def test_the_sizing_rule_the_manifests_state_does_not_undersize_the_index() -> None:
    _, detection = single_stage()
    measured = peak_bytes_per_max_document(detection)
    stated = {
        name: int(figure)
        for name in ("configmap.yaml", "statefulset.yaml")
        for figure in _STATED.findall(" ".join((KUBERNETES / name).read_text(encoding="utf-8").split()))
    }
    assert set(stated) == {"configmap.yaml", "statefulset.yaml"}, "both say what a document takes"
    for name, figure in stated.items():
        # "~N bytes per document, plus a quarter": enough for the peak, and not far above it.
        assert measured <= figure * HEADROOM <= 1.15 * measured, f"{name}: ~{figure} bytes; {measured:.0f} measured"
