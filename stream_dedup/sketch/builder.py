"""Incremental signatures: feed a document in pieces, or merge two sketches.

A long document (a crawled page arriving in chunks, a log that grows) need not
be held in memory: :class:`SignatureBuilder` keeps only the running per-slot
minimum and the last ``size - 1`` tokens, because a shingle may span two
pieces. Feeding a text in any number of pieces gives the same signature as
signing it whole, provided no piece boundary falls inside a Unicode combining
sequence (NFKC is applied per piece).

Example::

    builder = SignatureBuilder(MinHasher())
    builder.update("The quick brown ")
    builder.update("fox jumps")
    signature = builder.signature()
"""

from collections.abc import Sequence

import numpy as np

from stream_dedup.errors import InputError
from stream_dedup.sketch.minhash import MinHasher, SignatureArray
from stream_dedup.sketch.oph import EMPTY
from stream_dedup.text.hashing import U64, Uint64Array
from stream_dedup.text.normalize import fold
from stream_dedup.text.word_breaks import split_words


class SignatureBuilder:
    """Accumulates the sketch of one document fed as a sequence of text pieces."""

    def __init__(self, hasher: MinHasher) -> None:
        self._hasher = hasher
        self._size = hasher.shingling.size
        self._by_word = hasher.shingling.unit == "word"
        self._joiner = " " if self._by_word else ""
        self._sketch: Uint64Array = np.full(hasher.num_perm, EMPTY, dtype=U64)
        # The last size-1 complete tokens: a str of characters or a list of words.
        self._carry: Sequence[str] = [] if self._by_word else ""
        self._partial_word = ""  # a word the last piece may have cut in two
        self._tokens = 0  # complete tokens so far
        self._space_pending = False  # the text so far ends in whitespace

    def update(self, text: str) -> None:
        """Add the next piece of the document."""
        folded = fold(text, self._hasher.shingling.folding)
        words = folded.split()
        if not words:
            self._space_pending = self._space_pending or bool(folded)
            return
        at_boundary = folded[0].isspace() or self._space_pending
        self._space_pending = folded[-1].isspace()
        if not self._by_word:
            separator = " " if at_boundary and self._tokens else ""
            self._absorb(separator + " ".join(words))
            return
        words = split_words(" ".join(words))
        if self._partial_word:
            if at_boundary:
                words.insert(0, self._partial_word)
            else:  # the word cut in two, whole again (or two words: "中" then "文" are two)
                words[:1] = split_words(self._partial_word + words[0])
        self._partial_word = "" if self._space_pending else words.pop()
        self._absorb(words)

    def merge(self, other: "SignatureBuilder") -> None:
        """Make this sketch that of the union of both documents' shingle sets."""
        np.minimum(self._sketch, other.sketch(), out=self._sketch)

    def sketch(self) -> Uint64Array:
        """The un-finalised sketch of everything fed so far, as if the document ended here."""
        tail: Sequence[str] = self._carry
        if self._partial_word:
            tail = [*self._carry, self._partial_word]
        tokens = self._tokens + bool(self._partial_word)
        if tokens == 0:
            raise InputError("incremental document has no text after normalisation; empty text is bad input")
        if tokens < self._size or self._partial_word:
            # Either the whole (short) document is one shingle, all in the
            # tail, or the word that ends the document completes one last window.
            last: Uint64Array = self._hasher.sketches([self._joiner.join(tail)])[0]
            return np.minimum(self._sketch, last, out=last)
        return self._sketch.copy()

    def signature(self) -> SignatureArray:
        """The finished signature, equal to signing the whole text at once."""
        signature: SignatureArray = self._hasher.finalize(self.sketch()[None, :])[0]
        return signature

    def _absorb(self, tokens: Sequence[str]) -> None:
        """Sign every window that ends in one of the new complete ``tokens``."""
        combined = self._carry + tokens  # type: ignore[operator]  # str + str or list + list
        if len(combined) >= self._size:
            windows = self._hasher.sketches([self._joiner.join(combined)])[0]
            np.minimum(self._sketch, windows, out=self._sketch)
        self._carry = combined[max(0, len(combined) - self._size + 1) :]
        self._tokens += len(tokens)
