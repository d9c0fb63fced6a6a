"""Record contents shown to a person, at a terminal or in a page: nothing in them can take over the display.

Ids and texts come from records anyone may have produced. Shown as they
are, an escape character could recolour or clear a terminal, a lone
surrogate cannot be written out at all, and a right-to-left override would
reorder the rest of the line (in a page too: the ``watch`` command's
terminal, the offline report and the status page all show texts).
:func:`printable` shows those characters as escapes instead; everything
else, right-to-left scripts included, is shown as it is.
"""

import re

#: C0 and C1 controls (escape, newline, DEL...), lone surrogates, and the bidi
#: embeddings, overrides and isolates that reorder what follows them.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    r"""``text`` with controls, lone surrogates and bidi overrides shown as escapes.

    >>> printable("ad-1\x1b[2J\u202egnp.exe")
    'ad-1\\x1b[2J\\u202egnp.exe'
    """
    return _UNPRINTABLE.sub(_escape, text)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
