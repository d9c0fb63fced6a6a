import contextlib
import itertools
import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.errors import ConfigError, CorruptSnapshotError, IncompatibleSnapshotError
from stream_dedup.lsh import Retention
from stream_dedup.lsh.hamming import HammingIndex, NearMatches, fingerprint_slots, matches_within_batch
from stream_dedup.lsh.hamming_params import HammingLayout, choose_layout

LAYOUTS = [
    HammingLayout(0, (1,)),
    HammingLayout(1, (2,)),
    HammingLayout(2, (3,)),
    HammingLayout(3, (4,)),
    HammingLayout(3, (5,)),
    HammingLayout(3, (4, 4)),
    HammingLayout(4, (5,)),
    HammingLayout(2, (3, 5)),
]


def flip(value: int, bits: list[int]) -> int:
    for bit in bits:
        value ^= 1 << bit
    return value


@st.composite
def streams(draw: st.DrawFn, k: int) -> list[int]:
    """Random fingerprints, and copies of earlier ones with 0..k+1 bits flipped (both sides of the limit)."""
    fingerprints: list[int] = []
    for _ in range(draw(st.integers(1, 120))):
        if fingerprints and draw(st.booleans()):
            origin = draw(st.sampled_from(fingerprints))
            flips = draw(st.lists(st.integers(0, 63), min_size=0, max_size=k + 1, unique=True))
            fingerprints.append(flip(origin, flips))
        else:
            fingerprints.append(draw(st.integers(0, 2**64 - 1)))
    return fingerprints


def brute_force(fingerprints: list[int], k: int) -> set[tuple[int, int, int]]:
    """Every (document, earlier document, distance) within k, by comparing all pairs."""
    return {
        (i, j, bin(fingerprints[i] ^ fingerprints[j]).count("1"))
        for i in range(len(fingerprints))
        for j in range(i)
        if bin(fingerprints[i] ^ fingerprints[j]).count("1") <= k
    }


def stream_through(index: HammingIndex, fingerprints: list[int], cuts: list[int]) -> set[tuple[int, int, int]]:
    """Feed the stream in batches cut at ``cuts``; return the matches as (document, earlier, distance)."""
    found = set()
    edges = [0, *sorted(set(cuts)), len(fingerprints)]
    for start, stop in itertools.pairwise(edges):
        if start >= stop:
            continue
        batch = np.array(fingerprints[start:stop], dtype=np.uint64)
        matches = index.search_and_add(batch, [f"doc{n}" for n in range(start, stop)])
        found |= set(
            zip((matches.rows + start).tolist(), matches.seqs.tolist(), matches.distances.tolist(), strict=True)
        )
    return found


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: f"k{layout.max_distance}-{layout.levels}")
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_index_finds_exactly_the_earlier_fingerprints_within_k(layout: HammingLayout, data: st.DataObject) -> None:
    fingerprints = data.draw(streams(layout.max_distance))
    cuts = data.draw(st.lists(st.integers(0, len(fingerprints)), max_size=5))
    found = stream_through(HammingIndex(layout), fingerprints, cuts)
    assert found == brute_force(fingerprints, layout.max_distance)


def capped_brute_force(fingerprints: list[int], k: int, cap: int, slots: int) -> set[tuple[int, int, int]]:
    """The matches when documents come one by one and the hot-cluster cap keeps some out of the tables.

    A document is found only if it was entered; it is entered unless, among the entered documents of its
    slot, ``cap`` or more lie within k of it or one is an exact copy (one generation: no retention).
    """
    slot = fingerprint_slots(np.array(fingerprints, dtype=np.uint64), slots).tolist()
    entered: list[int] = []
    found = set()
    for i, value in enumerate(fingerprints):
        near = [(j, bin(value ^ fingerprints[j]).count("1")) for j in entered]
        near = [(j, d) for j, d in near if d <= k]
        found |= {(i, j, d) for j, d in near}
        own = [d for j, d in near if slot[j] == slot[i]]
        if len(own) < cap and 0 not in own:
            entered.append(i)
    return found


@st.composite
def crowded_streams(draw: st.DrawFn, k: int) -> list[int]:
    """A few centres, each copied many times with 0..k+1 bits flipped: crowds the cap binds in."""
    centres = draw(st.lists(st.integers(0, 2**64 - 1), min_size=1, max_size=3))
    fingerprints = []
    for _ in range(draw(st.integers(1, 80))):
        flips = draw(st.lists(st.integers(0, 63), max_size=k + 1, unique=True))
        fingerprints.append(flip(draw(st.sampled_from(centres)), flips))
    return fingerprints


