"""Detection settings: one frozen object, validated once when it is built.

Every error names the setting (as the CLI flag / ``STREAM_DEDUP_*`` variable
spells it, minus the prefix) and says what is allowed.
"""

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Literal

import xxhash

from stream_dedup.bounds import check_whole_number
from stream_dedup.errors import ConfigError
from stream_dedup.lsh.ensemble_params import (
    PARTITIONS_PER_DOUBLING,
    EnsembleParameters,
    check_containment_settings,
    choose_ensemble,
)
from stream_dedup.lsh.hamming_params import MAX_DISTANCE, HammingLayout, choose_layout
from stream_dedup.lsh.params import BandParameters, choose_bands
from stream_dedup.lsh.retention import Retention
from stream_dedup.sketch.minhash import MinHasher, Scheme
from stream_dedup.sketch.simhash import SimHasher, Weighting
from stream_dedup.text.shingles import ShingleUnit, Shingling

#: Version of the hashing and signature format. Bump it whenever a change makes
#: signatures of the same text differ: snapshots of another version are refused.
#: 2: one-bit verification sketches and band keys from full MinHash values.
SIGNATURE_FORMAT = 2

#: Where words break for word shingles (:mod:`stream_dedup.text.word_breaks`); "spaces" before it existed,
#: "spaces and scripts without spaces" before the Tai scripts, Tangut, Nushu and the extensions of
#: Myanmar, Bopomofo and kana were among them.
WORD_BREAKS = "spaces and scripts without spaces 3"

Verification = Literal["estimate", "exact"]
Method = Literal["minhash", "simhash", "combined"]

#: Settings only MinHash banding reads, and those only SimHash reads: a
#: parameter a method does not read is left out of its fingerprints, so that
#: changing it changes no verdict's ``params_fingerprint`` (and the fingerprints
#: of MinHash indexes stayed what they were before SimHash existed).
MINHASH_ONLY = (
    "threshold",
    "num_perm",
    "sketch_bits",
    "scheme",
    "bands",
    "rows_per_band",
    "min_recall",
)
SIMHASH_ONLY = ("max_hamming", "simhash_weighting")
#: Most slots the hot-bucket cap can be split into: a slot is read from the high 16 bits of a content key.
MAX_INDEX_SLOTS = 1 << 16
#: Largest hot-bucket cap: a probe reads up to this many candidates per key and generation.
MAX_BUCKET_SIZE = 1_000_000
#: Settings only the containment search reads: left out of both fingerprints while it is off, so
#: that an index without containment keeps the fingerprints it had before containment existed.
CONTAINMENT_ONLY = (
    "containment_threshold",
    "containment_max_ratio",
    "containment_min_recall",
    "containment_bands",
    "containment_rows_per_band",
)
#: Settings of fractional values, held as floats whichever kind of number they were given as.
_FRACTIONAL_SETTINGS = (
    "threshold",
    "min_recall",
    "max_age_seconds",
    "containment_threshold",
    "containment_max_ratio",
    "containment_min_recall",
)
#: Bytes per document the Hamming index's tables may take when ``max_hamming`` allows (see ``hamming_layout``).
_TABLE_BYTES = 32
#: Signature parameters an index made before they existed does not name, with the value it had.
IMPLIED_SIGNATURE_PARAMETERS: dict[str, object] = {
    "method": "minhash",
    "ignore_invisible": False,
    "fold_lookalikes": False,
    "word_breaks": "spaces",
}
#: Signature parameters that, when they differ, make every other differ too: named first when they do.
LEADING_SIGNATURE_PARAMETERS = ("method", "containment_partitions_per_doubling")
#: Every name :meth:`DetectionConfig.signature_parameters` can hold (a test keeps the two in step).
SIGNATURE_PARAMETER_NAMES = (
    "signature_format",
    "seed",
    "shingle_unit",
    "shingle_size",
    "word_breaks",
    "strip_punctuation",
    "ignore_invisible",
    "fold_lookalikes",
    "method",
    "containment_partitions_per_doubling",
    "num_perm",
    "sketch_bits",
    "scheme",
    "bands",
    "rows_per_band",
    "verification",
    "simhash_weighting",
)
#: Index size the Hamming table layout is chosen for when retention sets no ``max_documents``.
EXPECTED_DOCUMENTS = 1_000_000


