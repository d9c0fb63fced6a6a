"""One readable line per record ``watch`` reads, and a duplicate's text beside its match's.

A verdict line reads left to right as a sentence: what the verdict is, which
document, of which earlier one and how similar (for a containment verdict,
in or of which one and the containment), and where the document is in the
input topic::

    duplicate  ad-0217       of ad-0051       0.914  at 1:73
    unique     ad-0218                               at 2:74
    contained  ad-0300       in ad-0051       0.964  at 0:95
    contains   ad-0301       of ad-0052       0.987  at 1:96

Everything taken from a record goes through :func:`printable` first.
"""

from typing import NamedTuple

from stream_dedup.cli.terminal_text import Style, Tone, clip, display_width
from stream_dedup.cli.watched_records import Coordinates, DeadLetterRecord, OtherRecord, VerdictRecord, WatchedRecord
from stream_dedup.text.shared_passages import shared_passages
from stream_dedup.text.shown import printable

#: Columns an id gets before the next field (longer ones are cut, with ``…``).
ID_COLUMNS = 14
#: Longest id shown in full.
MAX_ID_COLUMNS = 60
#: Columns of a document's text shown under its verdict (``watch --texts``).
TEXT_COLUMNS = 1000
_VERDICT_COLUMNS = len("duplicate")
_SIMILARITY_COLUMNS = len("0.000")


class ShownText(NamedTuple):
    """A document as shown under a verdict: its id and its text, or why there is no text."""

    id: str
    text: str | None
    problem: str = ""


def record_line(record: WatchedRecord, style: Style) -> str:
    """The line of any record ``watch`` reads."""
    if isinstance(record, VerdictRecord):
        return verdict_line(record, style)
    if isinstance(record, DeadLetterRecord):
        return dead_letter_line(record, style)
    return other_line(record, style)


def verdict_line(verdict: VerdictRecord, style: Style) -> str:
    """The verdict as a sentence; a containment verdict shows its containment where a duplicate shows similarity."""
    tone: Tone = "unique" if verdict.verdict == "unique" else "duplicate"
    parts = [style.paint(_padded(verdict.verdict, _VERDICT_COLUMNS), tone), _padded(_id(verdict.id), ID_COLUMNS)]
    if verdict.duplicate_of is not None:
        connector = "in " if verdict.verdict == "contained" else "of "
        match = connector + style.paint(_padded(_id(verdict.duplicate_of), ID_COLUMNS), "strong")
        score = verdict.similarity if verdict.verdict == "duplicate" else verdict.containment
        parts += [match, _padded("?" if score is None else f"{score:.3f}", _SIMILARITY_COLUMNS)]
    else:
        parts += [" " * (len("of ") + ID_COLUMNS), " " * _SIMILARITY_COLUMNS]
    parts.append(style.paint(f"at {_place(verdict.source)}", "faint"))
    return "  ".join(parts)


def dead_letter_line(letter: DeadLetterRecord, style: Style) -> str:
    reason = style.paint(printable(letter.reason), "dead_letter")
    return f"{style.paint('dead letter', 'dead_letter')}  {reason}: {printable(letter.error)}  " + style.paint(
        f"from {_place(letter.source)}", "faint"
    )


def other_line(record: OtherRecord, style: Style) -> str:
    """A record that is not a verdict: its value as it is (escaped), or ``(tombstone)``."""
    where = style.paint(f"{printable(record.where.topic)} {record.where.partition}:{record.where.offset}", "faint")
    if record.value is None:
        return f"{where}  (tombstone: no value)"
    return f"{where}  {printable(record.value.decode('utf-8', 'replace'))}"


def texts_lines(document: ShownText, match: ShownText, style: Style, columns: int = TEXT_COLUMNS) -> list[str]:
    """Two indented lines, the document's text and its match's, their shared passages highlighted.

    Texts longer than ``columns`` are cut; when both begin alike for more than
    two thirds of that, both are shown from a little before where they first
    differ, so that the difference is in view. Passages are found in what is
    shown, so every highlighted passage is visible, and occurs in both.
    """
    shown: list[str | None] = [part.text for part in (document, match)]
    if shown[0] is not None and shown[1] is not None:
        start = _start_near_difference(shown[0], shown[1], columns)
        shown = [clip(("…" if start else "") + text[start:], columns) for text in (shown[0], shown[1])]
    highlighted = [printable(clip(text, columns)) if text is not None else None for text in shown]
    if shown[0] is not None and shown[1] is not None:
        passages = shared_passages(shown[0], shown[1])
        highlighted[0] = _highlight(shown[0], [(p.a_start, p.a_end) for p in passages], style)
        highlighted[1] = _highlight(shown[1], [(p.b_start, p.b_end) for p in passages], style)
    width = max(display_width(_id(part.id)) for part in (document, match))
    return [
        f"    {label}  {_padded(_id(part.id), width)}  "
        + (text if text is not None else style.paint(f"({printable(part.problem)})", "faint"))
        for label, part, text in zip(("document", "match   "), (document, match), highlighted, strict=True)
    ]


def _start_near_difference(a: str, b: str, columns: int) -> int:
    """Where both texts are shown from: 0, or the word start about two thirds of ``columns`` before they differ."""
    differ = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))
    if len(a) == len(b) == differ or differ <= 2 * columns // 3:
        return 0
    start = differ - 2 * columns // 3
    space = a.find(" ", start, differ)
    return space + 1 if space >= 0 else start


def _highlight(text: str, spans: list[tuple[int, int]], style: Style) -> str:
    pieces, last = [], 0
    for start, end in sorted(spans):
        pieces += [printable(text[last:start]), style.paint(printable(text[start:end]), "shared")]
        last = end
    pieces.append(printable(text[last:]))
    return "".join(pieces)


def _id(doc_id: str) -> str:
    return printable(clip(doc_id, MAX_ID_COLUMNS))


def _padded(text: str, columns: int) -> str:
    return text + " " * max(0, columns - display_width(text))


def _place(where: Coordinates | None) -> str:
    """``partition:offset`` in the input topic (the topic is the same for every verdict of a stage)."""
    return "?" if where is None else f"{where.partition}:{where.offset}"