@pytest.mark.parametrize("layout", LAYOUTS[:5], ids=lambda layout: f"k{layout.max_distance}-{layout.levels}")
@settings(max_examples=60, deadline=None)
@given(data=st.data(), cap=st.integers(1, 5), slots=st.sampled_from([1, 2, 3]))
def test_with_the_cap_binding_matches_are_those_of_documents_entered_one_by_one(
    layout: HammingLayout, data: st.DataObject, cap: int, slots: int
) -> None:
    fingerprints = data.draw(crowded_streams(layout.max_distance))
    cuts = data.draw(st.lists(st.integers(0, len(fingerprints)), max_size=5))
    index = HammingIndex(layout, max_bucket_size=cap * slots, slots=slots)

    found = stream_through(index, fingerprints, cuts)

    assert found == capped_brute_force(fingerprints, layout.max_distance, cap, slots)


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda layout: f"k{layout.max_distance}-{layout.levels}")
@settings(max_examples=100, deadline=None)
@given(value=st.integers(0, 2**64 - 1), data=st.data())
def test_some_table_key_survives_any_k_flipped_bits(layout: HammingLayout, value: int, data: st.DataObject) -> None:
    flips = data.draw(st.lists(st.integers(0, 63), max_size=layout.max_distance, unique=True))
    pair = np.array([value, flip(value, flips)], dtype=np.uint64)
    assert any(keys[0] == keys[1] for keys in layout.keys(pair))


def test_matches_do_not_depend_on_batch_boundaries() -> None:
    rng = np.random.default_rng(4)
    base = rng.integers(0, 2**64, 300, dtype=np.uint64).tolist()
    fingerprints = [*base, *(flip(v, rng.choice(64, 2, replace=False).tolist()) for v in base)]
    layout = HammingLayout(3, (4,))
    one_batch = stream_through(HammingIndex(layout), fingerprints, [])
    one_by_one = stream_through(HammingIndex(layout), fingerprints, list(range(len(fingerprints))))
    ragged = stream_through(HammingIndex(layout), fingerprints, [7, 8, 250, 301, 599])
    assert one_batch == one_by_one == ragged
    assert len(one_batch) >= 300


def test_search_reports_stored_documents_and_leaves_the_index_unchanged() -> None:
    index = HammingIndex(HammingLayout(3, (4,)))
    index.add(np.array([0b1111, 2**63], dtype=np.uint64), ["a", "b"])
    matches = index.search(np.array([0b0111, 2**63 + (0b111 << 20), 12345 << 40], dtype=np.uint64))
    assert matches.rows.tolist() == [0, 1]
    assert index.ids_of(matches.seqs) == ["a", "b"]
    assert matches.distances.tolist() == [1, 3]
    assert len(index) == 2


def test_within_batch_pairs_each_row_with_earlier_rows_only() -> None:
    batch = np.array([5, 7, 5, 2**40], dtype=np.uint64)
    matches = matches_within_batch(batch, HammingLayout(1, (2,)))
    pairs = set(zip(matches.rows.tolist(), matches.seqs.tolist(), matches.distances.tolist(), strict=True))
    assert pairs == {(1, 0, 1), (2, 0, 0), (2, 1, 1)}


def test_retention_by_count_forgets_whole_oldest_generations() -> None:
    index = HammingIndex(HammingLayout(3, (4,)), Retention(max_documents=400))
    fingerprints = np.random.default_rng(2).integers(0, 2**64, 1000, dtype=np.uint64)
    for start in range(0, 1000, 100):
        index.add(fingerprints[start : start + 100], [f"d{n}" for n in range(start, start + 100)])
    assert 400 <= len(index) <= 500
    assert index.evicted_documents == 1000 - len(index)
    kept = index.search(fingerprints)
    assert set(kept.seqs.tolist()) == set(range(1000 - len(index), 1000))
    assert index.ids_of(np.array([999])) == ["d999"]


