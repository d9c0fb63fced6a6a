"""Shingling: normalised text to 64-bit shingle hashes, a whole batch at a time.

A shingle is a window of ``size`` consecutive tokens; a token is a Unicode code
point (``unit="char"``; code points, not UTF-8 bytes, so accented text is not
split mid-character) or a word (``unit="word"``; words are the space-separated
pieces of the normalised text, and each character of a script written
without spaces, :mod:`~stream_dedup.text.word_breaks`). A document with fewer than ``size`` tokens has
one shingle, all of it: two different short documents therefore never share
an "empty" sketch and collapse into one cluster.

Batches are processed in chunks of documents of similar length laid out as a
padded 2-D grid, so every step is a numpy operation over the chunk and the
chunk stays in cache. A long document (more than :data:`PIECE_TOKENS`
tokens) is hashed in consecutive pieces instead, each of one row, so that
the memory it takes is bounded by the piece, not by the document: hashed
whole, every character cost about 36 bytes at once (prefix sums, powers,
window values, scratch, each 8 bytes a token), and a 50 MB document 1.8 GB.
"""

import bisect
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal, cast

import numpy as np
import numpy.typing as npt

from stream_dedup.bounds import check_whole_number
from stream_dedup.errors import ConfigError
from stream_dedup.text.hashing import (
    MAX_U64,
    U64,
    TokenArray,
    Uint64Array,
    fmix64,
    prefix_sums,
    span_values,
    splitmix64,
    window_counts,
    window_values,
)
from stream_dedup.text.normalize import Folding, require_text
from stream_dedup.text.whitespace import CodeArray, IntArray, collapse_whitespace
from stream_dedup.text.word_breaks import alone_mask, split_words

ShingleUnit = Literal["char", "word"]
_SPACE = ord(" ")

#: Grid cells (documents x tokens) per chunk: about 1 MiB of uint64, cache-sized.
_CHUNK_CELLS = 1 << 17
#: Most tokens a document may have and be hashed whole; a longer one is hashed in pieces of about this
#: many (2 MiB of uint64 an array: the transient arrays of a piece take about 20 MiB).
PIECE_TOKENS = 1 << 18
#: Largest shingle size: the largest document a stage or ``dedup`` reads (100 MiB) has fewer tokens, so a
#: larger size would shingle every document whole too; past 2**63 it failed the numpy arithmetic of every batch.
MAX_SHINGLE_SIZE = 100 << 20


@dataclass(frozen=True)
class Shingling:
    """How a document becomes a set of shingles.

    Attributes:
        unit: ``"char"`` for character k-shingles, ``"word"`` for word n-grams.
        size: tokens per shingle (k), at least 1. Default 5 characters.
        strip_punctuation: delete Unicode punctuation during normalisation.
        ignore_invisible: delete invisible characters during normalisation
            (see :mod:`~stream_dedup.text.normalize`).
        fold_lookalikes: fold letters of other scripts that look like Latin
            ones to them (see :mod:`~stream_dedup.text.lookalikes`).
    """

    unit: ShingleUnit = "char"
    size: int = 5
    strip_punctuation: bool = False
    ignore_invisible: bool = True
    fold_lookalikes: bool = False

    def __post_init__(self) -> None:
        if self.unit not in ("char", "word"):
            raise ConfigError("shingle_unit", f"must be 'char' or 'word', got {self.unit!r}")
        check_whole_number(
            "shingle_size", self.size, 1, MAX_SHINGLE_SIZE, "more tokens than the largest document holds"
        )

    @property
    def folding(self) -> Folding:
        """What normalisation does besides NFKC, casefolding and whitespace."""
        return Folding(self.strip_punctuation, self.ignore_invisible, self.fold_lookalikes)


