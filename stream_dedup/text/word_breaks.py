"""Where words break: at spaces, and around every character of a script written without spaces.

Word shingles need words. Most scripts separate words by spaces; Chinese,
Japanese, Thai, Lao, Khmer, Myanmar, Tibetan, Yi, the Tai scripts, Tangut
and Nushu do not, so a paragraph of them was one "word", and two near-copies
of it (one character edited) shared no word shingle at all: in word mode
every such pair was missed. As
Unicode's word boundaries (UAX #29) treat ideographs, and Lucene's standard
tokenizer does, each character of these scripts is a word on its own here.
Finding the real words of Thai or Chinese needs a dictionary; a character a
word gives their word shingles the grain of character shingles, which find
near-copies as well as they do in any script. Korean is written with spaces
and keeps its words; so do punctuation and digits, which form words of
their own between such characters ("中文。" is 中, 文, 。).
"""

import re

import numpy as np
import numpy.typing as npt

from stream_dedup.text.whitespace import CodeArray

#: Code point ranges ``[start, stop)`` whose characters are words on their own. A change to them changes
#: word signatures: it needs a new ``config.WORD_BREAKS``, so that word indexes made before are refused.
ALONE_RANGES = (
    (0x0E00, 0x10A0),  # Thai, Lao, Tibetan, Myanmar
    (0x1780, 0x1800),  # Khmer
    (0x1950, 0x1A00),  # Tai Le, New Tai Lue, Khmer symbols
    (0x1A20, 0x1AB0),  # Tai Tham
    (0x2E80, 0x2F00),  # CJK radicals supplement (NFKC keeps most; Kangxi radicals fold to ideographs)
    (0x3005, 0x3008),  # ideographic iteration mark, closing mark, number zero
    (0x3021, 0x302A),  # Hangzhou numerals
    (0x3038, 0x303C),  # Hangzhou numerals 10-30 (NFKC: ideographs), vertical iteration mark 〻
    (0x3040, 0x3130),  # Hiragana, Katakana, Bopomofo
    (0x31A0, 0x31C0),  # Bopomofo extended
    (0x31F0, 0x3200),  # Katakana phonetic extensions
    (0x3400, 0x4DC0),  # CJK ideographs, extension A
    (0x4E00, 0xA490),  # CJK ideographs, Yi syllables
    (0xA9E0, 0xAA00),  # Myanmar extended B
    (0xAA60, 0xAAE0),  # Myanmar extended A, Tai Viet
    (0xF900, 0xFB00),  # CJK compatibility ideographs
    (0x17000, 0x18D80),  # Tangut, Khitan
    (0x1AFF0, 0x1B300),  # Kana supplement and extensions, Nushu
    (0x20000, 0x2FA20),  # CJK ideographs, extensions B to F and compatibility supplement
    (0x30000, 0x323B0),  # CJK ideographs, extensions G and H
)
#: The ranges' bounds in order: a code point is in a range when an odd number of bounds are at or below it.
_BOUNDS = np.array([bound for pair in ALONE_RANGES for bound in pair], dtype=np.uint32)
_CLASS = "".join(f"{chr(start)}-{chr(stop - 1)}" for start, stop in ALONE_RANGES)
#: A word of a space-free piece of text: one character of the ranges, or a run of the others.
_WORD = re.compile(f"[{_CLASS}]|[^{_CLASS}]+")
#: A word of any text, as a reader sees it: one character of the ranges, or a run of other non-whitespace.
WORD_SPANS = re.compile(f"[{_CLASS}]|[^\\s{_CLASS}]+")


def alone_mask(codes: CodeArray) -> npt.NDArray[np.bool_] | None:
    """Which of ``codes`` are words on their own; ``None`` when none is (always for ASCII: one cheap check)."""
    if codes.dtype == np.uint8 or not codes.size or int(codes.max()) < ALONE_RANGES[0][0]:
        return None
    alone = (np.searchsorted(_BOUNDS, codes, side="right") & 1).astype(bool)
    return alone if alone.any() else None


def split_words(text: str) -> list[str]:
    """The words of a normalised ``text``: split at single spaces (an empty word between two), then each
    character of :data:`ALONE_RANGES` apart from its neighbours."""
    pieces = text.split(" ")
    if text.isascii():
        return pieces
    return [word for piece in pieces for word in (_WORD.findall(piece) or [piece])]
