"""MinHash signatures of documents: the front of the sketch layer.

A signature is ``num_perm`` 32-bit values; the fraction of positions on which
two signatures agree estimates the Jaccard similarity of the two documents'
shingle sets (see :func:`estimate_jaccard`). Signatures depend only on the
text and on the parameters held by :class:`MinHasher` (scheme, ``num_perm``,
seed, shingling), never on the process, the machine or the batch a document
arrived in.

Example::

    hasher = MinHasher(num_perm=128)
    sigs = hasher.signatures(["the quick brown fox", "the quick brown fax"])
    estimate_jaccard(sigs[0], sigs[1])
"""

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from stream_dedup.errors import ConfigError
from stream_dedup.sketch.classic import classic_parameters, classic_sketch
from stream_dedup.sketch.oph import EMPTY, densify, oph_sketch
from stream_dedup.text import ShingleChunk, Shingling, fold_all, shingle_chunks
from stream_dedup.text.distinct_pieces import whole_chunks
from stream_dedup.text.hashing import U64, Uint64Array

Scheme = Literal["oph", "classic"]
SignatureArray = npt.NDArray[np.uint32]

#: Sketch cells (rows x bins) signed at once: 4 MiB of uint64 a sketch array. A chunk of shingles is sized
#: by its grid of tokens, so one of short documents has many rows: 13,000 of 10 characters made sketches of
#: 107 MB, and densifying them (a copy, the empty bins' positions and sources) took 400 MB more.
SKETCH_CELLS = 1 << 19


class Sketched(NamedTuple):
    """Sketches of some documents of a batch (``rows``), and their shingle hashes where asked for and at hand."""

    rows: npt.NDArray[np.intp]
    sketches: Uint64Array
    shingles: ShingleChunk | None


@dataclass(frozen=True)
class MinHasher:
    """Computes MinHash sketches and signatures for batches of documents.

    Attributes:
        num_perm: signature length (default 128). For ``scheme="oph"`` it is
            the number of bins; any value from 8 to 4096.
        scheme: ``"oph"`` (default): one-permutation hashing with optimal
            densification, one hash per shingle; ``"classic"``: ``num_perm``
            universal hash functions ``(a*x + b) mod (2**61 - 1)`` as in the seeds.
        seed: selects the hash functions; signatures are comparable only
            between hashers with equal parameters.
        shingling: how text becomes shingles (:class:`Shingling`).
    """

    num_perm: int = 128
    scheme: Scheme = "oph"
    seed: int = 1
    shingling: Shingling = field(default_factory=Shingling)

    def __post_init__(self) -> None:
        if not isinstance(self.num_perm, int) or not 8 <= self.num_perm <= 4096:
            raise ConfigError("num_perm", f"must be a whole number from 8 to 4096, got {self.num_perm!r}")
        if self.scheme not in ("oph", "classic"):
            raise ConfigError("scheme", f"must be 'oph' or 'classic', got {self.scheme!r}")
        if not isinstance(self.seed, int) or not 0 <= self.seed < 2**63:
            raise ConfigError("seed", f"must be a whole number from 0 to 2**63-1, got {self.seed!r}")

    def signatures(self, texts: Sequence[str]) -> SignatureArray:
        """Normalise, shingle and sign ``texts``: ``(len(texts), num_perm)`` uint32.

        Raises :class:`~stream_dedup.errors.InputError` if a text normalises to nothing.
        """
        return self.finalize(self.sketches(fold_all(texts, self.shingling.folding), folded=True))

    def sketches(self, texts: Sequence[str], folded: bool = False) -> Uint64Array:
        """Un-finalised sketches of normalised texts (folded ones with ``folded=True``): ``(n, num_perm)`` uint64.

        Sketches of two texts merge into the sketch of the union of their
        shingle sets by element-wise minimum; OPH sketches may hold ``EMPTY``.
        """
        sketches = np.empty((len(texts), self.num_perm), dtype=U64)
        for rows, chunk_sketches, _ in self.sketch_chunks(texts, folded, shingles=False):
            sketches[rows] = chunk_sketches
        return sketches

    def sketch_chunks(self, texts: Sequence[str], folded: bool = False, shingles: bool = True) -> Iterator[Sketched]:
        """Sketches chunk by chunk, with their shingle hashes for callers that need them (see :func:`shingle_chunks`).

        A long document comes as one row of its own, its sketch the minimum
        of its pieces' (the same as of the whole). With ``shingles`` its
        chunk holds its distinct hashes (:func:`whole_chunks`, memory in
        proportion to them); without, none, and its pieces are never held together.
        """
        chunks = shingle_chunks(texts, self.shingling, self.seed, folded)
        if shingles:
            for chunk in self._row_bounded(whole_chunks(chunks)):
                yield Sketched(chunk.rows, self.sketch_chunk(chunk), chunk)
            return
        merged: Uint64Array | None = None
        for chunk in self._row_bounded(chunks):
            sketch = self.sketch_chunk(chunk)
            if not chunk.piece:
                yield Sketched(chunk.rows, sketch, chunk)
                continue
            merged = sketch if merged is None else np.minimum(merged, sketch, out=merged)
            if chunk.final:
                yield Sketched(chunk.rows, merged, None)
                merged = None

    def _row_bounded(self, chunks: Iterable[ShingleChunk]) -> Iterator[ShingleChunk]:
        """``chunks`` cut into runs of rows whose sketches take at most :data:`SKETCH_CELLS` cells (views, no copy)."""
        most = max(1, SKETCH_CELLS // self.num_perm)
        for chunk in chunks:
            if chunk.rows.size <= most:
                yield chunk
                continue
            for start in range(0, chunk.rows.size, most):
                part = slice(start, start + most)
                yield ShingleChunk(chunk.rows[part], chunk.hashes[part], chunk.counts[part])

    def sketch_chunk(self, chunk: ShingleChunk) -> Uint64Array:
        """Sketch the documents of one chunk of shingle hashes."""
        if self.scheme == "oph":
            return oph_sketch(chunk, self.num_perm)
        slopes, intercepts = classic_parameters(self.num_perm, self.seed)
        return classic_sketch(chunk, slopes, intercepts)

    def finalize(self, sketches: Uint64Array) -> SignatureArray:
        """Turn sketches into signatures: densify empty OPH bins, fold to 32 bits."""
        full = self.densified(sketches)
        folded = full ^ (full >> U64(32))
        return folded.astype(np.uint32)

    def densified(self, sketches: Uint64Array) -> Uint64Array:
        """Sketches with every empty OPH bin filled (classic sketches have none)."""
        if self.scheme == "oph" and (sketches == EMPTY).any():
            return densify(sketches, self.seed)
        return sketches


def estimate_jaccard(left: SignatureArray, right: SignatureArray) -> float:
    """Fraction of positions on which two signatures agree: an unbiased Jaccard estimate.

    The standard error is about ``sqrt(J * (1 - J) / num_perm)``.
    """
    return float(np.count_nonzero(left == right) / left.shape[-1])
