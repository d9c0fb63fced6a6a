"""Unicode normalisation applied before shingling.

Two texts that a reader would call the same should shingle the same: NFKC folds
compatibility forms (full-width letters, ligatures), ``casefold`` is the
Unicode-correct lower-casing (``"Straße"`` and ``"STRASSE"`` agree), and every
run of whitespace becomes one space so layout does not change the shingles.
Punctuation stripping (Unicode categories ``P*``) is optional because for some
corpora (code, prices) punctuation carries meaning.
"""

import functools
import sys
import unicodedata
from collections.abc import Iterable

from stream_dedup.errors import InputError


@functools.cache
def _punctuation_table() -> dict[int, None]:
    """Map every Unicode punctuation code point to deletion (built once, ~0.2 s)."""
    return {cp: None for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)).startswith("P")}


def fold(text: str, strip_punctuation: bool = False) -> str:
    """NFKC-normalise and casefold ``text``, deleting punctuation if asked; whitespace is kept."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    if strip_punctuation:
        folded = folded.translate(_punctuation_table())
    return folded


def normalize(text: str, strip_punctuation: bool = False) -> str:
    """Return ``text`` folded (see :func:`fold`), whitespace runs collapsed to one space, trimmed.

    Punctuation is deleted first when ``strip_punctuation`` is true, so
    ``"a, b"`` becomes ``"a b"``. The result may be empty; callers that need a
    document reject that with :func:`require_text`.
    """
    return " ".join(fold(text, strip_punctuation).split())


def fold_all(texts: Iterable[str], strip_punctuation: bool = False) -> list[str]:
    """Fold a batch of documents (see :func:`fold`) for ``shingle_chunks(..., folded=True)``.

    Shingling then collapses the whitespace, over code points in numpy, and
    rejects a document left with no text (naming its position): joining a
    document's split words here would cost as much as hashing its shingles.
    """
    return [fold(text, strip_punctuation) for text in texts]


def normalize_all(texts: Iterable[str], strip_punctuation: bool = False) -> list[str]:
    """Normalise a batch of documents, rejecting any that normalise to nothing."""
    return [
        require_text(normalize(text, strip_punctuation), f"document at batch position {i}")
        for i, text in enumerate(texts)
    ]


def require_text(text: str, what: str = "document") -> str:
    """Raise :class:`InputError` if a normalised ``text`` is empty, else return it."""
    if not text:
        raise InputError(
            f"{what} has no text after normalisation (empty or whitespace/punctuation only); empty text is bad input"
        )
    return text