def test_retention_by_age_forgets_generations_older_than_the_newest_event_minus_max_age() -> None:
    index = HammingIndex(HammingLayout(3, (4,)), Retention(max_age_seconds=100.0))
    fingerprints = np.random.default_rng(3).integers(0, 2**64, 60, dtype=np.uint64)
    for step in range(6):
        batch = fingerprints[step * 10 : step * 10 + 10]
        index.add(batch, [f"t{step}"] * 10, np.full(10, 40.0 * step))
    found = index.search(fingerprints)
    assert min(found.seqs.tolist()) >= 20  # events at t=0 and t=40 are more than 100 s before t=200
    assert max(found.seqs.tolist()) == 59


def test_export_restore_round_trip_answers_alike_and_continues_numbering() -> None:
    rng = np.random.default_rng(5)
    index = HammingIndex(HammingLayout(3, (4,)), Retention(max_documents=2000))
    stored = rng.integers(0, 2**64, 3000, dtype=np.uint64)
    for start in range(0, 3000, 500):
        index.add(stored[start : start + 500], [f"é{n}" for n in range(start, start + 500)], np.full(500, 1.0 * start))
    metadata, arrays = index.export()
    json.dumps(metadata)  # JSON-able: a snapshot can store it beside the arrays
    assert all(isinstance(array, np.ndarray) for array in arrays.values())
    restored = HammingIndex.restore(json.loads(json.dumps(metadata)), arrays)
    queries = stored ^ np.uint64(0b101)
    assert_same(restored.search(queries), index.search(queries))
    assert restored.next_seq == index.next_seq == 3000
    assert restored.ids_of(np.array([2999, 1500])) == ["é2999", "é1500"]
    relaid = HammingIndex.restore(metadata, arrays, into=HammingIndex(HammingLayout(3, (5,))))
    assert_same(relaid.search(queries), index.search(queries))


def test_restore_under_another_distance_answers_as_an_index_built_under_it() -> None:
    """The tables are rebuilt from the fingerprints: a restart may change ``max_hamming``, as a replay could."""
    rng = np.random.default_rng(8)
    stored = rng.integers(0, 2**64, 400, dtype=np.uint64)
    index = HammingIndex(HammingLayout(3, (4,)))
    index.add(stored, [str(n) for n in range(400)])
    wider = HammingIndex(HammingLayout(6, (7,)))
    wider.add(stored, [str(n) for n in range(400)])
    metadata, arrays = index.export()
    restored = HammingIndex.restore(metadata, arrays, into=HammingIndex(HammingLayout(6, (7,))))
    flips = rng.integers(0, 64, (400, 5))
    queries = stored ^ np.bitwise_or.reduce(np.uint64(1) << flips.astype(np.uint64), axis=1)  # 1 to 5 bits away
    assert restored.max_distance == 6
    assert index.search(queries).rows.size < restored.search(queries).rows.size
    assert_same(restored.search(queries), wider.search(queries))


def test_restore_refuses_another_format_and_inconsistent_arrays() -> None:
    index = HammingIndex(HammingLayout(3, (4,)))
    index.add(np.arange(10, dtype=np.uint64), [str(n) for n in range(10)])
    metadata, arrays = index.export()
    with pytest.raises(IncompatibleSnapshotError, match="format"):
        HammingIndex.restore({**metadata, "format": "something else"}, arrays)
    with pytest.raises(CorruptSnapshotError):
        HammingIndex.restore(metadata, {**arrays, "generation0.fingerprints": np.arange(9, dtype=np.uint64)})
    with pytest.raises(CorruptSnapshotError, match="lacks"):
        HammingIndex.restore(metadata, {k: v for k, v in arrays.items() if not k.endswith("id_bytes")})


@pytest.mark.parametrize(
    "change",
    [{"levels": []}, {"max_distance": -1}, {"retention": {"max_documents": 0, "max_age_seconds": None}}],
    ids=["no-level", "negative-distance", "no-document-kept"],
)
def test_restore_refuses_settings_no_index_has_as_corrupt(change: dict[str, object]) -> None:
    """Not as a ConfigError: no setting of the running configuration is wrong, the export is."""
    index = HammingIndex(HammingLayout(3, (4,)))
    index.add(np.arange(10, dtype=np.uint64), [str(n) for n in range(10)])
    metadata, arrays = index.export()
    with pytest.raises(CorruptSnapshotError, match="settings no index has"):
        HammingIndex.restore({**metadata, **change}, arrays)


