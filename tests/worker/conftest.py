"""Fixtures of the worker's unit tests (no broker: real detectors, fakes only at the Kafka client edge)."""

import pytest

from stream_dedup.config import DetectionConfig
from stream_dedup.engine.detector import Detector
from tests.corpus import make_corpus


@pytest.fixture
def detector() -> Detector:
    """A detector that has indexed 20 documents of the test corpus."""
    detector = Detector(DetectionConfig())
    detector.process([f"d{i}" for i in range(20)], make_corpus(20, seed=3))
    return detector
