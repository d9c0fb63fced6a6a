import itertools

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from stream_dedup.lsh import BandIndex, BandParameters, IndexedBatch, Retention, SignedBatch, pairs_within_batch
from stream_dedup.lsh.band_keys import content_slots, index_keys
from stream_dedup.lsh.band_table import BandTables
from stream_dedup.lsh.index import _sorted_minors, ranks_within_batch
from stream_dedup.sketch import one_bit_sketches

BANDING = BandParameters(bands=4, rows_per_band=2)
SKETCH_BITS = 64


def random_signatures(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 2**32, (n, 8), dtype=np.uint32)


def keys_of(signatures: np.ndarray) -> np.ndarray:
    """Band keys and content key of banding signatures (the sketch: their bits, eight times over)."""
    return index_keys(signatures, one_bit_sketches(np.tile(signatures, 8)), BANDING)


def add(index: BandIndex, signatures: np.ndarray, times: np.ndarray | None = None) -> None:
    sketches = one_bit_sketches(np.tile(signatures, 8))
    keys = keys_of(signatures)
    lookup = index.lookup(keys)
    ranks = pairs_within_batch(keys, index.max_bucket_size).ranks
    first = index.next_seq
    ids = [f"d{first + i}" for i in range(len(signatures))]
    times = np.zeros(len(ids)) if times is None else times
    batch = IndexedBatch(ids, SignedBatch(sketches, keys), times, np.arange(first, first + len(ids), dtype=np.uint64))
    index.add(batch, lookup.newest_counts + ranks)


def test_lookup_finds_exactly_the_documents_sharing_a_key() -> None:
    rng = np.random.default_rng(1)
    stored = rng.integers(0, 12, (3000, 8), dtype=np.uint32)  # few values: many shared bands, none hot
    index = BandIndex(SKETCH_BITS, BANDING)
    for start in range(0, 3000, 500):
        add(index, stored[start : start + 500])
    queries = stored[::7].copy()
    queries[:, :2] = 99  # break band 0 of every query
    lookup = index.lookup(keys_of(queries))
    found = set(zip(lookup.rows.tolist(), lookup.seqs.tolist(), strict=True))
    keys_q, keys_s = keys_of(queries), keys_of(stored)
    expected = {(q, s) for q in range(len(queries)) for s in range(len(stored)) if (keys_q[q] == keys_s[s]).any()}
    assert len(expected) > 1000
    assert found == expected


def test_sources_come_back_by_sequence_number() -> None:
    index = BandIndex(SKETCH_BITS, BANDING, retention=Retention(max_documents=1000))
    for start in range(0, 3000, 100):
        add(index, random_signatures(100, seed=start))
    kept = np.arange(index.evicted_documents, index.next_seq, 37, dtype=np.int64)
    assert index.sources_of(kept).tolist() == kept.tolist()
    assert index.ids_of(kept) == [f"d{s}" for s in kept.tolist()]