def test_a_document_costs_at_most_64_bytes_including_its_id() -> None:
    index = HammingIndex(choose_layout(3, 200_000))
    fingerprints = np.random.default_rng(6).integers(0, 2**64, 200_000, dtype=np.uint64)
    for start in range(0, 200_000, 5000):
        index.add(fingerprints[start : start + 5000], [f"doc-{n:07d}" for n in range(start, start + 5000)])
    assert index.nbytes / len(index) <= 64


def test_runs_per_generation_stay_logarithmic() -> None:
    index = HammingIndex(HammingLayout(3, (4,)))
    for start in range(0, 64_000, 1000):
        index.add(np.arange(start, start + 1000, dtype=np.uint64), ["x"] * 1000)
    sizes = [len(run) for run in index.generations[0].runs.runs]
    assert sum(sizes) == 64_000
    assert len(sizes) <= math.log2(64) + 1
    assert all(older >= 2 * newer for older, newer in itertools.pairwise(sizes))


def test_layout_for_distance_3_is_four_16_bit_tables_at_a_million_and_ten_million() -> None:
    for documents in (1_000_000, 10_000_000):
        layout = choose_layout(3, documents)
        assert (layout.levels, layout.tables, layout.key_bits) == ((4,), 4, (16, 16, 16, 16))
        assert layout.expected_probes(documents) == pytest.approx(4 * documents / 2**16)
        assert layout.table_bytes == 24


def test_a_larger_memory_budget_buys_fewer_probes() -> None:
    roomy = choose_layout(3, 10_000_000, max_table_bytes=80)
    assert roomy.table_bytes <= 80
    assert roomy.expected_probes(10_000_000) < choose_layout(3, 10_000_000).expected_probes(10_000_000) / 100


@pytest.mark.parametrize("budget", [24, 32, 80, 200])
def test_the_layout_chosen_is_the_best_of_every_candidate_that_fits(budget: int) -> None:
    """Candidates of too many tables are never built; the choice is still the best of all of them that fit."""
    for k in range(0, 7):
        sizes = range(k + 1, k + 6)
        shapes = [(b,) for b in sizes] + list(itertools.product(sizes[:4], repeat=2))
        fitting = []
        for levels in shapes:
            with contextlib.suppress(ConfigError):  # out of bits
                layout = HammingLayout(k, levels)
                if layout.table_bytes <= budget:
                    fitting.append(layout)
        if not fitting:
            continue
        best = min(fitting, key=lambda layout: (layout.expected_probes(10**6) + layout.tables, layout.tables))
        assert choose_layout(k, 10**6, max_table_bytes=budget) == best


def test_paper_example_has_16_tables_of_28_bit_keys() -> None:
    layout = HammingLayout(3, (4, 4))
    assert layout.tables == 16
    assert set(layout.key_bits) == {28}


def test_layout_errors_name_the_setting_to_change() -> None:
    with pytest.raises(ConfigError, match="max_table_bytes"):
        choose_layout(6, 1_000_000, max_table_bytes=32)
    with pytest.raises(ConfigError, match="max_distance"):
        choose_layout(17)
    with pytest.raises(ConfigError, match="hamming_levels"):
        HammingLayout(3, (3,))


def test_fingerprints_that_share_most_bits_still_spread_over_every_slot() -> None:
    """One site's pages share most fingerprint bits; their shards must not follow those bits."""
    base = np.uint64(0xF0F0_F0F0_F0F0_F0F0)
    for varying in (np.arange(600, dtype=np.uint64), np.arange(600, dtype=np.uint64) << np.uint64(54)):
        fingerprints = base ^ varying  # only the low bits differ, or only the high ones
        counts = np.bincount(fingerprint_slots(fingerprints, 6), minlength=6)
        assert counts.min() > 60, counts
    copies = np.repeat(base ^ np.arange(50, dtype=np.uint64), 3)
    assert (fingerprint_slots(copies, 6).reshape(50, 3) == fingerprint_slots(copies[::3], 6)[:, None]).all()
    assert np.array_equal(fingerprint_slots(copies, 12) % 3, fingerprint_slots(copies, 3))


def assert_same(left: NearMatches, right: NearMatches) -> None:
    assert left.rows.tolist() == right.rows.tolist()
    assert left.seqs.tolist() == right.seqs.tolist()
    assert left.distances.tolist() == right.distances.tolist()
