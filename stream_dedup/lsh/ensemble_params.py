"""LSH Ensemble parameters: finding containment by banding, partitioned by set size.

Containment (Broder, 1997) of a set ``A`` in ``B`` is ``c(A, B) = |A ∩ B| / |A|``.
Banding finds pairs by Jaccard similarity, and a pair's Jaccard is not fixed
by its containment: it also depends on the two sizes. For a smaller set of
``s`` shingles contained at ``c`` in a larger one of ``l``,
``|A ∩ B| = c s`` and ``|A| + |B| - |A ∩ B| = s + l - c s``, so

    J = c s / (s + l - c s)                      (:func:`implied_jaccard`)

which falls as the sizes grow apart: 0.67 at ``c = 0.8`` for equal sizes,
0.36 at a ratio of 2, 0.19 at 4. LSH Ensemble (Zhu, Nargesian, Pu and Miller,
VLDB 2016) partitions the indexed sets by size, so that for a query of size
``q`` each partition's size bound gives the lowest Jaccard a containment
pair in it can have, and bands each partition for that threshold.

**One banding, bands chosen per query and partition.** The reference
implementations make that choice at query time among several stored
bandings per partition (datasketch keeps one ``MinHashLSH`` per
rows-per-band value; its documentation puts the memory at ``m`` = 8 times a
plain LSH index). Memory is this index's first constraint, so each document
is stored under one banding of ``bands`` bands of ``rows_per_band`` rows:
the banding that reaches ``min_recall`` at the lowest Jaccard of any pair it
must find, a containment pair at the threshold whose sizes differ by the
largest ratio judged (``max_ratio``). A query then gives each partition
only as many of those bands as the Jaccard implied at that partition's
bounds needs (:meth:`EnsembleParameters.probe_bands`): partitions of about
the query's size take few bands, so yield few false candidates, and the
farthest take them all. Partitions outside ``[q / max_ratio, q * max_ratio]``
get none.

**The near-duplicate search shares it.** A pair at Jaccard ``t`` (the
near-duplicate threshold, 0.8) is far easier to find than the hardest
containment pair, so the containment banding finds near-duplicates too: with
containment on it is the index's only banding, and the plan also gives every
partition where near-duplicates can be (sizes within ``1 / t`` of the
query's) the bands that reach the near-duplicate ``min_recall`` at ``t``. A
second banding for them would cost 12 bytes per document per band (16 bands
at ``t = 0.8``: 190 bytes, measured) and find nothing more.

**Logical partitions.** A document's partition follows from its stored set
size, and all partitions share one table per band: a query probes each band
once, and a match found through band ``k`` counts as a candidate only when
the plan gives the match's partition more than ``k`` bands. That is the
candidate set of separate tables per partition probed as planned, for one
probe per band instead of one per band and partition (the plan spans about
nine partitions at ``max_ratio = 2``).

**Why a largest ratio.** The containment estimate
(:mod:`stream_dedup.engine.containment`) comes from the Jaccard estimate of
the one-bit sketches, whose error is multiplied by about ``(1 + ratio) / (1 + J)**2``
on the way: a ratio of 2 gives a standard error of 0.047 at ``c = 0.8`` with
1,024 bits, 4 gives 0.11. And the bands a ratio needs grow as fast. Pairs of
sets more than ``max_ratio`` apart in size are not judged.

**Geometric partitions.** The paper derives equi-depth partitions from the
size distribution of a static collection; a stream has no such
distribution up front, and a document's partition must never change once
its keys are stored. Partition ``k`` holds the sizes ``x`` with
``2**(k/m) <= x < 2**((k+1)/m)`` (:data:`PARTITIONS_PER_DOUBLING` ``m = 4``),
a fixed grid where every partition's bounds are within a ratio of 1.19, so
the bound a query plans with is never far from the sizes in it.
"""

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from stream_dedup.errors import ConfigError
from stream_dedup.lsh.params import BandParameters, check_min_recall, steepest_banding

