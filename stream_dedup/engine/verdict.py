"""The verdict published for every document."""

from typing import Literal, NamedTuple

VerdictKind = Literal["unique", "duplicate", "contained", "contains"]

#: Version of the published verdict records (``format_version`` in each).
#: 2 added the version itself and the match's source.
VERDICT_FORMAT = 2
#: Version of the records of ``contained`` and ``contains`` verdicts (only
#: made with ``containment_threshold`` set): format 2 plus those two values of
#: ``verdict`` and the ``containment`` field. A reader that knows format 2
#: takes any verdict that is not ``duplicate`` for unique; the version tells
#: it that these are neither. Every other record stays format 2, byte for byte.
CONTAINMENT_VERDICT_FORMAT = 3


class Verdict(NamedTuple):
    """Whether a document duplicates an earlier one, or contains or is contained in one.

    A named tuple rather than a dataclass: one is built per document, and a
    tuple is built several times faster.

    Attributes:
        id: the document's id.
        verdict: ``"duplicate"`` if an earlier indexed document reaches the
            threshold; else, with containment on, ``"contained"`` if an
            earlier document holds at least ``containment_threshold`` of its
            shingles, ``"contains"`` if it holds at least that share of an
            earlier document's; else ``"unique"``.
        duplicate_of: id of the best match (highest similarity, or for the
            containment verdicts the highest containment; among equals, the
            earliest), or ``None``.
        similarity: estimated Jaccard similarity to ``duplicate_of``, or ``None``.
        match_source: the source the match was indexed with (an opaque
            64-bit pointer to its record, see ``Detector.process``), or
            ``None``: ids may repeat, the source says which record matched.
        hamming_distance: bits (of 64) in which the SimHash fingerprints of
            the document and its match differ, for the ``simhash`` and
            ``combined`` methods; else ``None``.
        containment: for ``contained``, the estimated share of the
            document's shingles the match holds; for ``contains``, the share
            of the match's shingles the document holds; else ``None``.
    """

    id: str
    verdict: VerdictKind
    duplicate_of: str | None = None
    similarity: float | None = None
    match_source: int | None = None
    hamming_distance: int | None = None
    containment: float | None = None

    @property
    def format_version(self) -> int:
        """The record format this verdict needs: 3 for a containment verdict, else 2."""
        return VERDICT_FORMAT if self.containment is None else CONTAINMENT_VERDICT_FORMAT

    def to_dict(self) -> dict[str, object]:
        """The fields every published verdict has (callers add the sources in their own terms)."""
        fields: dict[str, object] = {
            "format_version": self.format_version,
            "id": self.id,
            "verdict": self.verdict,
            "duplicate_of": self.duplicate_of,
            "similarity": self.similarity,
            "hamming_distance": self.hamming_distance,
        }
        if self.containment is not None:
            fields["containment"] = self.containment
        return fields
