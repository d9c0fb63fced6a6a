"""Sketch layer: MinHash signatures (classic and one-permutation), built whole or incrementally."""

from stream_dedup.sketch.builder import SignatureBuilder
from stream_dedup.sketch.minhash import MinHasher, Scheme, SignatureArray, estimate_jaccard
from stream_dedup.sketch.oph import EMPTY

__all__ = ["EMPTY", "MinHasher", "Scheme", "SignatureArray", "SignatureBuilder", "estimate_jaccard"]
