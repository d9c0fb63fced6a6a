"""LSH layer: choosing the banding, index keys, and the banded index over generations."""

from stream_dedup.lsh.band_keys import band_keys, content_keys, index_keys
from stream_dedup.lsh.generation import NO_SOURCE, IndexedBatch, SignedBatch
from stream_dedup.lsh.index import BandIndex, Lookup, pairs_within_batch
from stream_dedup.lsh.params import BandParameters, choose_bands
from stream_dedup.lsh.retention import Retention

__all__ = [
    "NO_SOURCE",
    "BandIndex",
    "BandParameters",
    "IndexedBatch",
    "Lookup",
    "Retention",
    "SignedBatch",
    "band_keys",
    "choose_bands",
    "content_keys",
    "index_keys",
    "pairs_within_batch",
]