#: Size partitions per doubling of the set size: part of the index format, never change it.
PARTITIONS_PER_DOUBLING = 4
#: Set sizes are stored as uint32: every size from 1 to 2**32 - 1 has a partition.
_SIZE_BITS = 32

IntArray = npt.NDArray[np.intp]
SizeArray = npt.NDArray[np.uint32]


def implied_jaccard(containment: float, smaller: npt.ArrayLike, larger: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """Jaccard of a set of ``smaller`` elements contained at ``containment`` in one of ``larger``.

    >>> float(implied_jaccard(0.8, 100, 200))
    0.36363636363636365
    """
    s = np.asarray(smaller, dtype=np.float64)
    shared = containment * s
    return np.asarray(shared / (s + np.asarray(larger, dtype=np.float64) - shared), dtype=np.float64)


@dataclass(frozen=True)
class SizePartitions:
    """Geometric partitions of set sizes: ``k`` holds ``lower[k] <= x < lower[k + 1]``.

    The bounds are exact integers (``lower[k]`` is the least ``x`` with
    ``x**m >= 2**k``), computed with integer arithmetic so that every machine
    puts a size in the same partition.
    """

    per_doubling: int = PARTITIONS_PER_DOUBLING

    @cached_property
    def lower(self) -> npt.NDArray[np.int64]:
        """Smallest size of each partition, and one past the last (``2**32``)."""
        bounds = [_integer_root_ceiling(1 << k, self.per_doubling) for k in range(_SIZE_BITS * self.per_doubling)]
        return np.array([*bounds, 1 << _SIZE_BITS], dtype=np.int64)

    @property
    def count(self) -> int:
        return len(self.lower) - 1

    def of(self, sizes: npt.ArrayLike) -> IntArray:
        """Partition of each size (sizes are at least 1)."""
        return np.searchsorted(self.lower, np.asarray(sizes, dtype=np.int64), side="right").astype(np.intp) - 1

    def bounds(self, partition: int) -> tuple[int, int]:
        """Smallest and largest size of ``partition``."""
        return int(self.lower[partition]), int(self.lower[partition + 1]) - 1


def _integer_root_ceiling(value: int, degree: int) -> int:
    """Least integer ``x >= 1`` with ``x**degree >= value``."""
    root: int = max(1, round(value ** (1.0 / degree)))
    while root**degree < value:
        root += 1
    while root > 1 and (root - 1) ** degree >= value:
        root -= 1
    return root


@dataclass(frozen=True)
class ProbePlan:
    """Which partitions each query probes, and with how many bands.

    Query ``i`` probes partitions ``first[i] + j`` with the first
    ``bands[i, j]`` bands of the stored banding; 0 where it does not probe.
    """

    first: IntArray
    bands: IntArray

    def probes(self) -> tuple[IntArray, IntArray, IntArray]:
        """One element per (query, partition) probed: ``(rows, partitions, bands)``, in row order."""
        rows, offsets = np.nonzero(self.bands)
        return rows, self.first[rows] + offsets, self.bands[rows, offsets]

    def bands_at(self, rows: IntArray, partitions: IntArray) -> IntArray:
        """Bands query ``rows[i]`` probes partition ``partitions[i]`` with (0: not probed)."""
        offsets = partitions - self.first[rows]
        inside = (offsets >= 0) & (offsets < self.bands.shape[1])
        found = np.zeros(rows.size, dtype=np.intp)
        found[inside] = self.bands[rows[inside], offsets[inside]]
        return found


@dataclass(frozen=True)
class PartitionProbe:
    """One partition a query probes: its sizes, the bands it gets, and what they guarantee.

    ``lowest_jaccard`` is that of a pair at the threshold with the size in
    the partition farthest from the query's, and ``recall`` the chance that
    such a pair is a candidate (at least ``min_recall`` unless the stored
    banding has too few bands).
    """

    smallest: int
    largest: int
    bands: int
    lowest_jaccard: float
    recall: float


@dataclass(frozen=True)
class EnsembleParameters:
    """Containment search parameters: threshold, largest size ratio, the banding, recall targets, partitions.

    With containment on, the index is banded once, for containment, and the
    Jaccard search takes its candidates from the same bands: the probe plan
    also gives every partition holding sizes within ``1 / jaccard_threshold``
    of the query's (where near-duplicates can be) the bands that reach
    ``jaccard_recall`` at ``jaccard_threshold``.

    Attributes:
        threshold: containment at least this is reported (0 < c < 1).
        max_ratio: pairs whose set sizes differ by a larger factor are not judged (>= 1).
        banding: the banding every document is stored with.
        min_recall: candidate probability a probe plans for at each containment pair's lowest implied Jaccard.
        jaccard_threshold: the near-duplicate threshold the same bands serve.
        jaccard_recall: candidate probability planned for at ``jaccard_threshold``.
        partitions: the size partitions.
    """

    threshold: float
    max_ratio: float
    banding: BandParameters
    min_recall: float
    jaccard_threshold: float
    jaccard_recall: float
    partitions: SizePartitions = SizePartitions()

    @property
    def lowest_jaccard(self) -> float:
        """Jaccard of the hardest containment pair judged: at the threshold, sizes ``max_ratio`` apart."""
        return float(implied_jaccard(self.threshold, 1.0, self.max_ratio))

    def judged(self, sizes: npt.ArrayLike, other_sizes: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Whether pairs of these sizes are close enough in size to be judged for containment."""
        a, b = np.asarray(sizes, dtype=np.float64), np.asarray(other_sizes, dtype=np.float64)
        return np.asarray(np.maximum(a, b) <= self.max_ratio * np.minimum(a, b))

    def bands_for(self, jaccard: npt.ArrayLike, recall: float) -> IntArray:
        """Fewest stored bands whose candidate probability at ``jaccard`` is ``>= recall`` (at most all)."""
        band_probability = np.asarray(jaccard, dtype=np.float64) ** self.banding.rows_per_band
        with np.errstate(divide="ignore"):
            needed = np.log1p(-recall) / np.log1p(-np.minimum(band_probability, 1.0 - 1e-12))
        bands: IntArray = np.clip(np.ceil(needed - 1e-9), 1, self.banding.bands).astype(np.intp)
        return bands

    def probe_bands(self, query_sizes: npt.ArrayLike) -> ProbePlan:
        """The partitions each query probes and the bands through which a match in each counts.

        A partition is probed when it can hold a size within ``max_ratio`` of
        the query's, or within ``1 / jaccard_threshold`` (bounds widened by
        one, so that rounding never leaves a pair out). Its bands are the most
        of: those planned for the lowest Jaccard a containment pair at the
        threshold can have with a size in the partition (the implied Jaccard
        falls as the sizes move apart, so it is lowest at one of the two ends),
        and, where near-duplicates can be, those planned for ``jaccard_threshold``.
        """
        first, lowest, near = self._plan(np.asarray(query_sizes, dtype=np.float64))
        containment = np.where(lowest > 0, self.bands_for(lowest, self.min_recall), 0)
        duplicates = np.where(near, self.bands_for(self.jaccard_threshold, self.jaccard_recall), 0)
        return ProbePlan(first, np.maximum(containment, duplicates))

    def partition_plan(self, query_size: int) -> list[PartitionProbe]:
        """What a query of ``query_size`` shingles does in each partition it judges for containment (``params``)."""
        plan = self.probe_bands([query_size])
        _, lowest, _ = self._plan(np.array([float(query_size)]))
        probes = []
        for offset, (jaccard, bands) in enumerate(zip(lowest[0].tolist(), plan.bands[0].tolist(), strict=True)):
            if jaccard > 0:
                recall = float(BandParameters(bands, self.banding.rows_per_band).collision_probability(jaccard))
                probes.append(
                    PartitionProbe(*self.partitions.bounds(int(plan.first[0]) + offset), bands, jaccard, recall)
                )
        return probes

    def _plan(self, q: npt.NDArray[np.float64]) -> tuple[IntArray, npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        """Each query's first partition probed; in it and the next ones, the lowest implied Jaccard of a
        containment pair (0: none judged there) and whether near-duplicates can be there."""
        lower = self.partitions.lower
        largest_size = float(lower[-1] - 1)
        reach = max(self.max_ratio, 1.0 / self.jaccard_threshold)
        first = self.partitions.of(np.maximum(np.floor(q / reach), 1.0))
        span = self.partitions.of(np.minimum(np.ceil(q * reach), largest_size)) - first + 1
        offsets = np.arange(int(span.max()) if q.size else 0)
        partitions = np.minimum(first[:, None] + offsets[None, :], self.partitions.count - 1)
        probed = offsets[None, :] < span[:, None]
        smallest, largest = lower[partitions], lower[partitions + 1] - 1
        low = np.maximum(np.floor(q / self.max_ratio), 1.0)[:, None]
        high = np.minimum(np.ceil(q * self.max_ratio), largest_size)[:, None]
        judged = probed & (smallest <= high) & (largest >= low)
        ends = (
            self._implied(q[:, None], np.maximum(smallest, low)),
            self._implied(q[:, None], np.minimum(largest, high)),
        )
        lowest = np.where(judged, np.minimum(*ends), 0.0)
        t = self.jaccard_threshold
        near = probed & (smallest <= np.ceil(q / t)[:, None]) & (largest >= np.floor(q * t)[:, None])
        return first, lowest, near

    def recall_at(self, ratio: float) -> float:
        """Candidate probability of a pair at the threshold whose sizes differ by ``ratio`` (all bands)."""
        return float(self.banding.collision_probability(implied_jaccard(self.threshold, 1.0, ratio)))

    def _implied(self, query: npt.NDArray[np.float64], other: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        return implied_jaccard(self.threshold, np.minimum(query, other), np.maximum(query, other))


def check_containment_settings(max_ratio: float, min_recall: float) -> None:
    """Check the ranges of ``containment_max_ratio`` and ``containment_min_recall``."""
    if isinstance(max_ratio, bool) or not isinstance(max_ratio, int | float) or not 1.0 <= max_ratio <= 64.0:
        raise ConfigError("containment_max_ratio", f"must be a number from 1 to 64, got {max_ratio!r}")
    if isinstance(min_recall, bool) or not isinstance(min_recall, int | float) or not 0.0 < min_recall < 1.0:
        raise ConfigError("containment_min_recall", f"must be strictly between 0 and 1, got {min_recall!r}")


def choose_ensemble(
    threshold: float,
    max_ratio: float,
    num_perm: int,
    min_recall: float,
    jaccard: tuple[float, float],
    banding: BandParameters | None = None,
) -> EnsembleParameters:
    """Parameters for ``threshold``: ``banding``, or the steepest reaching ``min_recall`` at the hardest
    containment pair and ``jaccard = (threshold, recall)`` of the near-duplicate search it also serves.

    Errors name the containment settings (``containment_*``).
    """
    if isinstance(threshold, bool) or not isinstance(threshold, int | float) or not 0.0 < threshold < 1.0:
        raise ConfigError("containment_threshold", f"must be strictly between 0 and 1, got {threshold!r}")
    check_containment_settings(max_ratio, min_recall)
    # The banding also serves the near-duplicate search, at recall jaccard[1] (min_recall): one of 1 or more
    # stopped the start-up with a math domain error, and one of 0 or less was taken without a word.
    check_min_recall(jaccard[1])
    if banding is None:
        lowest = float(implied_jaccard(threshold, 1.0, max_ratio))
        banding = steepest_banding([(lowest, min_recall), jaccard], num_perm)
        if banding is None:
            raise ConfigError(
                "containment_max_ratio",
                f"{num_perm} permutations cannot reach recall {min_recall} at containment {threshold} for sizes "
                f"{max_ratio}x apart (Jaccard {lowest:.3f}); lower containment_max_ratio or containment_min_recall, "
                "or set containment_bands and containment_rows_per_band",
            )
    return EnsembleParameters(float(threshold), float(max_ratio), banding, float(min_recall), *jaccard)
