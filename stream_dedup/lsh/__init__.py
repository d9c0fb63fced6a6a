"""LSH layer: choosing the banding, band keys, and the banded index over generations."""

from stream_dedup.lsh.band_keys import band_keys
from stream_dedup.lsh.index import BandIndex, Lookup, Retention, pairs_within_batch
from stream_dedup.lsh.params import BandParameters, choose_bands

__all__ = [
    "BandIndex",
    "BandParameters",
    "Lookup",
    "Retention",
    "band_keys",
    "choose_bands",
    "pairs_within_batch",
]