@dataclass(frozen=True)
class DetectionConfig:
    """Everything that decides which documents are duplicates of which.

    Attributes:
        method: ``"minhash"`` (default): banded MinHash LSH, Jaccard
            similarity at least ``threshold``; ``"simhash"``: 64-bit SimHash
            fingerprints in an exact Hamming index, duplicate within
            ``max_hamming`` bits (8 bytes per document, for very large
            indexes); ``"combined"``: MinHash candidates that pass the
            threshold *and* lie within ``max_hamming`` bits (Henzinger's
            combination: fewer false positives, 8 bytes more per document).
        threshold: a document is a duplicate if an earlier one has estimated
            Jaccard similarity at least this (0 < t < 1; default 0.8).
            Not read by ``simhash``.
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
        ignore_invisible: delete invisible characters (Unicode's
            default-ignorable code points: zero-width spaces and joiners, soft
            hyphens, bidirectional controls, variation selectors, tags) before
            shingling (default on): unseen by readers, they would otherwise
            make a copy look new. Indexes made before the setting existed kept
            them; run those with it off.
        fold_lookalikes: fold letters of other scripts that look like a
            Latin letter (the Cyrillic letters a, e, o, p, c, the Greek
            omicron and nu...) to it before shingling (default off): a copy
            disguised by such letters then shingles as the original. One
            letter per script and target, so text of one script alone keeps
            its similarities exactly (:mod:`stream_dedup.text.lookalikes`).
        bands, rows_per_band: the LSH banding; both or neither. By default
            chosen from ``threshold`` and ``num_perm`` for ``min_recall``.
        min_recall: candidate probability required at the threshold.
        verification: ``"estimate"`` (default): candidates are verified by
            the Jaccard estimate of the one-bit sketches; ``"exact"``: by exact
            Jaccard of the documents' shingle sets, which the index then keeps
            (4 bytes per distinct shingle, ~4 KB for a 1 KB document).
        max_bucket_size: hot-bucket cap (documents a band keeps per key and
            generation, the newest; the content key keeps the earliest; for
            ``simhash``, stored near matches per generation past which a
            document is kept but not entered in the Hamming tables).
        index_slots: the hot-bucket cap is counted per slot, a hash of the
            document's content (for ``simhash``, of its fingerprint; default
            1: over all documents): each of
            ``index_slots`` slots admits ``ceil(max_bucket_size /
            index_slots)`` documents per key and generation. What lets an
            index sharded over N shards (N dividing it) count its caps
            exactly as one index does (``docs/scale-out.md``).
        max_hamming: ``simhash`` and ``combined``: largest Hamming distance
            (bits of 64) of a duplicate's fingerprint (default 3, at most 16).
        simhash_weighting: ``"set"`` (default: each distinct shingle counts
            once, the representation MinHash sees, robust to a repeated
            banner) or ``"frequency"`` (each occurrence counts, as in Manku et
            al.).
        max_documents, max_age_seconds: retention (see :class:`Retention`).
        containment_threshold: off (``None``, default), or the containment
            (Broder: ``|A ∩ B| / |A|``) at which a document that is not a
            near-duplicate gets verdict ``contained`` (an earlier document
            holds at least this share of its shingles) or ``contains`` (it
            holds at least this share of an earlier document's); 0 < c < 1.
            Methods ``minhash`` and ``combined``.
        containment_max_ratio: pairs whose shingle-set sizes differ by a
            larger factor are not judged for containment (default 2, from 1
            to 64): both the bands needed and the estimate's error grow with
            the ratio (see ``lsh.ensemble_params``).
        containment_min_recall: candidate probability required for a
            containment pair at the threshold, sizes ``containment_max_ratio``
            apart, when the containment banding is chosen (default 0.9).
        containment_bands, containment_rows_per_band: with containment on,
            the index's banding, which near-duplicates are found through too
            (``bands`` and ``rows_per_band`` do not apply then); both or
            neither. By default the steepest reaching ``containment_min_recall``
            at the hardest containment pair and ``min_recall`` at ``threshold``.
    """

    method: Method = "minhash"
    threshold: float = 0.8
    num_perm: int = 128
    sketch_bits: int = 1024
    scheme: Scheme = "oph"
    seed: int = 1
    shingle_unit: ShingleUnit = "char"
    shingle_size: int = 5
    strip_punctuation: bool = False
    ignore_invisible: bool = True
    fold_lookalikes: bool = False
    bands: int | None = None
    rows_per_band: int | None = None
    min_recall: float = 0.99
    verification: Verification = "estimate"
    max_bucket_size: int = 64
    index_slots: int = 1
    max_hamming: int = 3
    simhash_weighting: Weighting = "set"
    max_documents: int | None = None
    max_age_seconds: float | None = None
    containment_threshold: float | None = None
    containment_max_ratio: float = 2.0
    containment_min_recall: float = 0.9
    containment_bands: int | None = None
    containment_rows_per_band: int | None = None

    def __post_init__(self) -> None:
        for name in _FRACTIONAL_SETTINGS:
            # As the stage reads them (a TOML integer, a variable's "3600": 3600.0). The fingerprints hash the
            # values' JSON, where 3600 and 3600.0 differ: equal settings gave verdicts other params_fingerprints.
            if type(getattr(self, name)) is int:
                object.__setattr__(self, name, float(getattr(self, name)))
        if self.method not in ("minhash", "simhash", "combined"):
            raise ConfigError("method", f"must be 'minhash', 'simhash' or 'combined', got {self.method!r}")
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
        if self.verification == "exact" and self.method == "simhash":
            raise ConfigError(
                "verification", "exact verification checks Jaccard similarity: use it with method minhash or combined"
            )
        check_whole_number("max_hamming", self.max_hamming, 0, MAX_DISTANCE)
        check_whole_number("index_slots", self.index_slots, 1, MAX_INDEX_SLOTS)
        # Checked here, for every method: the Hamming index would take a cap of 0 as "enter nothing", and the
        # banded index refuses it only when built, after the stage has created its topics.
        check_whole_number(
            "max_bucket_size", self.max_bucket_size, 1, MAX_BUCKET_SIZE, "a probe reads up to that many per key"
        )
        if self.simhash_weighting not in ("set", "frequency"):
            raise ConfigError("simhash_weighting", f"must be 'set' or 'frequency', got {self.simhash_weighting!r}")
        if (self.bands is None) != (self.rows_per_band is None):
            raise ConfigError("bands", "set both bands and rows_per_band, or neither (then they are chosen)")
        if self.bands is not None and self.containment_threshold is not None:
            raise ConfigError(
                "bands",
                "with containment_threshold set the index is banded for containment, and near-duplicates are "
                "found through the same bands: set containment_bands and containment_rows_per_band instead",
            )
        self._check_containment()
        try:
            self._check_banding()
        except ConfigError as error:
            if self.method != "simhash":
                raise
            # Its metrics, the changelog's sizing and params still read the banding: it must be one.
            raise ConfigError(
                error.setting,
                f"{error.message}; method simhash reads none of threshold, num_perm, bands, rows_per_band and "
                "min_recall: leave them at their defaults",
            ) from None
        self.retention()

    def _check_containment(self) -> None:
        """Validate the containment settings (their values even while containment is off)."""
        if (self.containment_bands is None) != (self.containment_rows_per_band is None):
            raise ConfigError(
                "containment_bands",
                "set both containment_bands and containment_rows_per_band, or neither (then they are chosen)",
            )
        check_containment_settings(self.containment_max_ratio, self.containment_min_recall)
        if self.containment_bands is not None and self.containment_rows_per_band is not None:
            _named_banding(self.containment_bands, self.containment_rows_per_band)
        containment = self.containment()
        if containment is None:
            return
        width = containment.banding.bands * containment.banding.rows_per_band
        if width > self.num_perm:
            raise ConfigError(
                "containment_bands",
                f"containment_bands x containment_rows_per_band = {width} exceeds num_perm={self.num_perm}",
            )
        if self.containment_threshold is not None and self.method == "simhash":
            raise ConfigError(
                "containment_threshold",
                "containment is estimated from MinHash sketches: use it with method minhash or combined",
            )

    def hasher(self) -> MinHasher:
        """The signature maker these settings describe, with ``sketch_bits`` slots.

        Its signatures give the verification sketch; the banding signature of
        ``num_perm`` slots is derived from the same sketches (``sketch.bit_sketch.coarsen``).
        """
        return MinHasher(num_perm=self.sketch_bits, scheme=self.scheme, seed=self.seed, shingling=self.shingling())

    def simhasher(self) -> SimHasher:
        """The SimHash fingerprint maker these settings describe (same shingling and seed as :meth:`hasher`)."""
        return SimHasher(self.shingling(), self.seed, self.simhash_weighting)

    def shingling(self) -> Shingling:
        """How these settings make a document's shingles, for every method."""
        return Shingling(
            self.shingle_unit, self.shingle_size, self.strip_punctuation, self.ignore_invisible, self.fold_lookalikes
        )

    @property
    def uses_minhash(self) -> bool:
        return self.method != "simhash"

    @property
    def uses_simhash(self) -> bool:
        return self.method != "minhash"

    @property
    def settles_with_texts(self) -> bool:
        """Whether verification asks for the texts of pairs too near the threshold (see engine.text_verification)."""
        return self.uses_minhash and self.verification == "estimate"

    def hamming_layout(self) -> HammingLayout:
        """The Hamming index's tables for ``max_hamming``, sized for ``max_documents`` (default a million).

        Up to ``max_hamming = 4`` the tables fit 32 bytes per document; beyond,
        they take what the fewest tables need (and queries probe many more
        fingerprints: ``params`` shows how many).
        """
        smallest = HammingLayout(self.max_hamming, (self.max_hamming + 1,))
        budget = max(_TABLE_BYTES, smallest.table_bytes)
        return choose_layout(self.max_hamming, self.max_documents or EXPECTED_DOCUMENTS, budget)

    def _check_banding(self) -> None:
        banding = self.banding()
        if banding.bands * banding.rows_per_band > self.num_perm:
            raise ConfigError(
                "bands",
                f"bands x rows_per_band = {banding.bands * banding.rows_per_band} exceeds num_perm={self.num_perm}",
            )

    def banding(self) -> BandParameters:
        """The LSH banding: explicit, or chosen for ``min_recall`` at ``threshold``; with containment on,
        the containment banding, which serves both searches (:meth:`containment`)."""
        containment = self.containment()
        if containment is not None:
            return containment.banding
        if self.bands is not None and self.rows_per_band is not None:
            return BandParameters(self.bands, self.rows_per_band)
        return choose_bands(self.threshold, self.num_perm, self.min_recall)

    def retention(self) -> Retention:
        return Retention(self.max_documents, self.max_age_seconds)

    def containment(self) -> EnsembleParameters | None:
        """The containment search's parameters, or ``None`` while ``containment_threshold`` is off."""
        if self.containment_threshold is None:
            return None
        explicit = None
        if self.containment_bands is not None and self.containment_rows_per_band is not None:
            explicit = _named_banding(self.containment_bands, self.containment_rows_per_band)
        return choose_ensemble(
            self.containment_threshold,
            self.containment_max_ratio,
            self.num_perm,
            self.containment_min_recall,
            (self.threshold, self.min_recall),
            explicit,
        )

    def signature_parameters(self) -> dict[str, object]:
        """The parameters two indexes must share for their signatures to be comparable.

        Only those the method reads: a SimHash index has no banding, a MinHash
        one no fingerprint weighting. ``method`` itself is named only when it
        is not ``minhash``, so MinHash indexes made before the setting existed
        keep their fingerprint (:data:`IMPLIED_SIGNATURE_PARAMETERS`).
        """
        parameters: dict[str, object] = {
            "signature_format": SIGNATURE_FORMAT,
            "seed": self.seed,
            "shingle_unit": self.shingle_unit,
            "shingle_size": self.shingle_size,
            "strip_punctuation": self.strip_punctuation,
        }
        if self.shingle_unit == "word":
            # Words broke only at spaces before text.word_breaks also broke them around each character of a
            # script written without spaces: word signatures of such text changed, so indexes of words
            # made before are refused (those of characters keep their fingerprint).
            parameters["word_breaks"] = WORD_BREAKS
        if self.ignore_invisible:  # named only when on, so that indexes made before it keep their fingerprint
            parameters["ignore_invisible"] = True
        if self.fold_lookalikes:  # likewise: indexes made before it, or with it off, keep their fingerprint
            parameters["fold_lookalikes"] = True
        if self.method != "minhash":
            parameters["method"] = self.method
        if self.containment_threshold is not None:
            # The index then keeps set sizes and is banded for containment (banding named below), with the
            # size partitions of this many per doubling.
            parameters["containment_partitions_per_doubling"] = PARTITIONS_PER_DOUBLING
        if self.uses_minhash:
            banding = self.banding()
            parameters |= {
                "num_perm": self.num_perm,
                "sketch_bits": self.sketch_bits,
                "scheme": self.scheme,
                "bands": banding.bands,
                "rows_per_band": banding.rows_per_band,
                # An exact-verification index holds shingle sets the other kind lacks.
                "verification": self.verification,
            }
        if self.uses_simhash:
            parameters["simhash_weighting"] = self.simhash_weighting
        return parameters

    def fingerprint(self) -> str:
        """Short stable hash of every parameter that decides verdicts (16 hex digits).

        Verdicts carry it (``params_fingerprint``), so that verdicts made under
        different settings can be told apart. Settings the method does not
        read are left out.
        """
        return _fingerprint(self.verdict_settings())

    def verdict_settings(self) -> dict[str, object]:
        """Every parameter that decides verdicts, by name: what :meth:`fingerprint` hashes."""
        unread = (SIMHASH_ONLY if not self.uses_simhash else ()) + (MINHASH_ONLY if not self.uses_minhash else ())
        unread += CONTAINMENT_ONLY if self.containment_threshold is None else ()
        settings = {name: value for name, value in asdict(self).items() if name not in unread}
        if self.method == "minhash":
            del settings["method"]
        if self.index_slots == 1:  # the cap as it was before slots existed: fingerprints stay what they were
            settings.pop("index_slots", None)
        if not self.ignore_invisible:  # the text as it was read before the setting existed: likewise
            del settings["ignore_invisible"]
        if not self.fold_lookalikes:
            del settings["fold_lookalikes"]
        return {**settings, **self.signature_parameters()}

    def signature_fingerprint(self) -> str:
        """Short stable hash of :meth:`signature_parameters` only (16 hex digits).

        Two indexes can share signatures exactly when these agree, whatever
        their thresholds or retention: the changelog records it, and refuses
        to be replayed under another.
        """
        return _fingerprint(self.signature_parameters())


