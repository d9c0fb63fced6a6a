"""Unicode normalisation applied before shingling.

Two texts that a reader would call the same should shingle the same: NFKC folds
compatibility forms (full-width letters, ligatures), ``casefold`` is the
Unicode-correct lower-casing (``"Straße"`` and ``"STRASSE"`` agree), and every
run of whitespace becomes one space so layout does not change the shingles.
Invisible characters (Unicode's default-ignorable code points: zero-width
spaces and joiners, soft hyphens, bidirectional controls, variation
selectors, byte order marks, tags) are deleted first, unless
``ignore_invisible`` is off: a reader never sees them, yet each would split
the shingles around it, so a soft hyphen per long word (as some news sites
print them) or a zero-width space between letters (a known way to slip spam
past duplicate filters) would make a copy look new. Letters of other
scripts that look like Latin ones (a Cyrillic e, U+0435, in "free") are folded to
them when ``fold_lookalikes`` is on (:mod:`~stream_dedup.text.lookalikes`).
Punctuation stripping (Unicode categories ``P*``) is optional because for
some corpora (code, prices) punctuation carries meaning.
"""

import functools
import re
import sys
import unicodedata
from collections.abc import Iterable
from typing import NamedTuple

from stream_dedup.errors import InputError
from stream_dedup.text.combining_runs import cap_combining_runs
from stream_dedup.text.lookalikes import LOOKALIKES


class Folding(NamedTuple):
    """What normalisation does besides NFKC, casefolding and whitespace (the settings of the same names).

    Two documents are compared only if they were folded alike: all three are
    signature parameters.
    """

    strip_punctuation: bool = False
    ignore_invisible: bool = True
    fold_lookalikes: bool = False


#: The defaults.
DEFAULT_FOLDING = Folding()

#: Characters of a long text collapsed at a time (:func:`_split_and_joined`).
_COLLAPSE_PIECE = 1 << 20
#: One whitespace character, as ``str.isspace`` and ``str.split`` take it (both are ``Py_UNICODE_ISSPACE``).
_WHITESPACE = re.compile(r"\s")

#: What ``str.split()`` splits ASCII text on besides the space.
_ASCII_SEPARATORS = "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f"

#: Unicode's Default_Ignorable_Code_Point property (DerivedCoreProperties.txt, Unicode 15.1), in the basic
#: multilingual plane and above it: one class of both would be scanned three times slower.
_INVISIBLE_BMP = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    "\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8]"
)
_INVISIBLE_ASTRAL = re.compile("[\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0000-\U000e0fff]")


def _without_invisible(text: str) -> str:
    """``text`` without its default-ignorable code points (about 2.5 µs a kilobyte; nothing to do in ASCII)."""
    if text.isascii():
        return text
    text = _INVISIBLE_BMP.sub("", text)
    if len(text.encode("utf-16-le", "surrogatepass")) > 2 * len(text):  # above the BMP: two UTF-16 units
        text = _INVISIBLE_ASTRAL.sub("", text)
    return text


@functools.cache
def _punctuation_table() -> dict[int, None]:
    """Map every Unicode punctuation code point to deletion (built once, ~0.2 s)."""
    return {cp: None for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)).startswith("P")}


def fold(text: str, folding: Folding = DEFAULT_FOLDING) -> str:
    """NFKC-normalise and casefold ``text``, then what ``folding`` asks; whitespace is kept.

    Invisible characters go before NFKC, so that a combining mark behind one
    composes with its letter as if it were not there; lookalike letters after
    casefolding, which is what their table is made for.
    """
    if folding.ignore_invisible:
        text = _without_invisible(text)
    # Runs of combining marks are cut first: NFKC's cost is quadratic in their length.
    folded = unicodedata.normalize("NFKC", cap_combining_runs(text)).casefold()
    if folding.fold_lookalikes and not folded.isascii():
        folded = folded.translate(LOOKALIKES)
    if folding.strip_punctuation:
        folded = folded.translate(_punctuation_table())
    return folded


def normalize(text: str, folding: Folding = DEFAULT_FOLDING) -> str:
    """Return ``text`` folded (see :func:`fold`), whitespace runs collapsed to one space, trimmed.

    Punctuation is deleted first when ``strip_punctuation`` is true, so
    ``"a, b"`` becomes ``"a b"``. The result may be empty; callers that need a
    document reject that with :func:`require_text`.
    """
    return _collapsed(fold(text, folding))


def _collapsed(text: str) -> str:
    """``" ".join(text.split())``: every run of whitespace one space, none at the ends.

    Most texts are collapsed already (one line, single spaces), and checking
    that costs a quarter of splitting a text into its words and joining them.
    """
    if "  " in text or text[:1] == " " or text[-1:] == " ":
        return _split_and_joined(text)
    if text.isascii():
        other_whitespace = any(separator in text for separator in _ASCII_SEPARATORS)
    else:
        other_whitespace = not text.isprintable()  # the space is the only printable whitespace
    return _split_and_joined(text) if other_whitespace else text


def _split_and_joined(text: str) -> str:
    """``" ".join(text.split())``, a piece of about :data:`_COLLAPSE_PIECE` characters at a time.

    Split whole, a long text became a string object per word at once (about
    12 bytes a character: 358 MB for 30 MB of text with line breaks, where
    the rest of reading it takes a few bytes a character). Pieces are cut
    at whitespace (``\\s`` is ``str.isspace``), so no word is cut.
    """
    if len(text) <= _COLLAPSE_PIECE:
        return " ".join(text.split())
    pieces: list[str] = []
    start = 0
    while start < len(text):
        cut = _WHITESPACE.search(text, min(start + _COLLAPSE_PIECE, len(text)))
        end = cut.start() if cut else len(text)
        piece = " ".join(text[start:end].split())
        if piece:
            pieces.append(piece)
        start = end
    return " ".join(pieces)


def fold_all(texts: Iterable[str], folding: Folding = DEFAULT_FOLDING) -> list[str]:
    """Fold a batch of documents (see :func:`fold`) for ``shingle_chunks(..., folded=True)``.

    Shingling then collapses the whitespace, over code points in numpy, and
    rejects a document left with no text (naming its position): joining a
    document's split words here would cost as much as hashing its shingles.
    """
    return [fold(text, folding) for text in texts]


def normalize_all(texts: Iterable[str], folding: Folding = DEFAULT_FOLDING) -> list[str]:
    """Normalise a batch of documents, rejecting any that normalise to nothing."""
    return [require_text(normalize(text, folding), f"document at batch position {i}") for i, text in enumerate(texts)]


def require_text(text: str, what: str = "document") -> str:
    """Raise :class:`InputError` if a normalised ``text`` is empty, else return it."""
    if not text:
        raise InputError(
            f"{what} has no text after normalisation (empty or whitespace/punctuation only); empty text is bad input"
        )
    return text
