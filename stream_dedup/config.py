"""Detection settings: one frozen object, validated once when it is built.

Every error names the setting (as the CLI flag / ``STREAM_DEDUP_*`` variable
spells it, minus the prefix) and says what is allowed.
"""

import json
from dataclasses import asdict, dataclass
from typing import Literal

import xxhash

from stream_dedup.errors import ConfigError
from stream_dedup.lsh.params import BandParameters, choose_bands
from stream_dedup.lsh.retention import Retention
from stream_dedup.sketch.minhash import MinHasher, Scheme
from stream_dedup.text.shingles import ShingleUnit, Shingling

#: Version of the hashing and signature format. Bump it whenever a change makes
#: signatures of the same text differ: snapshots of another version are refused.
#: 2: one-bit verification sketches and band keys from full MinHash values.
SIGNATURE_FORMAT = 2

Verification = Literal["estimate", "exact"]


@dataclass(frozen=True)
class DetectionConfig:
    """Everything that decides which documents are duplicates of which.

    Attributes:
        threshold: a document is a duplicate if an earlier one has estimated
            Jaccard similarity at least this (0 < t < 1; default 0.8).
        num_perm: length of the MinHash signature the LSH bands are cut from
            (default 128); it is never stored.
        sketch_bits: bits of the one-bit verification sketch the index keeps
            per document (default 1,024 = 128 bytes; a multiple of 64 and of
            ``num_perm``, at most 4,096). Its Jaccard estimate has a standard
            error of ``sqrt((1 - J**2) / sketch_bits)``: 0.019 at ``J = 0.8``.
        scheme: ``"oph"`` (default, one-permutation hashing) or ``"classic"``.
        seed: hash seed; signatures are comparable only under equal seeds.
        shingle_unit: ``"char"`` (default) or ``"word"``.
        shingle_size: characters or words per shingle (default 5).
        strip_punctuation: delete punctuation before shingling (default off).
        bands, rows_per_band: the LSH banding; both or neither. By default
            chosen from ``threshold`` and ``num_perm`` for ``min_recall``.
        min_recall: candidate probability required at the threshold.
        verification: ``"estimate"`` (default): candidates are verified by
            the Jaccard estimate of the one-bit sketches; ``"exact"``: by exact
            Jaccard of the documents' shingle sets, which the index then keeps
            (4 bytes per distinct shingle, ~4 KB for a 1 KB document).
        max_bucket_size: hot-bucket cap (documents per band key).
        max_documents, max_age_seconds: retention (see :class:`Retention`).
    """

    threshold: float = 0.8
    num_perm: int = 128
    sketch_bits: int = 1024
    scheme: Scheme = "oph"
    seed: int = 1
    shingle_unit: ShingleUnit = "char"
    shingle_size: int = 5
    strip_punctuation: bool = False
    bands: int | None = None
    rows_per_band: int | None = None
    min_recall: float = 0.99
    verification: Verification = "estimate"
    max_bucket_size: int = 64
    max_documents: int | None = None
    max_age_seconds: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.threshold, int | float) or not 0.0 < self.threshold < 1.0:
            raise ConfigError("threshold", f"must be strictly between 0 and 1, got {self.threshold!r}")
        MinHasher(num_perm=self.num_perm)  # validates num_perm
        if (
            not isinstance(self.sketch_bits, int)
            or not 64 <= self.sketch_bits <= 4096
            or self.sketch_bits % 64
            or self.sketch_bits % self.num_perm
        ):
            raise ConfigError(
                "sketch_bits",
                f"must be a multiple of 64 and of num_perm={self.num_perm}, from 64 to 4096, got {self.sketch_bits!r}",
            )
        self.hasher()  # validates scheme, seed and the shingling
        if self.verification not in ("estimate", "exact"):
            raise ConfigError("verification", f"must be 'estimate' or 'exact', got {self.verification!r}")
        if (self.bands is None) != (self.rows_per_band is None):
            raise ConfigError("bands", "set both bands and rows_per_band, or neither (then they are chosen)")
        banding = self.banding()
        if banding.bands * banding.rows_per_band > self.num_perm:
            raise ConfigError(
                "bands",
                f"bands x rows_per_band = {banding.bands * banding.rows_per_band} exceeds num_perm={self.num_perm}",
            )
        self.retention()

    def hasher(self) -> MinHasher:
        """The signature maker these settings describe, with ``sketch_bits`` slots.

        Its signatures give the verification sketch; the banding signature of
        ``num_perm`` slots is derived from the same sketches (``sketch.bit_sketch.coarsen``).
        """
        shingling = Shingling(self.shingle_unit, self.shingle_size, self.strip_punctuation)
        return MinHasher(num_perm=self.sketch_bits, scheme=self.scheme, seed=self.seed, shingling=shingling)

    def banding(self) -> BandParameters:
        """The LSH banding: explicit, or chosen for ``min_recall`` at ``threshold``."""
        if self.bands is not None and self.rows_per_band is not None:
            return BandParameters(self.bands, self.rows_per_band)
        return choose_bands(self.threshold, self.num_perm, self.min_recall)

    def retention(self) -> Retention:
        return Retention(self.max_documents, self.max_age_seconds)

    def signature_parameters(self) -> dict[str, object]:
        """The parameters two indexes must share for their signatures to be comparable."""
        banding = self.banding()
        return {
            "signature_format": SIGNATURE_FORMAT,
            "num_perm": self.num_perm,
            "sketch_bits": self.sketch_bits,
            "scheme": self.scheme,
            "seed": self.seed,
            "shingle_unit": self.shingle_unit,
            "shingle_size": self.shingle_size,
            "strip_punctuation": self.strip_punctuation,
            "bands": banding.bands,
            "rows_per_band": banding.rows_per_band,
            # An exact-verification index holds shingle sets the other kind lacks.
            "verification": self.verification,
        }

    def fingerprint(self) -> str:
        """Short stable hash of every parameter that decides verdicts (16 hex digits).

        Verdicts carry it (``params_fingerprint``), so that verdicts made under
        different settings can be told apart.
        """
        return _fingerprint({**asdict(self), **self.signature_parameters()})

    def signature_fingerprint(self) -> str:
        """Short stable hash of :meth:`signature_parameters` only (16 hex digits).

        Two indexes can share signatures exactly when these agree, whatever
        their thresholds or retention: the changelog records it, and refuses
        to be replayed under another.
        """
        return _fingerprint(self.signature_parameters())


def _fingerprint(parameters: dict[str, object]) -> str:
    return xxhash.xxh3_64_hexdigest(json.dumps(parameters, sort_keys=True).encode("utf-8"))
