"""Text for a person at a terminal: colour only where wanted, widths in columns, clipping.

What record contents may hold that would take over the screen is shown as
escapes by :func:`stream_dedup.text.shown.printable`.
"""

import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TextIO

ColorChoice = Literal["auto", "always", "never"]
Tone = Literal["duplicate", "unique", "dead_letter", "strong", "faint", "shared"]

#: Select Graphic Rendition codes of each tone.
_SGR: dict[Tone, str] = {
    "duplicate": "1;33",
    "unique": "32",
    "dead_letter": "1;31",
    "strong": "1",
    "faint": "2",
    "shared": "7",
}
#: Without colour, a shared passage is marked by these instead of reverse video.
SHARED_MARKS = ("«", "»")
ELLIPSIS = "…"


def wants_colour(choice: ColorChoice, stream: TextIO, environ: Mapping[str, str]) -> bool:
    """Colour for ``always``; for ``auto`` only on a terminal, unless ``NO_COLOR`` is set or ``TERM=dumb``.

    ``NO_COLOR`` counts when set and not empty (https://no-color.org); an
    explicit ``--color always`` wins over it, as the convention asks.
    """
    if choice != "auto":
        return choice == "always"
    if environ.get("NO_COLOR") or environ.get("TERM") == "dumb":
        return False
    return stream.isatty()


@dataclass(frozen=True)
class Style:
    """How text is emphasised: ANSI colours with ``colour``, else plain (shared passages marked «like this»)."""

    colour: bool

    def paint(self, text: str, tone: Tone) -> str:
        if not text:
            return text
        if self.colour:
            return f"\x1b[{_SGR[tone]}m{text}\x1b[0m"
        if tone == "shared":
            return f"{SHARED_MARKS[0]}{text}{SHARED_MARKS[1]}"
        return text


def display_width(text: str) -> int:
    """Columns ``text`` takes on a terminal: 2 for wide East Asian characters, 0 for combining marks."""
    return sum(_width(char) for char in text)


def _width(char: str) -> int:
    if unicodedata.combining(char) or unicodedata.category(char) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def clip(text: str, columns: int) -> str:
    """``text`` cut to at most ``columns`` columns, ending in ``…`` when cut.

    >>> clip("one-bedroom flat in Pigneto", 12)
    'one-bedroom…'
    """
    if display_width(text) <= columns:
        return text
    used, kept = 0, []
    for char in text:
        used += _width(char)
        if used > columns - 1:
            break
        kept.append(char)
    return "".join(kept) + ELLIPSIS


def counted(number: int, noun: str) -> str:
    """``"1 duplicate"``, ``"2 duplicates"``: a count of a regular English noun."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"
