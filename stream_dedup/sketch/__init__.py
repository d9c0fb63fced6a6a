"""Sketch layer: MinHash signatures (classic and one-permutation), built whole or incrementally,
and the one-bit sketches the index verifies with."""

from stream_dedup.sketch.bit_sketch import bit_agreements, coarsen, estimate_similarity, one_bit_sketches
from stream_dedup.sketch.builder import SignatureBuilder
from stream_dedup.sketch.minhash import MinHasher, Scheme, SignatureArray, estimate_jaccard
from stream_dedup.sketch.oph import EMPTY

__all__ = [
    "EMPTY",
    "MinHasher",
    "Scheme",
    "SignatureArray",
    "SignatureBuilder",
    "bit_agreements",
    "coarsen",
    "estimate_jaccard",
    "estimate_similarity",
    "one_bit_sketches",
]
