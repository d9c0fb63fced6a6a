"""Letters of other scripts that look like a Latin letter, and the letter they look like.

A spammer who writes "free" with a Cyrillic e (U+0435) gets a copy whose
shingles around that letter are new: with ``fold_lookalikes`` on, such
letters are folded to the Latin letter before shingling, so that the copy
shingles as the original. The table is Unicode's confusables (UTS #39,
``confusables.txt``, as bundled by the ``confusable-homoglyphs`` 3.3.1
package), narrowed to what folding can do safely after NFKC and casefolding:

- a single code point that is a letter of a script other than Latin, left
  unchanged by NFKC and by casefolding (so it is what :func:`~stream_dedup.text.normalize.fold` sees),
  confusable with one ASCII lower-case letter;
- at most one letter per script and target: where a script has several
  (Cyrillic U+0456, U+04CF and U+A647 all look like ``i``), the lowest code
  point is kept. So folding is one-to-one on the text of any one script, and
  two documents written in that script alone keep exactly the Jaccard
  similarity they had: only texts that mix scripts, the disguise, change.

Upper-case letters that look Latin only in upper case (Cyrillic ve, en
and em, U+0412, U+041D, U+041C) are left alone: their lower case does not,
and folding them before casefolding would split a word's upper- and
lower-case spellings.
"""

#: (scripts, letters, the Latin letter each looks like, at the same position).
_TABLE = (
    ("Greek", "\u03b1\u03b3\u03b9\u03bd\u03bf\u03c1\u03c5\u03f3", "ayivopuj"),
    (
        "Cyrillic",
        "\u0430\u0433\u0435\u043e\u0440\u0441\u0443\u0445\u0455\u0456\u0458\u0461\u0475\u04bb\u0501\u051b",
        "areopcyxsijwvhdq",
    ),
    ("Armenian", "\u0561\u0563\u0570\u0578\u057d\u0581\u0584\u0585", "wqhnugfo"),
    ("Malayalam, Myanmar, Georgian", "\u0d20\u101d\u10e7\u10ff", "ooyo"),
    ("Cherokee, Canadian syllabics, Runic", "\u13a5\u13c2\u13cf\u13e7\u146f\u1472\u1541\u16c1", "ihbddbxl"),
    ("Greek small capital, Coptic, Tifinagh, Lisu", "\u1d26\u2c85\u2c9f\u2ca3\u2ca5\u2d4f\ua4d2\ua4f2", "rropcldl"),
    (
        "Lycian, Old Italic, Deseret, Osage",
        "\U0001028a\U00010309\U0001042c\U0001043d\U00010448\U000104ea\U000104f6",
        "llocsou",
    ),
    (
        "Ahom, Warang Citi, Miao",
        "\U00011706\U0001170a\U000118c0\U000118c1\U000118c3\U000118c4\U000118c8\U000118d8\U000118dc\U00016f28",
        "vwvsizouyl",
    ),
)

#: For :meth:`str.translate`.
LOOKALIKES: dict[int, str] = {
    ord(letter): latin for _, letters, latins in _TABLE for letter, latin in zip(letters, latins, strict=True)
}