def test_tables_keep_every_entry_when_they_grow() -> None:
    tables = BandTables(bands=2, buckets=2)
    keys = np.random.default_rng(3).integers(0, 2**32, (5000, 2), dtype=np.uint32) | np.uint32(1)
    for start in range(0, 5000, 1000):
        docs = np.arange(start, start + 1000)
        highs = (keys[: start + 1000] >> np.uint32(16)).astype(np.uint16)
        tables.insert(
            np.tile([0, 1], 1000),
            keys[start : start + 1000].ravel(),
            np.repeat(docs, 2),
            lambda highs=highs: highs,
        )
    query, doc = tables.lookup(np.tile([0, 1], 5000), keys.ravel())
    assert tables.buckets > 2
    found = set(zip(query.tolist(), doc.tolist(), strict=True))
    expected = {(q, q // 2) for q in range(10000)}
    assert expected <= found
    assert len(found - expected) <= 5  # 16-bit fingerprint collisions in a shared bucket


def test_pairs_within_batch_match_brute_force_and_respect_the_cap() -> None:
    keys = np.random.default_rng(5).integers(0, 4, (60, 3)).astype(np.uint64)
    rows, earlier, _, ranks = pairs_within_batch(keys, max_bucket_size=1000)
    expected = {(i, j) for i, j in itertools.combinations(range(60), 2) if (keys[i] == keys[j]).any()}
    assert {(int(e), int(r)) for r, e in zip(rows, earlier, strict=True)} == expected
    assert all(e < r for r, e in zip(rows, earlier, strict=True))
    assert ranks[5, 1] == int((keys[:5, 1] == keys[5, 1]).sum())
    capped_rows = pairs_within_batch(keys, max_bucket_size=2).rows
    per_band_partners = np.bincount(capped_rows, minlength=60)
    assert per_band_partners.max() <= 2 * 3


def test_a_hot_band_keeps_the_newest_documents_and_the_content_key_the_earliest() -> None:
    index = BandIndex(SKETCH_BITS, BANDING, max_bucket_size=5)
    same = np.zeros((50, 8), dtype=np.uint32)
    add(index, same[:30])
    add(index, same[30:])
    lookup = index.lookup(keys_of(same[:1]))
    tables = BANDING.bands + 1  # and the content key's
    assert len(index) == 50
    in_bands = lookup.seqs[lookup.tables < BANDING.bands]
    assert np.array_equal(np.bincount(in_bands, minlength=50), [0] * 45 + [BANDING.bands] * 5)
    assert sorted(lookup.seqs[lookup.tables == BANDING.bands].tolist()) == list(range(5))
    assert index.hot_bucket_skips == 45 * tables  # per table: 45 never entered or removed


def test_a_key_that_keeps_displacing_its_oldest_documents_keeps_its_few_slots() -> None:
    # Each batch's documents take the slots of those they displace: the band's slots in use stay
    # those of the cap, so a probe of the key never walks a lengthening run of removed entries.
    index = BandIndex(SKETCH_BITS, BANDING, max_bucket_size=5)
    same = np.zeros((20, 8), dtype=np.uint32)
    for _ in range(60):
        add(index, same)
    tables = index.generations[-1].tables
    assert tables.entries[: BANDING.bands].tolist() == [5] * BANDING.bands
    assert np.count_nonzero(tables.fingerprints[: BANDING.bands]) == 5 * BANDING.bands


def test_hot_bands_hold_each_keys_newest_documents_whatever_the_batches() -> None:
    """A model: under each band key, the newest ``max_bucket_size`` documents of the generation."""
    rng = np.random.default_rng(11)
    signatures = rng.integers(0, 3, (400, 8), dtype=np.uint32)  # few values: every key hot
    for cap, cuts in [(3, [400]), (3, [1, 7, 50, 51, 200, 400]), (7, list(range(10, 401, 10)))]:
        index = BandIndex(SKETCH_BITS, BANDING, max_bucket_size=cap)
        start = 0
        for stop in cuts:
            add(index, signatures[start:stop])
            start = stop
        keys = keys_of(signatures)
        lookup = index.lookup(keys)
        for band in range(BANDING.bands):
            for row in range(0, 400, 37):
                sharing = np.flatnonzero(keys[:, band] == keys[row, band])
                found = lookup.seqs[(lookup.rows == row) & (lookup.tables == band)]
                assert sorted(found.tolist()) == sharing[-cap:].tolist(), (cap, cuts, band, row)


def test_retention_by_count_evicts_whole_generations_oldest_first() -> None:
    index = BandIndex(SKETCH_BITS, BANDING, retention=Retention(max_documents=1000))
    for start in range(0, 5000, 100):
        add(index, random_signatures(100, seed=start))
    assert 1000 <= len(index) <= 1250
    assert index.evicted_documents == 5000 - len(index)
    assert index.generations[0].base_seq == index.evicted_documents


def test_retention_by_age_forgets_documents_older_than_the_limit() -> None:
    index = BandIndex(SKETCH_BITS, BANDING, retention=Retention(max_age_seconds=100.0))
    for minute in range(20):
        add(index, random_signatures(50, seed=minute), times=np.full(50, minute * 60.0))
    oldest_kept = index.generations[0].first_event_time
    assert oldest_kept >= 19 * 60.0 - 100.0 - 60.0
    assert index.evicted_documents > 0


def test_retention_sizes_each_generation_up_front_so_tables_never_grow() -> None:
    index = BandIndex(SKETCH_BITS, BANDING, retention=Retention(max_documents=20_000))
    sizes = set()
    for start in range(0, 4500, 500):  # a generation holds 20,000 / 4 = 5,000
        add(index, random_signatures(500, seed=start))
        sizes.add(index.generations[-1].tables.buckets)
    assert len(index.generations) == 1
    assert sizes == {index.generations[-1].tables.buckets}
    assert index.generations[-1].tables.buckets * 8 * 0.75 >= 5000


@settings(max_examples=100, deadline=None)
@given(
    slots=st.integers(1, 40),
    cap=st.integers(1, 12),
    values=st.integers(2, 4),
    stored_count=st.integers(0, 240),
    probe_count=st.integers(1, 80),
    seed=st.integers(0, 2**32),
)
@example(slots=1, cap=3, values=3, stored_count=240, probe_count=60, seed=17)
@example(slots=3, cap=6, values=3, stored_count=240, probe_count=60, seed=17)
@example(slots=2, cap=5, values=3, stored_count=240, probe_count=60, seed=17)
def test_a_row_sees_the_stored_documents_its_batchs_earlier_rows_left_entered_one_by_one(
    slots: int, cap: int, values: int, stored_count: int, probe_count: int, seed: int
) -> None:
    """A model, per band key and slot: the newest documents, each earlier row of the batch displacing the oldest.

    Few values make every key crowded; with many slots a row also meets stored documents of slots none of the
    batch's rows under that key has, and there are more possible (row, band, slot) groups than matches.
    """
    signatures = np.random.default_rng(seed).integers(0, values, (stored_count + probe_count, 8), dtype=np.uint32)
    stored, probe = signatures[:stored_count], signatures[stored_count:]
    index = BandIndex(SKETCH_BITS, BANDING, max_bucket_size=cap, slots=slots)
    for start in range(0, len(stored), 40):
        keys = keys_of(stored[start : start + 40])
        lookup = index.lookup(keys)
        sketches = one_bit_sketches(np.tile(stored[start : start + 40], 8))
        first = index.next_seq
        ids = [f"d{first + i}" for i in range(len(keys))]
        batch = IndexedBatch(ids, SignedBatch(sketches, keys), np.zeros(len(ids)), np.zeros(len(ids), np.uint64))
        index.add(batch, lookup.newest_counts + ranks_within_batch(keys, slots))
    stored_keys, keys = keys_of(stored), keys_of(probe)
    stored_slots, slot = content_slots(stored_keys, slots), content_slots(keys, slots)
    lookup = index.lookup(keys, pairs_within_batch(keys, cap).ranks)
    slot_cap = -(-cap // slots)
    for band in range(BANDING.bands):
        for row in range(len(probe)):
            expected = []
            for s in range(slots):
                held = np.flatnonzero((stored_keys[:, band] == keys[row, band]) & (stored_slots == s))[-slot_cap:]
                earlier = np.count_nonzero((keys[:row, band] == keys[row, band]) & (slot[:row] == s))
                left = max(0, slot_cap - earlier)  # each earlier row displaced the oldest
                expected += held[max(0, len(held) - left) :].tolist() if left else []
            found = lookup.seqs[(lookup.rows == row) & (lookup.tables == band)]
            assert sorted(found.tolist()) == sorted(expected), (slots, cap, band, row)


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 2**62), st.integers(0, 2**40)), max_size=50),
    major_bits=st.integers(0, 62),
    minor_bits=st.integers(0, 40),
)
def test_the_minors_of_pairs_sorted_come_out_in_order_whether_or_not_a_pair_fits_one_integer(
    pairs: list[tuple[int, int]], major_bits: int, minor_bits: int
) -> None:
    """Pairs of up to 102 bits, with a lexsort's truth: a sort of them packed only where they fit 63 bits."""
    pairs = [(major >> (62 - major_bits), minor >> (40 - minor_bits)) for major, minor in pairs]
    major = np.array([p[0] for p in pairs], dtype=np.int64)
    minor = np.array([p[1] for p in pairs], dtype=np.int64)
    positions = np.arange(len(pairs))[::-1].copy()
    expected = [minor for _, minor in sorted(pairs)][::-1]
    assert _sorted_minors(major.astype(np.intp), minor.astype(np.intp), positions).tolist() == expected
