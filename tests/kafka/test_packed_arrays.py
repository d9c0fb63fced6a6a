"""Packed arrays: whatever goes in comes out, bit for bit, from bytes alone (no pickle)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import make_detector
from stream_dedup.kafka.packed_arrays import pack, signed_arrays, signed_batch, text_arrays, texts_of, unpack
from tests.corpus import make_corpus


@settings(max_examples=50, deadline=None)
@given(
    texts=st.lists(st.text(), max_size=20),
    numbers=st.lists(st.integers(0, 2**64 - 1), max_size=20),
    header=st.dictionaries(st.text(min_size=1).filter(lambda k: k != "arrays"), st.integers() | st.text(), max_size=4),
    prefix=st.binary(max_size=9),
)
def test_texts_numbers_and_header_fields_come_back_from_the_bytes_alone(
    texts: list[str], numbers: list[int], header: dict[str, object], prefix: bytes
) -> None:
    texts = [t.encode("utf-8", "replace").decode("utf-8") for t in texts]  # no lone surrogates: not UTF-8
    arrays = [*text_arrays("name", texts), ("numbers", np.array(numbers, dtype="<u8"))]
    message = prefix + b"".join(pack(header, arrays))
    got_header, got = unpack(message, len(prefix))
    assert got_header == header
    assert texts_of(got, "name") == texts
    assert got["numbers"].tolist() == numbers


@pytest.mark.parametrize(
    "config",
    [DetectionConfig(), DetectionConfig(method="simhash"), DetectionConfig(method="combined", verification="exact")],
    ids=["minhash", "simhash", "combined-exact"],
)
def test_a_signed_batch_comes_back_with_every_part_it_has(config: DetectionConfig) -> None:
    signed = make_detector(config).sign(make_corpus(30, seed=2))
    _, arrays = unpack(b"".join(pack({}, signed_arrays(signed))))
    back = signed_batch(arrays)
    assert np.array_equal(back.sketches, signed.sketches) and np.array_equal(back.keys, signed.keys)
    assert (back.shingles is None) == (signed.shingles is None)
    if back.shingles is not None and signed.shingles is not None:
        assert np.array_equal(back.shingles.values, signed.shingles.values)
        assert np.array_equal(back.shingles.ends, signed.shingles.ends)
    assert (back.fingerprints is None) == (signed.fingerprints is None)
    if back.fingerprints is not None and signed.fingerprints is not None:
        assert np.array_equal(back.fingerprints, signed.fingerprints)
