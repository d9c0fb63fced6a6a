"""Shared passages of two texts: the runs of words both contain, to show a reader why two documents match.

Greedy string tiling (Wise, 1996), the method plagiarism detectors such as
JPlag use: take the longest run of words the two texts have in common, mark
it in both, and repeat among the words not yet marked, until the longest
remaining run is shorter than ``min_words``. The passages never overlap in
either text, so each one, highlighted, is a run that really occurs in both;
merely marking every word that belongs to some common run would not promise
that (two runs that touch in one text may lie apart in the other).

Words are maximal runs of non-whitespace characters, and each character of
a script written without spaces (:mod:`~stream_dedup.text.word_breaks`:
otherwise a paragraph of Chinese is one word, and two near-copies of it
share no passage), compared exactly: the stage's normalised text
(case-folded, whitespace collapsed) is what this is meant for, so ``Park``
and ``park`` have already become equal.

Example:
    >>> a = "bright two-room flat near the park, top floor"
    >>> b = "top floor and bright two-room flat near the park, lift"
    >>> [a[p.a_start : p.a_end] for p in shared_passages(a, b, min_words=2)]
    ['bright two-room flat near the park,', 'top floor']
"""

from typing import NamedTuple

from stream_dedup.text.word_breaks import WORD_SPANS

#: Longest run of words a reader calls a shared passage rather than a coincidence.
DEFAULT_MIN_WORDS = 4


class Passage(NamedTuple):
    """A run of ``words`` words found in both texts.

    It spans characters ``[a_start, a_end)`` of the first text and
    ``[b_start, b_end)`` of the second, from its first word's first character
    to its last word's last one.
    """

    a_start: int
    a_end: int
    b_start: int
    b_end: int
    words: int


class _Run(NamedTuple):
    """``length`` equal words from word ``i`` of the first text and word ``j`` of the second."""

    i: int
    j: int
    length: int


def shared_passages(a: str, b: str, min_words: int = DEFAULT_MIN_WORDS) -> list[Passage]:
    """The shared passages of ``a`` and ``b``, longest first (among equals, earliest in ``a``).

    A passage has at least ``min_words`` words, or all the words of the
    shorter text, so that two one-word texts that are equal are still shown
    as sharing it. Cost grows with the number of word pairs that start equal
    runs: callers pass the texts they show, not megabytes.

    Args:
        a, b: the two texts.
        min_words: the fewest words a passage has (default 4; at least 1).
    """
    spans_a = [m.span() for m in WORD_SPANS.finditer(a)]
    spans_b = [m.span() for m in WORD_SPANS.finditer(b)]
    words_a = [a[start:end] for start, end in spans_a]
    words_b = [b[start:end] for start, end in spans_b]
    if not words_a or not words_b:
        return []
    shortest = max(1, min(min_words, len(words_a), len(words_b)))
    tiles = _tiles(_maximal_runs(words_a, words_b, shortest), len(words_a), len(words_b), shortest)
    return [
        Passage(
            spans_a[t.i][0], spans_a[t.i + t.length - 1][1], spans_b[t.j][0], spans_b[t.j + t.length - 1][1], t.length
        )
        for t in tiles
    ]


def _maximal_runs(words_a: list[str], words_b: list[str], shortest: int) -> list[_Run]:
    """Every common run of at least ``shortest`` words that extends neither left nor right, longest first."""
    starts: dict[tuple[str, ...], list[int]] = {}
    for j in range(len(words_b) - shortest + 1):
        starts.setdefault(tuple(words_b[j : j + shortest]), []).append(j)
    runs = []
    for i in range(len(words_a) - shortest + 1):
        for j in starts.get(tuple(words_a[i : i + shortest]), ()):
            if i and j and words_a[i - 1] == words_b[j - 1]:
                continue  # inside a run that starts further left, found from there
            length = shortest
            while (
                i + length < len(words_a) and j + length < len(words_b) and words_a[i + length] == words_b[j + length]
            ):
                length += 1
            runs.append(_Run(i, j, length))
    runs.sort(key=lambda run: (-run.length, run.i, run.j))
    return runs


def _tiles(runs: list[_Run], count_a: int, count_b: int, shortest: int) -> list[_Run]:
    """Greedy tiling: mark the longest stretch of unmarked words in both texts, until none is long enough.

    Every common run of unmarked words lies inside one maximal run, so the
    stretches of the maximal runs are all the candidates there are. ``runs``
    is sorted longest first: once a run is shorter than the best stretch
    found, no later run can beat it (an equal one may still be earlier in
    the first text, and win the tie).
    """
    marked_a, marked_b = bytearray(count_a), bytearray(count_b)
    tiles: list[_Run] = []
    while True:
        best: _Run | None = None
        for run in runs:
            if best is not None and run.length < best.length:
                break
            stretch = _longest_unmarked(run, marked_a, marked_b)
            if best is None or (stretch.length, -stretch.i, -stretch.j) > (best.length, -best.i, -best.j):
                best = stretch
        if best is None or best.length < shortest:
            return tiles
        marked_a[best.i : best.i + best.length] = b"\x01" * best.length
        marked_b[best.j : best.j + best.length] = b"\x01" * best.length
        tiles.append(best)


def _longest_unmarked(run: _Run, marked_a: bytearray, marked_b: bytearray) -> _Run:
    """The longest stretch of ``run`` whose words are unmarked in both texts (the first of equals)."""
    best = _Run(run.i, run.j, 0)
    start = 0
    for offset in range(run.length + 1):
        if offset == run.length or marked_a[run.i + offset] or marked_b[run.j + offset]:
            if offset - start > best.length:
                best = _Run(run.i + start, run.j + start, offset - start)
            start = offset + 1
    return best
