"""Engine layer: probe, verify, insert and verdict over the index; snapshots of it."""

from stream_dedup.engine.detection import DetectorStats, DuplicateDetector
from stream_dedup.engine.detector import Detector, make_detector
from stream_dedup.engine.sharding import ShardAnswer, ShardDetector, merge_answers, sequence_keys
from stream_dedup.engine.simhash_detector import SimHashDetector
from stream_dedup.engine.snapshot import load_snapshot, save_snapshot
from stream_dedup.engine.verdict import Verdict, VerdictKind

__all__ = [
    "Detector",
    "DetectorStats",
    "DuplicateDetector",
    "ShardAnswer",
    "ShardDetector",
    "SimHashDetector",
    "Verdict",
    "VerdictKind",
    "load_snapshot",
    "make_detector",
    "merge_answers",
    "save_snapshot",
    "sequence_keys",
]
