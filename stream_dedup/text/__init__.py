"""Text layer: normalisation, shingling and the hashing of shingles to integers."""

from stream_dedup.text.normalize import DEFAULT_FOLDING, Folding, fold, fold_all, normalize, normalize_all, require_text
from stream_dedup.text.shingles import (
    ShingleChunk,
    ShingleUnit,
    Shingling,
    shingle_chunks,
    shingle_set,
)

__all__ = [
    "DEFAULT_FOLDING",
    "Folding",
    "ShingleChunk",
    "ShingleUnit",
    "Shingling",
    "fold",
    "fold_all",
    "normalize",
    "normalize_all",
    "require_text",
    "shingle_chunks",
    "shingle_set",
]
