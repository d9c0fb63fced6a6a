"""Runs of combining marks cut to a bounded length, so that Unicode normalisation stays linear.

NFKC puts the combining marks after each letter in canonical order with an
insertion sort: quadratic in the length of a run. A run of marks is normally
two or three long, but a hostile text ("Zalgo" text, or U+0F73, a Tibetan
vowel sign that is a starter yet decomposes into two marks, repeated) can
make one run of the whole document: 20,000 of them took one second, and a
document of the default 1 MiB limit several minutes, long enough to stall
the stage's batch again after every restart.

So a run of more than :data:`MAX_RUN` code points that are, or decompose to,
combining marks (canonical combining class above 0) keeps its first
:data:`MAX_RUN` and loses the rest, the limit of Unicode's Stream-Safe Text
Format (UAX #15, section 13). No real text has such runs; shorter texts than
:data:`CHECKED_LENGTH` code points are left as they are, since their worst
case costs under a millisecond.
"""

import functools
import sys
import unicodedata

import numpy as np
import numpy.typing as npt

#: Most marks in a row that are kept (UAX #15's stream-safe limit).
MAX_RUN = 30
#: Texts of at most this many code points are not looked at: NFKC takes under 1 ms (0.72) on the worst of them.
CHECKED_LENGTH = 512


@functools.cache
def _starts_with_a_mark() -> npt.NDArray[np.bool_]:
    """For every code point, whether it is a combining mark or decomposes to one first (built once, ~0.3 s)."""
    table = np.zeros(sys.maxunicode + 1, dtype=bool)
    for code in range(sys.maxunicode + 1):
        character = chr(code)
        if unicodedata.combining(character):
            table[code] = True
        elif unicodedata.decomposition(character):
            decomposed = unicodedata.normalize("NFKD", character)
            table[code] = bool(unicodedata.combining(decomposed[0]))
    return table


def cap_combining_runs(text: str) -> str:
    """``text`` with every run of combining marks cut to :data:`MAX_RUN` code points (see the module's docstring)."""
    if len(text) <= CHECKED_LENGTH or text.isascii():
        return text
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    marks = _starts_with_a_mark()[codes]
    if np.count_nonzero(marks) <= MAX_RUN:
        return text
    # Position of each mark within its run: its index minus the index where the run began.
    index = np.arange(codes.size)
    run_start = np.maximum.accumulate(np.where(marks, 0, index + 1))
    dropped = marks & (index - run_start >= MAX_RUN)
    if not dropped.any():
        return text
    return codes[~dropped].tobytes().decode("utf-32-le", "surrogatepass")
