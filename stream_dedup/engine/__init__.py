"""Engine layer: probe, verify, insert and verdict over the index; snapshots of it."""

from stream_dedup.engine.detector import Detector, DetectorStats
from stream_dedup.engine.snapshot import load_snapshot, save_snapshot
from stream_dedup.engine.verdict import Verdict, VerdictKind

__all__ = ["Detector", "DetectorStats", "Verdict", "VerdictKind", "load_snapshot", "save_snapshot"]
