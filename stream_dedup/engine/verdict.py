"""The verdict published for every document."""

from dataclasses import dataclass
from typing import Literal

VerdictKind = Literal["unique", "duplicate"]


@dataclass(frozen=True)
class Verdict:
    """Whether a document duplicates an earlier one.

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
