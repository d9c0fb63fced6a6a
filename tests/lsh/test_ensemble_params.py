"""LSH Ensemble parameters: size partitions, implied Jaccard, and the probe plan's recall guarantees."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.errors import ConfigError
from stream_dedup.lsh.ensemble_params import SizePartitions, choose_ensemble, implied_jaccard
from stream_dedup.lsh.params import BandParameters

#: The near-duplicate search the containment bands also serve: Jaccard threshold, recall.
JACCARD = (0.8, 0.99)


def test_partition_bounds_are_exact_integer_roots_of_powers_of_two() -> None:
    partitions = SizePartitions()
    m = partitions.per_doubling
    for k, lower in enumerate(partitions.lower[:-1].tolist()):
        assert lower**m >= 2**k and (lower == 1 or (lower - 1) ** m < 2**k)
    sizes = np.arange(1, 200_000)
    found = partitions.of(sizes)
    assert np.all(partitions.lower[found] <= sizes) and np.all(sizes < partitions.lower[found + 1])
    assert partitions.of([2**32 - 1]).tolist() == [partitions.count - 1]


@settings(max_examples=200, deadline=None)
@given(shared=st.integers(1, 500), smaller_extra=st.integers(0, 500), larger_extra=st.integers(0, 2000))
def test_implied_jaccard_is_the_jaccard_of_sets_with_that_containment(
    shared: int, smaller_extra: int, larger_extra: int
) -> None:
    smaller, larger = shared + smaller_extra, shared + smaller_extra + larger_extra
    # The smaller set holds `shared` of the larger's elements: containment shared / smaller.
    exact = shared / (smaller + larger - shared)
    assert float(implied_jaccard(shared / smaller, smaller, larger)) == pytest.approx(exact)


@settings(max_examples=300, deadline=None)
@given(
    threshold=st.floats(0.5, 0.95),
    max_ratio=st.floats(1.0, 3.0),
    query=st.integers(1, 100_000),
    factor=st.floats(1 / 3.0, 3.0),
)
def test_every_judged_pair_is_probed_with_enough_bands_for_min_recall(
    threshold: float, max_ratio: float, query: int, factor: float
) -> None:
    ensemble = choose_ensemble(threshold, max_ratio, 128, 0.95, JACCARD)
    other = max(1, round(query * factor))
    if not ensemble.judged(query, other):
        return
    plan = ensemble.probe_bands(np.array([query]))
    bands = int(plan.bands_at(np.array([0]), ensemble.partitions.of([other]))[0])
    lowest = float(implied_jaccard(threshold, min(query, other), max(query, other)))
    probed = BandParameters(bands, ensemble.banding.rows_per_band) if bands else None
    assert probed is not None, (query, other)
    assert float(probed.collision_probability(lowest)) >= 0.95 - 1e-9


@pytest.mark.parametrize("query", [1, 7, 300, 1000, 250_000])
def test_a_query_probes_only_partitions_that_can_hold_a_judged_size(query: int) -> None:
    ensemble = choose_ensemble(0.8, 2.0, 128, 0.95, JACCARD)
    _, partitions, bands = ensemble.probe_bands(np.array([query])).probes()
    lower = ensemble.partitions.lower
    assert np.all(lower[partitions] <= np.ceil(query * 2.0)) and np.all(lower[partitions + 1] > np.floor(query / 2))
    assert np.all(bands >= 1) and np.all(bands <= ensemble.banding.bands)
    own = ensemble.partitions.of([query])[0]
    # Sizes near the query's imply a high Jaccard: its own partition needs fewer bands than the farthest.
    assert bands[partitions == own][0] < bands.max()


def test_the_chosen_banding_reaches_min_recall_at_the_hardest_pair() -> None:
    for threshold, max_ratio in ((0.8, 2.0), (0.9, 1.5), (0.7, 1.2), (0.95, 3.0), (0.97, 1.05)):
        ensemble = choose_ensemble(threshold, max_ratio, 128, 0.95, JACCARD)
        assert ensemble.recall_at(max_ratio) >= 0.95
        # The near-duplicates found through the same bands keep their recall at their threshold.
        assert float(ensemble.banding.collision_probability(0.8)) >= 0.99
        assert ensemble.banding.bands * ensemble.banding.rows_per_band <= 128


def test_an_unreachable_recall_names_the_containment_settings() -> None:
    with pytest.raises(ConfigError, match=r"containment_max_ratio.*containment_bands"):
        choose_ensemble(0.5, 64.0, 128, 0.99, JACCARD)


@settings(max_examples=300, deadline=None)
@given(
    threshold=st.floats(0.5, 0.97),
    max_ratio=st.floats(1.0, 3.0),
    jaccard=st.floats(0.5, 0.95),
    query=st.integers(1, 100_000),
    factor=st.floats(0.5, 2.0),
)
def test_every_possible_near_duplicate_is_probed_with_enough_bands_for_the_jaccard_recall(
    threshold: float, max_ratio: float, jaccard: float, query: int, factor: float
) -> None:
    ensemble = choose_ensemble(threshold, max_ratio, 128, 0.9, (jaccard, 0.99))
    other = max(1, round(query * factor))
    if max(query, other) > min(query, other) / jaccard:
        return  # sizes this far apart cannot reach that Jaccard
    plan = ensemble.probe_bands(np.array([query]))
    bands = int(plan.bands_at(np.array([0]), ensemble.partitions.of([other]))[0])
    assert bands >= 1, (query, other)
    probed = BandParameters(bands, ensemble.banding.rows_per_band)
    assert float(probed.collision_probability(jaccard)) >= 0.99 - 1e-9
