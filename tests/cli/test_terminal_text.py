"""Colour only where wanted; record contents that cannot take over the terminal; widths in columns."""

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_dedup.cli.terminal_text import Style, clip, display_width, wants_colour
from stream_dedup.text.shown import printable


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    "choice, terminal, environ, expected",
    [
        ("auto", True, {}, True),
        ("auto", False, {}, False),
        ("auto", True, {"NO_COLOR": "1"}, False),
        ("auto", True, {"NO_COLOR": ""}, True),  # set but empty: no-color.org says it does not count
        ("auto", True, {"TERM": "dumb"}, False),
        ("always", False, {"NO_COLOR": "1", "TERM": "dumb"}, True),
        ("never", True, {}, False),
    ],
)
def test_colour_follows_the_flag_the_terminal_no_color_and_term(
    choice: str, terminal: bool, environ: dict[str, str], expected: bool
) -> None:
    stream = _Terminal() if terminal else io.StringIO()
    assert wants_colour(choice, stream, environ) is expected  # type: ignore[arg-type]


def test_without_colour_only_shared_passages_are_marked() -> None:
    plain = Style(colour=False)
    assert plain.paint("duplicate", "duplicate") == "duplicate"
    assert plain.paint("near the park", "shared") == "«near the park»"
    assert Style(colour=True).paint("near the park", "shared") == "\x1b[7mnear the park\x1b[0m"
    assert Style(colour=True).paint("", "strong") == ""


def test_escape_sequences_surrogates_and_bidi_overrides_are_shown_escaped() -> None:
    assert printable("ad-1\x1b[2J") == "ad-1\\x1b[2J"
    assert printable("a\nb\tc\x7f\x9b") == "a\\x0ab\\x09c\\x7f\\x9b"
    assert printable("\ud800") == "\\ud800"
    assert printable("txt.\u202eexe\u2066") == "txt.\\u202eexe\\u2066"
    assert printable("שלום עולם – straße 東京 👍🏽") == "שלום עולם – straße 東京 👍🏽"


@given(st.text())
def test_printable_text_can_always_be_written_and_holds_no_control(text: str) -> None:
    shown = printable(text)
    shown.encode("utf-8")  # a lone surrogate would raise here, and in print()
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F or 0x202A <= ord(c) <= 0x202E for c in shown)


def test_wide_and_combining_characters_are_measured_in_columns() -> None:
    assert display_width("東京") == 4
    assert display_width("e\u0301") == 1
    assert display_width("abc") == 3


@given(st.text(), st.integers(min_value=1, max_value=40))
def test_a_clipped_text_fits_and_keeps_its_beginning(text: str, columns: int) -> None:
    clipped = clip(text, columns)
    assert display_width(clipped) <= columns
    if clipped != text:
        assert clipped.endswith("…") and text.startswith(clipped[:-1])
    else:
        assert display_width(text) <= columns
