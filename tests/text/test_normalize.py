import importlib
import sys
import tracemalloc

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from stream_dedup.errors import InputError
from stream_dedup.text import Folding, fold, normalize, normalize_all

#: The module (``stream_dedup.text.normalize`` is also the function's name in the package).
normalize_module = importlib.import_module("stream_dedup.text.normalize")


def test_compatibility_forms_case_and_whitespace_are_folded() -> None:
    assert normalize("  ＦＵＬＬ-width\tStraße \n\n ﬁne  ") == "full-width strasse fine"


def test_punctuation_is_stripped_only_when_asked() -> None:
    assert normalize("Hello, world! «quoted»") == "hello, world! «quoted»"
    assert normalize("Hello, world! «quoted»", Folding(strip_punctuation=True)) == "hello world quoted"


def test_text_empty_after_normalisation_is_bad_input_naming_its_position() -> None:
    with pytest.raises(InputError, match="position 1"):
        normalize_all(["fine", " \t\n "])
    with pytest.raises(InputError):
        normalize_all(["...!"], Folding(strip_punctuation=True))


#: Invisible characters from several blocks of Unicode's Default_Ignorable_Code_Point list.
INVISIBLE = [
    "\u00ad",  # soft hyphen
    "\u034f",  # combining grapheme joiner
    "\u061c",  # Arabic letter mark
    "\u180e",  # Mongolian vowel separator
    "\u200b",  # zero-width space
    "\u200c",  # zero-width non-joiner
    "\u200d",  # zero-width joiner
    "\u200e",  # left-to-right mark
    "\u202e",  # right-to-left override
    "\u2060",  # word joiner
    "\u2066",  # left-to-right isolate
    "\u3164",  # Hangul filler
    "\ufe0f",  # variation selector 16
    "\ufeff",  # byte order mark
    "\uffa0",  # halfwidth Hangul filler
    "\U0001bca0",  # shorthand format letter overlap
    "\U0001d173",  # musical symbol begin beam
    "\U000e0001",  # language tag
    "\U000e0041",  # tag latin capital letter A ("ASCII smuggling")
    "\U000e0100",  # variation selector 17
]
#: Look alike, but are seen (or are whitespace): kept.
VISIBLE = ["\u00a0", "\u2009", "\u3000", "\u0301", "\u05d0", "\u0e01", "\U0001f600", "\u2028", "-", "\u00ac"]


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60), st.lists(st.tuples(st.integers(0, 60), st.sampled_from(INVISIBLE)), max_size=20))
def test_invisible_characters_anywhere_change_nothing(text: str, inserted: list[tuple[int, str]]) -> None:
    hidden = text
    for at, character in inserted:
        hidden = hidden[:at] + character + hidden[at:]
    original = normalize("".join(c for c in text if c not in INVISIBLE))
    assert normalize(hidden) == original
    assert normalize(hidden, Folding(strip_punctuation=True)) == normalize(original, Folding(strip_punctuation=True))


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        st.characters(blacklist_categories=("Cf", "Cs"), max_codepoint=0xDFFFF)  # U+E0000 on: tags, selectors
        | st.sampled_from(VISIBLE),
        max_size=80,
    )
)
def test_without_invisible_characters_the_setting_changes_nothing(text: str) -> None:
    # Outside category Cf and past U+E0000, the default-ignorable code points are a few fillers and selectors.
    fillers = "\u034f\u115f\u1160\u17b4\u17b5\u180b\u180c\u180d\u180f\u3164\uffa0"
    assume(not any(c in fillers or "\ufe00" <= c <= "\ufe0f" or "\ufff0" <= c <= "\ufff8" for c in text))
    assert normalize(text) == normalize(text, Folding(ignore_invisible=False))


def test_a_mark_behind_an_invisible_character_composes_with_its_letter() -> None:
    assert normalize("cafe\u034f\u0301") == normalize("café") == "café"


def test_with_the_setting_off_invisible_characters_are_kept_as_before() -> None:
    assert normalize("fr\u200bee", Folding(ignore_invisible=False)) == "fr\u200bee"
    with pytest.raises(InputError):
        normalize_all(["\u200b\u200d \ufeff"])
    assert normalize_all(["\u200b\u200d \ufeff"], Folding(ignore_invisible=False)) == ["\u200b\u200d \ufeff"]


#: Every character ``str.split()`` splits on (the whole of Unicode's whitespace).
WHITESPACE = "".join(c for c in map(chr, range(sys.maxunicode + 1)) if c.isspace())


def test_the_space_is_the_only_printable_whitespace() -> None:
    # What lets a non-ASCII text with no unprintable character skip the split.
    assert [c for c in WHITESPACE if c.isprintable()] == [" "]


@settings(max_examples=500, deadline=None)
@given(
    st.one_of(
        st.text(),
        st.text(alphabet=st.sampled_from(f"ab {WHITESPACE}")),
        st.text(alphabet=st.sampled_from(f"ab é{WHITESPACE}")),
        st.lists(st.sampled_from(["word", " ", "mot", "слово", *WHITESPACE]), max_size=12).map("".join),
    ),
    st.sampled_from([Folding(), Folding(strip_punctuation=True), Folding(ignore_invisible=False)]),
)
def test_whitespace_runs_collapse_as_split_and_join_collapse_them(text: str, folding: Folding) -> None:
    assert normalize(text, folding) == " ".join(fold(text, folding).split())


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(["word", "x", " ", "  ", "слово", "中文", *WHITESPACE]), max_size=40).map("".join),
    st.integers(1, 12),
)
def test_a_long_text_collapses_piece_by_piece_as_split_and_join_collapse_it_whole(text: str, piece: int) -> None:
    # Pieces of a few characters here, of a million in use: cut anywhere, no word may be cut or joined.
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(normalize_module, "_COLLAPSE_PIECE", piece)
        assert normalize(text) == " ".join(fold(text).split())


def test_collapsing_a_long_text_with_line_breaks_holds_no_object_per_word() -> None:
    # Split whole, 30 MB of text with line breaks took 358 MB more (a string object per word).
    # Pieces of 64k characters, so that one piece's words weigh little beside the 4 MB text.
    text = "\n".join(f"line {i} of a long document, with words" for i in range(100_000))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(normalize_module, "_COLLAPSE_PIECE", 1 << 16)
        tracemalloc.start()
        try:
            collapsed = normalize(text)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert collapsed == " ".join(text.split())
    assert peak < 4 * len(text)
