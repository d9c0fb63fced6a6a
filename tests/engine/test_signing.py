"""Signing raw text equals signing its normalised form: whitespace is collapsed in numpy on one path only."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector
from stream_dedup.errors import InputError
from stream_dedup.text import Folding, normalize

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
