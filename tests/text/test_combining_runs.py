"""Runs of combining marks are cut to 30, so that normalising a hostile text takes linear time."""

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.text import normalize
from stream_dedup.text.combining_runs import CHECKED_LENGTH, MAX_RUN, cap_combining_runs

#: Letters, combining marks of several classes, and U+0F73 (a starter that decomposes into two marks).
PIECES = ["a", "é", "ж", " ", "\u0301", "\u0316", "\u0334", "\u05b0", "\u0f73", "\u0f75", "\U0001d165"]


def starts_with_a_mark(character: str) -> bool:
    return bool(unicodedata.combining(unicodedata.normalize("NFKD", character)[0]))


def capped_one_by_one(text: str) -> str:
    """The rule, written out: a mark past the 30th of its run is dropped."""
    kept, run = [], 0
    for character in text:
        run = run + 1 if starts_with_a_mark(character) else 0
        if run <= MAX_RUN:
            kept.append(character)
    return "".join(kept)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PIECES), st.integers(1, 80)), min_size=1, max_size=60))
def test_runs_are_cut_as_the_rule_says_in_long_texts_and_short_ones_are_left_alone(
    pieces: list[tuple[str, int]],
) -> None:
    text = "".join(piece * count for piece, count in pieces)
    expected = capped_one_by_one(text) if len(text) > CHECKED_LENGTH else text
    assert cap_combining_runs(text) == expected


def test_a_hostile_run_is_normalised_as_its_first_thirty_marks() -> None:
    """20,000 of U+0F73 took NFKC a second (a megabyte, minutes); cut, they are 30, as two marks each."""
    hostile = "a" + "\u0f73" * 20_000 + " end"
    assert normalize(hostile) == normalize("a" + "\u0f73" * MAX_RUN + " end")
    zalgo = "z" + "\u0301\u0316\u0334" * 10_000
    assert normalize(zalgo) == unicodedata.normalize("NFKC", zalgo[: 1 + MAX_RUN])


def test_prose_with_accents_is_untouched() -> None:
    prose = "Où est la bibliothèque ? Ça dépend de l'été à Zürich. " * 40
    assert len(prose) > CHECKED_LENGTH
    assert cap_combining_runs(prose) == prose
    decomposed = unicodedata.normalize("NFD", prose)
    assert cap_combining_runs(decomposed) == decomposed
