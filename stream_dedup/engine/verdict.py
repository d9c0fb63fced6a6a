"""The verdict published for every document."""

from typing import Literal, NamedTuple

VerdictKind = Literal["unique", "duplicate"]

#: Version of the published verdict records (``format_version`` in each).
#: 2 added the version itself and the match's source.
VERDICT_FORMAT = 2


class Verdict(NamedTuple):
    """Whether a document duplicates an earlier one.

    A named tuple rather than a dataclass: one is built per document, and a
    tuple is built several times faster.

    Attributes:
        id: the document's id.
        verdict: ``"duplicate"`` if an earlier indexed document reaches the
            threshold, else ``"unique"``.
        duplicate_of: id of the best match (highest similarity; among equals,
            the earliest), or ``None``.
        similarity: estimated Jaccard similarity to ``duplicate_of``, or ``None``.
        match_source: the source the match was indexed with (an opaque
            64-bit pointer to its record, see ``Detector.process``), or
            ``None``: ids may repeat, the source says which record matched.
        hamming_distance: bits (of 64) in which the SimHash fingerprints of
            the document and its match differ, for the ``simhash`` and
            ``combined`` methods; else ``None``.
    """

    id: str
    verdict: VerdictKind
    duplicate_of: str | None = None
    similarity: float | None = None
    match_source: int | None = None
    hamming_distance: int | None = None

    def to_dict(self) -> dict[str, object]:
        """The fields every published verdict has (callers add the sources in their own terms)."""
        return {
            "format_version": VERDICT_FORMAT,
            "id": self.id,
            "verdict": self.verdict,
            "duplicate_of": self.duplicate_of,
            "similarity": self.similarity,
            "hamming_distance": self.hamming_distance,
        }
