"""The verdict published for every document."""

from typing import Literal, NamedTuple

VerdictKind = Literal["unique", "duplicate"]


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
    """

    id: str
    verdict: VerdictKind
    duplicate_of: str | None = None
    similarity: float | None = None

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "verdict": self.verdict,
            "duplicate_of": self.duplicate_of,
            "similarity": self.similarity,
        }
