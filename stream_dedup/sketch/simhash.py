"""Charikar's SimHash: one 64-bit fingerprint per document from its shingle hashes.

Each shingle ``s`` stands for a random vector ``r(s)`` in ``{-1, +1}**64``: bit
``j`` of the shingle's 64-bit hash is ``+1`` when set and ``-1`` when clear.
The fingerprint's bit ``j`` is the sign of the sum of those vectors over the
document's shingles (set when the sum is ``>= 0``, Charikar's convention)::

    fingerprint[j] = 1  iff  sum_s w(s) * r_j(s) >= 0

Each bit is a random hyperplane through the origin, so two documents with
feature vectors at angle ``theta`` disagree on a bit with probability
``theta / pi`` and the Hamming distance of their fingerprints estimates
``64 * theta / pi``. For shingle sets ``A`` and ``B`` counted once each,
``cos(theta) = |A & B| / sqrt(|A| * |B|)``.

The shingle hashes are the ones MinHash uses (:func:`~stream_dedup.text.shingle_chunks`:
polynomial hash of the tokens, seeded, scrambled by MurmurHash3's finaliser, so
every bit is an independent-looking coin): a shingle's hash *is* its random
vector, and no further hashing is needed.

Weighting ``w(s)``:

* ``"set"`` (default): every distinct shingle counts once. The fingerprint is a
  function of the shingle *set*, the same object MinHash sees, so the two
  methods judge the same representation of a document. It is also robust to a
  phrase repeated many times (a signature, a banner, "call now!" ten times)
  outweighing the rest of the text.
* ``"frequency"``: every occurrence counts (term-frequency weights, as in
  Manku et al.'s web crawler), so repeated text pulls the fingerprint toward
  itself. Cheaper: no per-document sort to remove repeats.

The sums are computed for a whole chunk at once without unpacking bits: the
chunk's hashes are added column by column as *bit-sliced* counters (slice
``b`` holds bit ``b`` of all 64 counters of a row in one ``uint64``), pairwise
in a tree, so a 1 KB document costs about a dozen word operations per shingle.
A bit-sliced comparison against half the shingle count then yields the
fingerprint directly.

Example::

    hasher = SimHasher()
    prints = hasher.fingerprints(["the quick brown fox", "the quick brown fax"])
    hamming_distance(prints[0], prints[1])  # small: the texts differ in one letter
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from stream_dedup.errors import ConfigError
from stream_dedup.text import ShingleChunk, Shingling, normalize_all, shingle_chunks
from stream_dedup.text.distinct_pieces import whole_chunks
from stream_dedup.text.hashing import U64, Uint64Array

Weighting = Literal["set", "frequency"]

_ALL_ONES = U64(0xFFFF_FFFF_FFFF_FFFF)
#: Hashes whose bits :func:`_weighted_fingerprint` unpacks at once (1 MiB of bits, 8 MiB as float64).
_VOTING_BLOCK = 1 << 14


@dataclass(frozen=True)
class SimHasher:
    """Computes 64-bit SimHash fingerprints for batches of documents.

    Attributes:
        shingling: how text becomes shingles (:class:`~stream_dedup.text.Shingling`).
        seed: selects the shingle hash function, hence the hyperplanes;
            fingerprints are comparable only between hashers with equal parameters.
        weighting: ``"set"`` (default, each distinct shingle once) or
            ``"frequency"`` (each occurrence counts); see the module docstring.
    """

    shingling: Shingling = field(default_factory=Shingling)
    seed: int = 1
    weighting: Weighting = "set"

    def __post_init__(self) -> None:
        if self.weighting not in ("set", "frequency"):
            raise ConfigError("weighting", f"must be 'set' or 'frequency', got {self.weighting!r}")
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ConfigError("seed", f"must be a whole number from 0 to 2**63-1, got {self.seed!r}")

    def fingerprints(self, texts: Sequence[str], normalized: bool = False) -> Uint64Array:
        """Normalise (unless ``normalized``), shingle and fingerprint ``texts``: ``(len(texts),)`` uint64.

        Raises :class:`~stream_dedup.errors.InputError` if a text normalises to nothing.
        """
        if not normalized:
            texts = normalize_all(texts, self.shingling.folding)
        out = np.empty(len(texts), dtype=U64)
        for chunk in whole_chunks(shingle_chunks(texts, self.shingling, self.seed)):
            out[chunk.rows] = self.fingerprint_chunk(chunk)
        return out

    def fingerprint_chunk(self, chunk: ShingleChunk) -> Uint64Array:
        """Fingerprints of the documents of one chunk of shingle hashes.

        A long document's chunk of distinct hashes
        (:func:`~stream_dedup.text.distinct_pieces.whole_chunks`) counts
        each once, or as often as it :attr:`~stream_dedup.text.ShingleChunk.repeats`.
        """
        if chunk.repeats is not None:
            votes = chunk.repeats if self.weighting == "frequency" else np.ones_like(chunk.repeats)
            return np.array([_weighted_fingerprint(chunk.hashes[0, : chunk.counts[0]], votes)], dtype=U64)
        hashes, counted = _weighted_hashes(chunk, self.weighting)
        ones = _bit_sliced_column_sums(hashes)
        # Bit j is set when ones_j - (counted - ones_j) >= 0, i.e. ones_j > (counted - 1) // 2.
        return _bit_sliced_greater(ones, (counted - 1) // 2)


def hamming_distance(left: Uint64Array | np.uint64, right: Uint64Array | np.uint64) -> npt.NDArray[np.uint8]:
    """Number of differing bits of 64-bit fingerprints, element-wise (numpy broadcasting)."""
    return np.bitwise_count(np.bitwise_xor(left, right))


def _weighted_fingerprint(hashes: Uint64Array, votes: npt.NDArray[np.uint32]) -> np.uint64:
    """The fingerprint of one document whose distinct ``hashes`` vote ``votes`` times each.

    The bits are unpacked a block of :data:`_VOTING_BLOCK` hashes at a time
    (64 bytes a hash) and weighted by a product: for a long document, where
    the bit-sliced sums' halving rounds would copy the whole row again and again.
    """
    ones = np.zeros(64)
    for start in range(0, hashes.size, _VOTING_BLOCK):
        block = hashes[start : start + _VOTING_BLOCK].astype("<u8")  # bit j of a hash: bit j % 8 of byte j // 8
        bits = np.unpackbits(block.view(np.uint8).reshape(-1, 8), axis=1, bitorder="little")
        # In float64, where numpy multiplies by BLAS: exact, as every sum stays below 2**53.
        ones += votes[start : start + _VOTING_BLOCK].astype(np.float64) @ bits.astype(np.float64)
    # As _bit_sliced_greater: bit j is set when the ones outvote or tie the zeros.
    limit = (int(votes.sum(dtype=np.int64)) - 1) // 2
    fingerprint: np.uint64 = np.packbits(ones > limit, bitorder="little").view("<u8").astype(U64)[0]
    return fingerprint


def _weighted_hashes(chunk: ShingleChunk, weighting: Weighting) -> tuple[Uint64Array, npt.NDArray[np.intp]]:
    """The chunk's hashes with every entry that must not count set to 0, and how many count per row.

    A zeroed entry adds nothing to the per-bit counts of ones, and it is left
    out of the row's total, so it casts no vote at all. (A real hash of 0
    stays in the total: it votes -1 on every bit, as it should.)
    """
    width = chunk.hashes.shape[1]
    if weighting == "frequency":
        counted = chunk.counts
        keep = np.arange(width) < counted[:, None]
        return np.where(keep, chunk.hashes, U64(0)), counted
    # Padding (MAX_U64) sorts last, so the first counts[i] entries of a sorted row are its real ones.
    ordered = np.sort(chunk.hashes, axis=1)
    keep = np.arange(width) < chunk.counts[:, None]
    keep[:, 1:] &= ordered[:, 1:] != ordered[:, :-1]
    ordered[~keep] = 0
    return ordered, np.count_nonzero(keep, axis=1)


def _bit_sliced_column_sums(hashes: Uint64Array) -> list[Uint64Array]:
    """Per row, the number of set bits at each of the 64 positions over all columns, bit-sliced.

    Returns slices ``s`` with ``s[b][row]`` holding bit ``b`` of the 64
    counts of ``row``: the count at position ``j`` is
    ``sum_b ((s[b][row] >> j) & 1) << b``. Columns are added pairwise with a
    ripple-carry adder on whole slices, halving the width each round.
    """
    slices = [hashes]
    while slices[0].shape[1] > 1:
        if slices[0].shape[1] % 2:
            slices = [np.concatenate((s, np.zeros((s.shape[0], 1), dtype=U64)), axis=1) for s in slices]
        summed: list[Uint64Array] = []
        carry: Uint64Array | None = None
        for s in slices:
            left, right = s[:, 0::2], s[:, 1::2]
            differ = left ^ right
            if carry is None:
                summed.append(differ)
                carry = left & right
            else:
                summed.append(differ ^ carry)
                carry = (left & right) | (carry & differ)
        assert carry is not None
        summed.append(carry)
        slices = summed
    return [s[:, 0] for s in slices]


def _bit_sliced_greater(counts: list[Uint64Array], limits: npt.NDArray[np.intp]) -> Uint64Array:
    """Bit ``j`` of row ``i`` set where the bit-sliced count at position ``j`` exceeds ``limits[i]``.

    Compares from the most significant slice down: a position is greater at
    the first slice where the count has a 1 and the limit a 0, provided all
    higher slices were equal.
    """
    limits = limits.astype(U64)
    rows = limits.shape[0]
    greater = np.zeros(rows, dtype=U64)
    equal = np.full(rows, _ALL_ONES, dtype=U64)
    # A limit needs no more slices than the counts have: limits < counted <= 2**len(counts).
    for bit in range(len(counts) - 1, -1, -1):
        limit_bit = np.where((limits >> U64(bit)) & U64(1), _ALL_ONES, U64(0))
        greater |= equal & counts[bit] & ~limit_bit
        equal &= ~(counts[bit] ^ limit_bit)
    return greater
