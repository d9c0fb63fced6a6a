"""Shingling: normalised text to 64-bit shingle hashes, a whole batch at a time.

A shingle is a window of ``size`` consecutive tokens; a token is a Unicode code
point (``unit="char"``; code points, not UTF-8 bytes, so accented text is not
split mid-character) or a word (``unit="word"``; words are the space-separated
pieces of the normalised text). A document with fewer than ``size`` tokens has
one shingle, all of it: two different short documents therefore never share
an "empty" sketch and collapse into one cluster.

Batches are processed in chunks of documents of similar length laid out as a
padded 2-D grid, so every step is a numpy operation over the chunk and the
chunk stays in cache.
"""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from stream_dedup.errors import ConfigError
from stream_dedup.text.hashing import (
    MAX_U64,
    U64,
    Uint64Array,
    fmix64,
    prefix_sums,
    span_values,
    splitmix64,
    window_counts,
    window_values,
)

ShingleUnit = Literal["char", "word"]

#: Grid cells (documents x tokens) per chunk: about 1 MiB of uint64, cache-sized.
_CHUNK_CELLS = 1 << 17


@dataclass(frozen=True)
class Shingling:
    """How a document becomes a set of shingles.

    Attributes:
        unit: ``"char"`` for character k-shingles, ``"word"`` for word n-grams.
        size: tokens per shingle (k), at least 1. Default 5 characters.
        strip_punctuation: delete Unicode punctuation during normalisation.
    """

    unit: ShingleUnit = "char"
    size: int = 5
    strip_punctuation: bool = False

    def __post_init__(self) -> None:
        if self.unit not in ("char", "word"):
            raise ConfigError("shingle_unit", f"must be 'char' or 'word', got {self.unit!r}")
        if not isinstance(self.size, int) or self.size < 1:
            raise ConfigError("shingle_size", f"must be a whole number >= 1, got {self.size!r}")


@dataclass(frozen=True)
class ShingleChunk:
    """Shingle hashes of some documents of a batch.

    Attributes:
        rows: positions of these documents in the batch, ``(n,)``.
        hashes: ``(n, W)`` uint64; row ``i`` holds ``counts[i]`` shingle hashes
            (repeats possible) and ``MAX_U64`` after them.
        counts: number of real entries per row, ``(n,)``.
    """

    rows: npt.NDArray[np.intp]
    hashes: Uint64Array
    counts: npt.NDArray[np.intp]


def shingle_chunks(texts: Sequence[str], shingling: Shingling, seed: int) -> Iterator[ShingleChunk]:
    """Yield the shingle hashes of already-normalised, non-empty ``texts`` in chunks.

    Every document of ``texts`` appears in exactly one chunk. The hash of a
    shingle depends only on its tokens and ``seed``.
    """
    lengths = np.fromiter((_token_count(text, shingling.unit) for text in texts), dtype=np.intp, count=len(texts))
    order = np.argsort(lengths, kind="stable")
    seed_key = splitmix64(seed, 1)[0]
    start = 0
    while start < len(order):
        # Rows are sorted by length, so the last row of a chunk is its widest.
        stop = start + 1
        while stop < len(order) and (stop - start + 1) * lengths[order[stop]] <= _CHUNK_CELLS:
            stop += 1
        rows = order[start:stop]
        chunk_texts = [texts[i] for i in rows]
        tokens = _token_grid(chunk_texts, lengths[rows], shingling.unit)
        hashes = window_values(tokens, lengths[rows], shingling.size)
        hashes ^= seed_key
        fmix64(hashes)
        counts = window_counts(lengths[rows], shingling.size)
        hashes[np.arange(hashes.shape[1]) >= counts[:, None]] = MAX_U64
        yield ShingleChunk(rows=rows, hashes=hashes, counts=counts)
        start = stop


def shingle_set(text: str, shingling: Shingling) -> set[str]:
    """Exact shingles of one normalised document as strings (for checks and brute force).

    Word shingles are joined by single spaces.
    """
    tokens: Sequence[str] = text if shingling.unit == "char" else text.split(" ")
    size = min(shingling.size, len(tokens))
    joiner = "" if shingling.unit == "char" else " "
    return {joiner.join(tokens[i : i + size]) for i in range(len(tokens) - size + 1)}


def _token_count(text: str, unit: ShingleUnit) -> int:
    return len(text) if unit == "char" else text.count(" ") + 1


def _code_points(text: str) -> npt.NDArray[np.uint32] | npt.NDArray[np.uint8]:
    # ASCII text (the common case) encodes four times smaller and faster.
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def _token_grid(texts: list[str], lengths: npt.NDArray[np.intp], unit: ShingleUnit) -> Uint64Array:
    """Lay the tokens of ``texts`` out as a zero-padded ``(n, max length)`` grid of non-zero ids."""
    if unit == "char":
        # +1 keeps every real token non-zero, distinct from padding.
        flat = _code_points("".join(texts)).astype(U64) + U64(1)
    else:
        flat = _word_tokens(" ".join(texts))
    grid = np.zeros((len(texts), int(lengths.max())), dtype=U64)
    grid[np.arange(grid.shape[1]) < lengths[:, None]] = flat
    return grid


def _word_tokens(joined: str) -> Uint64Array:
    """One non-zero 64-bit id per space-separated word of ``joined``."""
    points = _code_points(joined)
    spaces = np.flatnonzero(points == ord(" "))
    starts = np.concatenate(([0], spaces + 1))
    ends = np.concatenate((spaces, [points.size]))
    sums = prefix_sums(points.astype(U64) + U64(1))
    words = fmix64(span_values(sums, starts, ends))
    words |= U64(1)
    return words
