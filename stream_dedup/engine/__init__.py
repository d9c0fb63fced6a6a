"""Engine layer: probe, verify, insert and verdict over the index; snapshots of it."""

from stream_dedup.engine.detection import DetectorStats, DuplicateDetector
from stream_dedup.engine.detector import Detector, make_detector
from stream_dedup.engine.simhash_detector import SimHashDetector
from stream_dedup.engine.snapshot import load_snapshot, save_snapshot
from stream_dedup.engine.verdict import Verdict, VerdictKind

__all__ = [
    "Detector",
    "DetectorStats",
    "DuplicateDetector",
    "SimHashDetector",
    "Verdict",
    "VerdictKind",
    "load_snapshot",
    "make_detector",
    "save_snapshot",
]