def _named_banding(bands: int, rows_per_band: int) -> BandParameters:
    """An explicit containment banding, its errors naming the containment settings."""
    for name, value in (("containment_bands", bands), ("containment_rows_per_band", rows_per_band)):
        if not isinstance(value, int) or value < 1:
            raise ConfigError(name, f"must be a whole number >= 1, got {value!r}")
    return BandParameters(bands, rows_per_band)


def signature_parameters_in(settings: Mapping[str, object]) -> dict[str, object]:
    """The signature parameters among ``settings`` (:meth:`DetectionConfig.verdict_settings` holds them all)."""
    return {name: value for name, value in settings.items() if name in SIGNATURE_PARAMETER_NAMES}


def signature_difference(
    stored: Mapping[str, object], running: Mapping[str, object]
) -> tuple[str, object, object] | None:
    """The first signature parameter that differs from ``stored`` to ``running``: its name and both values.

    The method and containment come first: when they differ every other
    parameter does too, and they say why. A parameter either side does not
    name has its :data:`IMPLIED_SIGNATURE_PARAMETERS` value. None if none differs.
    """
    for name in dict.fromkeys([*LEADING_SIGNATURE_PARAMETERS, *running, *stored]):  # in order, each once
        made_with = stored.get(name, IMPLIED_SIGNATURE_PARAMETERS.get(name))
        runs_with = running.get(name, IMPLIED_SIGNATURE_PARAMETERS.get(name))
        if made_with != runs_with:
            return name, made_with, runs_with
    return None


def banding_kept(name: str, stored: Mapping[str, object]) -> str:
    """For a banding that differs, the settings that keep the stored one: a banding chosen from a threshold
    differs after most changes of it, and the operator changed the threshold, not ``bands``."""
    if name not in ("bands", "rows_per_band"):
        return ""
    prefix = "containment_" if "containment_partitions_per_doubling" in stored else ""
    return (
        f" (the banding is chosen from the thresholds unless set: {prefix}bands={stored.get('bands')} and "
        f"{prefix}rows_per_band={stored.get('rows_per_band')} keep it under new thresholds)"
    )


def settings_changes(before: Mapping[str, object], after: Mapping[str, object]) -> str | None:
    """Each setting that differs from ``before`` to ``after``, for a log (``threshold 0.8 -> 0.795``); None if none."""
    names = dict.fromkeys([*before, *after])
    changes = [
        f"{name} {before.get(name)!r} -> {after.get(name)!r}" for name in names if before.get(name) != after.get(name)
    ]
    return ", ".join(changes) or None


def _fingerprint(parameters: dict[str, object]) -> str:
    return xxhash.xxh3_64_hexdigest(json.dumps(parameters, sort_keys=True).encode("utf-8"))
