"""Signing raw text equals signing its normalised form: whitespace is collapsed in numpy on one path only."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector
from stream_dedup.errors import InputError
from stream_dedup.sketch.minhash import SKETCH_CELLS
from stream_dedup.text import Folding, normalize
from tests.traced_memory import traced

_SPACES = " \t\n\r\x0b\x0c\x1c\x85\xa0\u2003\u3000"
texts = st.lists(
    st.text(alphabet=st.sampled_from(_SPACES + "abcAB.,!é日ﬁ")) | st.text(min_size=1),
    min_size=1,
    max_size=12,
)


@settings(max_examples=80, deadline=None)
@given(texts=texts, unit=st.sampled_from(["char", "word"]), strip=st.booleans())
def test_raw_and_normalised_texts_get_the_same_sketches_and_keys(texts: list[str], unit: str, strip: bool) -> None:
    texts = [t for t in texts if normalize(t, Folding(strip_punctuation=strip))] or ["a"]
    detector = Detector(DetectionConfig(shingle_unit=unit, shingle_size=3, strip_punctuation=strip))  # type: ignore[arg-type]
    raw = detector.sign(texts)
    normalised = detector.sign([normalize(t, Folding(strip_punctuation=strip)) for t in texts], normalized=True)
    assert np.array_equal(raw.sketches, normalised.sketches)
    assert np.array_equal(raw.keys, normalised.keys)


def test_a_text_of_whitespace_only_is_rejected_naming_its_position() -> None:
    with pytest.raises(InputError, match="position 1"):
        Detector(DetectionConfig()).sign(["fine text", "\u3000 \t\n"])


def _short_texts(count: int) -> list[str]:
    """``count`` distinct texts of 10 to 20 characters: a chunk of them is thousands of rows."""
    return [f"note {i:06d} ok" + "!" * (i % 7) for i in range(count)]


def test_signing_many_short_texts_holds_a_few_bounded_sketch_arrays() -> None:
    """4,096 texts of ~15 characters are one grid of tokens, but their 1,024-bin sketches are signed in runs of
    SKETCH_CELLS: the peak is a few arrays of that size, not 4,096 x 1,024 x 8 bytes (32 MiB) several times over
    (it was 160 MiB)."""
    detector = Detector(DetectionConfig())
    texts = _short_texts(4096)
    detector.sign(texts[:8])  # tables built once (probe offsets, ranks), not counted
    _, _, peak = traced(lambda: detector.sign(texts))
    kept = len(texts) * (DetectionConfig().sketch_bits // 8 + 4 * DetectionConfig().num_perm)  # bits + signatures
    assert peak < 8 * SKETCH_CELLS * 8 + 2 * kept


def test_short_texts_signed_together_or_apart_get_the_same_sketches_and_keys() -> None:
    detector = Detector(DetectionConfig())
    texts = _short_texts(3000)
    together = detector.sign(texts)
    apart = [detector.sign(texts[start : start + 100]) for start in range(0, len(texts), 100)]
    assert np.array_equal(together.sketches, np.concatenate([a.sketches for a in apart]))
    assert np.array_equal(together.keys, np.concatenate([a.keys for a in apart]))
