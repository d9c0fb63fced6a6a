"""Vectorised 64-bit hashing of token sequences.

All arithmetic is numpy ``uint64`` that wraps modulo 2**64, which is what the
polynomial hash below is defined over. The constants are part of the on-disk
and on-wire contract (signatures must agree across processes, machines and
releases): changing any of them changes every signature, so tests pin golden
values.

A window of tokens ``x[i], ..., x[i+k-1]`` hashes to
``sum_j x[i+j] * P**j  (mod 2**64)``, computed for all windows at once from
prefix sums: ``(S[i+k] - S[i]) * P**-i`` where ``S[m] = sum_{j<m} x[j] * P**j``.
``P`` is odd, so it is invertible modulo 2**64. The cost is four array passes
whatever ``k`` is. The polynomial value is then scrambled by MurmurHash3's
64-bit finaliser so that every output bit depends on every input bit.
"""

import numpy as np
import numpy.typing as npt

U64 = np.uint64
MAX_U64 = np.uint64(0xFFFF_FFFF_FFFF_FFFF)

#: Multiplier of the polynomial hash (the 64-bit FNV prime; any odd constant works).
POLY_MULTIPLIER = 0x100000001B3
_POLY_INVERSE = pow(POLY_MULTIPLIER, -1, 1 << 64)

_FMIX_C1 = U64(0xFF51AFD7ED558CCD)
_FMIX_C2 = U64(0xC4CEB9FE1A85EC53)
_S33 = U64(33)

Uint64Array = npt.NDArray[np.uint64]
#: Token ids: characters in their code points' dtype, words as 64-bit hashes; all widen to uint64 exactly.
TokenArray = npt.NDArray[np.uint8] | npt.NDArray[np.uint32] | Uint64Array


def fmix64(values: Uint64Array) -> Uint64Array:
    """Apply MurmurHash3's 64-bit finaliser to ``values`` in place and return it."""
    shifted = np.empty_like(values)  # one scratch array for the three shifts, not three temporaries
    for multiplier in (_FMIX_C1, _FMIX_C2):
        values ^= np.right_shift(values, _S33, out=shifted)
        values *= multiplier
    values ^= np.right_shift(values, _S33, out=shifted)
    return values


def splitmix64(seed: int, count: int) -> Uint64Array:
    """Return ``count`` pseudo-random 64-bit words derived from ``seed``.

    Our own generator rather than ``numpy.random``: numpy does not promise that
    its streams stay the same across releases, and hash-function parameters
    derived from a seed must never change.
    """
    golden = U64(0x9E3779B97F4A7C15)
    base = U64(seed & 0xFFFF_FFFF_FFFF_FFFF)
    states = base + golden * np.arange(1, count + 1, dtype=U64)
    states ^= states >> U64(30)
    states *= U64(0xBF58476D1CE4E5B9)
    states ^= states >> U64(27)
    states *= U64(0x94D049BB133111EB)
    states ^= states >> U64(31)
    return states


class _PowerTable:
    """``P**j`` and ``P**-j`` modulo 2**64 for ``j < size``, grown on demand."""

    def __init__(self) -> None:
        self.powers: Uint64Array = np.ones(1, dtype=U64)
        self.inverses: Uint64Array = np.ones(1, dtype=U64)

    def ensure(self, size: int) -> tuple[Uint64Array, Uint64Array]:
        if self.powers.size < size:
            grown = max(size, 2 * self.powers.size)
            self.powers = _geometric(POLY_MULTIPLIER, grown)
            self.inverses = _geometric(_POLY_INVERSE, grown)
        return self.powers[:size], self.inverses[:size]


def _geometric(ratio: int, size: int) -> Uint64Array:
    terms = np.full(size, ratio, dtype=U64)
    terms[0] = 1
    return np.cumprod(terms, dtype=U64)


_POWERS = _PowerTable()


def prefix_sums(tokens: TokenArray) -> Uint64Array:
    """Prefix sums ``S`` of ``tokens[j] * P**j`` over a 1-D sequence, with ``S[0] = 0``."""
    powers, _ = _POWERS.ensure(tokens.size)
    sums = np.empty(tokens.size + 1, dtype=U64)
    sums[0] = 0
    np.multiply(tokens, powers, out=sums[1:])
    np.cumsum(sums[1:], out=sums[1:])
    return sums


def span_values(sums: Uint64Array, starts: npt.NDArray[np.intp], ends: npt.NDArray[np.intp]) -> Uint64Array:
    """Polynomial value of each token span ``[start, end)`` of a 1-D sequence with prefix ``sums``."""
    _, inverses = _POWERS.ensure(int(starts.max(initial=0)) + 1)
    return (sums[ends] - sums[starts]) * inverses[starts]


def window_values(tokens: TokenArray, lengths: npt.NDArray[np.intp], size: int) -> Uint64Array:
    """Polynomial value of every window of ``size`` tokens in each row of a padded grid.

    ``tokens`` is ``(rows, L)`` with row ``i`` holding ``lengths[i]`` real tokens
    (all non-zero) followed by padding. Returns ``(rows, L)``: entry ``i`` of a
    row is the window starting at token ``i``; entries past a row's last window
    are garbage and must be masked by the caller with :func:`window_counts`. A
    row shorter than ``size`` has exactly one window, its whole content, so
    short documents still get distinct shingles.

    The grid is hashed as one sequence, its rows back to back: every pass is
    then over one contiguous array, four times faster than row by row.
    """
    rows, length = tokens.shape
    cells = rows * length
    sums = prefix_sums(tokens.reshape(-1))
    _, inverses = _POWERS.ensure(cells)
    values = np.empty(cells, dtype=U64)
    spans = max(cells - size + 1, 0)
    np.subtract(sums[size:], sums[:spans], out=values[:spans])
    values[:spans] *= inverses[:spans]
    values[spans:] = 0
    short = np.flatnonzero(lengths < size)
    starts = short * length
    values[starts] = span_values(sums, starts, starts + lengths[short])
    return values.reshape(rows, length)


def window_counts(lengths: npt.NDArray[np.intp], size: int) -> npt.NDArray[np.intp]:
    """Number of windows (shingles, with repeats) of each row: at least one."""
    return np.maximum(lengths - size + 1, 1)