@dataclass(frozen=True)
class ShingleChunk:
    """Shingle hashes of some documents of a batch.

    Attributes:
        rows: positions of these documents in the batch, ``(n,)``.
        hashes: ``(n, W)`` uint64; row ``i`` holds ``counts[i]`` shingle hashes
            (repeats possible) and ``MAX_U64`` after them.
        counts: number of real entries per row, ``(n,)``.
        piece: the chunk is one piece of a long document (one row): the
            document's shingle hashes are those of its pieces, which come
            in order, one chunk each, the last with ``final`` set. Hashes of
            windows across a piece boundary are in the later piece; a
            shingle's hash does not depend on where the document was cut.
        final: ``False`` on every piece of a long document but its last.
        repeats: ``(counts[0],)`` occurrences of each hash, when the chunk
            holds a long document's distinct hashes
            (:func:`~stream_dedup.text.distinct_pieces.whole_chunks`); else ``None``.
    """

    rows: npt.NDArray[np.intp]
    hashes: Uint64Array
    counts: npt.NDArray[np.intp]
    piece: bool = False
    final: bool = True
    repeats: npt.NDArray[np.uint32] | None = None


def shingle_chunks(
    texts: Sequence[str], shingling: Shingling, seed: int, folded: bool = False
) -> Iterator[ShingleChunk]:
    """Yield the shingle hashes of ``texts`` in chunks.

    ``texts`` are normalised, and their tokens are taken as they are (a
    fragment's leading space is a token); ``folded=True`` says they are only
    folded (:func:`~stream_dedup.text.fold_all`), and runs of whitespace are
    collapsed here, over code points, which is where the normalisation's
    last step is cheapest. Every document of ``texts`` appears in exactly one
    chunk, or, if it may have more than :data:`PIECE_TOKENS` tokens, in
    consecutive pieces (:attr:`ShingleChunk.piece`) after every other chunk.
    The hash of a shingle depends only on its tokens and ``seed``.
    Raises :class:`~stream_dedup.errors.InputError`, naming its position,
    for a document with no text (left).
    """
    # A document has at most as many tokens as code points (words of ASCII text: half of them, rounded up;
    # other text may be of scripts whose every character is a word).
    bounds = _lengths(texts)
    # ASCII documents chunk apart from the others: their code points stay bytes, four times less to move.
    ascii_rows = np.fromiter(map(str.isascii, texts), dtype=bool, count=len(texts))
    if shingling.unit == "word":
        bounds = np.where(ascii_rows, (bounds + 1) // 2, bounds)
    long = bounds > PIECE_TOKENS
    order = np.lexsort((bounds, ~ascii_rows))
    order = order[~long[order]]
    seed_key = splitmix64(seed, 1)[0]
    for rows in _chunks(order, bounds[order], int(np.count_nonzero(ascii_rows & ~long))):
        chunk_texts = [texts[i] for i in rows.tolist()]
        codes, lengths = _code_points("".join(chunk_texts)), _lengths(chunk_texts)
        if folded:
            codes, lengths = collapse_whitespace(codes, lengths)
        if not lengths.all():
            require_text("", f"document at batch position {rows[np.argmin(lengths)]}")
        tokens, counts = _token_grid(codes, lengths, shingling.unit)
        hashes, windows = _hashed(tokens, counts, shingling.size, seed_key)
        yield ShingleChunk(rows=rows, hashes=hashes, counts=windows)
    for row in np.flatnonzero(long).tolist():
        yield from _pieces(texts[row], row, shingling, seed_key, folded)


def _hashed(tokens: TokenArray, counts: IntArray, size: int, seed_key: np.uint64) -> tuple[Uint64Array, IntArray]:
    """The shingle hashes of a token grid (:func:`_token_grid`), ``MAX_U64`` after each row's, and their counts."""
    hashes = window_values(tokens, counts, size)
    hashes ^= seed_key
    fmix64(hashes)
    windows = window_counts(counts, size)
    hashes.reshape(-1)[_row_tails(windows, hashes.shape[1])] = MAX_U64
    return hashes, windows


def _pieces(text: str, row: int, shingling: Shingling, seed_key: np.uint64, folded: bool) -> Iterator[ShingleChunk]:
    """The shingle hashes of one long document, in pieces of about :data:`PIECE_TOKENS` windows.

    Each piece's tokens are preceded by the last ``size - 1`` tokens before
    them, so that every window is hashed once, in the piece where it ends.
    The document's code points are held whole (1 byte each if ASCII, else
    4: no more than its ``str``), its tokens and hashes a piece at a time.
    """
    codes = _code_points(text)
    if folded:
        codes, _ = collapse_whitespace(codes, np.array([codes.size]))
    if not codes.size:
        require_text("", f"document at batch position {row}")
    size, rows = shingling.size, np.array([row])
    carry: TokenArray | None = None
    done: ShingleChunk | None = None
    for tokens in _token_pieces(codes, shingling.unit):
        run = tokens if carry is None else cast(TokenArray, np.concatenate((carry, tokens)))
        carry = run
        if run.size < size:  # not a whole window yet
            continue
        if done is not None:
            yield done
        hashes, windows = _hashed(run[None, :], np.array([run.size]), size, seed_key)
        done = ShingleChunk(rows, hashes[:, : windows[0]], windows, piece=True, final=False)
        carry = run[run.size - size + 1 :]
    if done is None:  # fewer tokens than a shingle: the whole document is its one shingle
        assert carry is not None
        hashes, windows = _hashed(carry[None, :], np.array([carry.size]), size, seed_key)
        done = ShingleChunk(rows, hashes, windows, piece=True)
    yield replace(done, final=True)


def _token_pieces(codes: CodeArray, unit: ShingleUnit) -> Iterator[TokenArray]:
    """The tokens of one document's collapsed code points, about :data:`PIECE_TOKENS` at a time.

    Words are cut where :func:`_word_tokens` breaks them too, so the pieces'
    words are the document's: at a space (which no piece keeps), or before a
    character that is a word on its own and follows no space (it starts the
    next piece; after a space, the cut is at the space). A single word
    longer than a piece stays whole (its code points' prefix sums then take
    8 bytes each).
    """
    if unit == "char":
        for start in range(0, codes.size, PIECE_TOKENS):
            piece = codes[start : start + PIECE_TOKENS]
            yield piece + piece.dtype.type(1)  # as _token_grid: every token non-zero
        return
    space = codes == _SPACE
    cuts = space.copy()
    alone = alone_mask(codes)
    if alone is not None:
        cuts[1:] |= alone[1:] & ~space[:-1]
    start = 0
    while codes.size - start > PIECE_TOKENS:
        within = np.flatnonzero(cuts[start + 1 : start + PIECE_TOKENS + 1])
        if within.size:
            cut = start + 1 + int(within[-1])
        else:
            later = np.flatnonzero(cuts[start + 1 :])
            if not later.size:
                break
            cut = start + 1 + int(later[0])
        yield _word_tokens(codes[start:cut], np.array([cut - start]))[0]
        start = cut + int(space[cut])
    yield _word_tokens(codes[start:], np.array([codes.size - start]))[0]


def shingle_set(text: str, shingling: Shingling) -> set[str]:
    """Exact shingles of one normalised document as strings (for checks and brute force).

    Word shingles are joined by single spaces.
    """
    tokens: Sequence[str] = text if shingling.unit == "char" else split_words(text)
    size = min(shingling.size, len(tokens))
    joiner = "" if shingling.unit == "char" else " "
    return {joiner.join(tokens[i : i + size]) for i in range(len(tokens) - size + 1)}


def _chunks(order: IntArray, bounds: IntArray, split: int) -> Iterator[IntArray]:
    """Consecutive runs of ``order`` (rows by ascending token bound ``bounds`` before and after ``split``),
    each grid within ``_CHUNK_CELLS``, none straddling ``split``."""
    start = 0
    while start < order.size:
        stop = grid_run_end(bounds[: split if start < split else order.size], start, _CHUNK_CELLS)
        yield order[start:stop]
        start = stop


def grid_run_end(widths: IntArray, start: int, cells: int) -> int:
    """End of the longest run of rows from ``start`` (rows by ascending ``widths``) whose grid fits in ``cells``.

    Rows ``start .. stop - 1`` laid out as a grid take ``(stop - start) * widths[stop - 1]``
    cells, which grows with ``stop``: a binary search finds the last run that fits,
    of one row at least, with no Python step per row.
    """
    past = bisect.bisect_right(
        range(widths.size + 1), cells, lo=start + 1, key=lambda stop: (stop - start) * int(widths[stop - 1])
    )
    return max(past - 1, start + 1)


def _lengths(texts: Sequence[str]) -> IntArray:
    return np.fromiter(map(len, texts), dtype=np.intp, count=len(texts))


def _code_points(text: str) -> CodeArray:
    # ASCII text (the common case) encodes four times smaller and faster; uint8 codes are always ASCII.
    if text.isascii():
        return np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _token_grid(codes: CodeArray, lengths: IntArray, unit: ShingleUnit) -> tuple[TokenArray, IntArray]:
    """The tokens of documents laid out as a zero-padded ``(n, most tokens)`` grid of non-zero ids, and their counts.

    ``codes`` are the documents' collapsed code points back to back,
    ``lengths[i]`` of them for document ``i``. Character ids keep the code
    points' small dtype, so the grid costs a byte a cell for ASCII.
    """
    if unit == "char":
        flat: TokenArray = codes + codes.dtype.type(1)  # +1 keeps every real token non-zero, distinct from padding
        counts = lengths
    else:
        flat, counts = _word_tokens(codes, lengths)
    grid = np.zeros((lengths.size, int(counts.max())), dtype=flat.dtype)
    real = np.ones(grid.shape, dtype=bool)
    real.reshape(-1)[_row_tails(counts, grid.shape[1])] = False
    grid[real] = flat
    return grid, counts


def _row_tails(counts: IntArray, width: int) -> IntArray:
    """Flat positions of the cells after the first ``counts[i]`` of each row ``i`` of a ``(rows, width)`` grid.

    Rows of a chunk are of similar length, so the tails are few: listing them
    is cheaper than comparing every cell with its row's count.
    """
    tails = width - counts
    firsts = np.arange(counts.size) * width + counts
    return np.repeat(firsts - (np.cumsum(tails) - tails), tails) + np.arange(int(tails.sum()))


def _word_tokens(codes: CodeArray, lengths: IntArray) -> tuple[Uint64Array, IntArray]:
    """One non-zero 64-bit id per word of each document (:mod:`~stream_dedup.text.word_breaks`), and each
    document's word count.

    The documents are joined by single spaces, as ``" ".join`` would: then
    every word, empty ones included (a text that is not collapsed may have
    them), lies between two spaces or an end of the whole, or is a
    character of a script written without spaces.
    """
    ends = np.cumsum(lengths)
    joined = cast(CodeArray, np.insert(codes, ends[:-1], codes.dtype.type(_SPACE)))
    space = joined == _SPACE
    spaces = np.flatnonzero(space)
    starts = np.concatenate(([0], spaces + 1))
    stops = np.concatenate((spaces, [joined.size]))
    alone = alone_mask(joined)
    if alone is not None:
        starts, stops = _split_alone(starts, stops, space, alone)
    sums = prefix_sums(joined.astype(U64) + U64(1))
    words = fmix64(span_values(sums, starts, stops))
    words |= U64(1)
    # Document i starts at its first code point, shifted by the i spaces joined in before it.
    firsts = np.searchsorted(starts, ends - lengths + np.arange(lengths.size))
    return words, np.diff(firsts, append=starts.size)


def _split_alone(
    starts: IntArray, stops: IntArray, space: npt.NDArray[np.bool_], alone: npt.NDArray[np.bool_]
) -> tuple[IntArray, IntArray]:
    """The words between spaces ``[starts, stops)`` cut around the characters that are words ``alone``.

    The words are then: each such character, each run of other characters
    that are not spaces, and the empty words between two spaces, in order.
    """
    other = ~(space | alone)
    after_break = np.ones_like(other)
    after_break[1:] = ~other[:-1]
    run_starts = np.flatnonzero(other & after_break)
    breaks = np.append(np.flatnonzero(~other), other.size)
    run_stops = breaks[np.searchsorted(breaks, run_starts)]
    singles = np.flatnonzero(alone)
    empty = starts[starts == stops]
    all_starts = np.concatenate((run_starts, singles, empty))
    order = np.argsort(all_starts, kind="stable")
    return all_starts[order], np.concatenate((run_stops, singles + 1, empty))[order]
