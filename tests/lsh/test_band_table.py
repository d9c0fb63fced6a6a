"""Band tables against a dictionary: every entry is found under its key, in any batch layout."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.lsh.band_table import BUCKET_SLOTS, BandTables


@settings(max_examples=60, deadline=None)
@given(
    distinct_keys=st.integers(1, 40),
    batches=st.lists(st.integers(1, 400), min_size=1, max_size=6),
    buckets=st.sampled_from([1, 2, 3, 16]),
    seed=st.integers(0, 2**32),
)
def test_lookup_finds_every_document_inserted_under_its_key(
    distinct_keys: int, batches: list[int], buckets: int, seed: int
) -> None:
    # Few keys, crowded into few buckets: entries of one batch share buckets, overflow and wrap.
    # Each key's fingerprint (its low 16 bits) is its own, so a lookup must find exactly its documents.
    rng = np.random.default_rng(seed)
    highs = rng.integers(0, 2**16, distinct_keys, dtype=np.uint32) << np.uint32(16)
    pool = highs | (np.arange(distinct_keys, dtype=np.uint32) * np.uint32(2) + np.uint32(1))
    bands = 2
    tables = BandTables(bands, buckets)
    keys = np.empty((0, bands), dtype=np.uint32)
    for size in batches:
        new = pool[rng.integers(0, distinct_keys, (size, bands))]
        first = keys.shape[0]
        keys = np.concatenate((keys, new))
        highs_so_far = (keys >> np.uint32(16)).astype(np.uint16)
        tables.insert(
            np.tile(np.arange(bands), size),
            new.ravel(),
            np.repeat(np.arange(first, first + size), bands),
            lambda highs_so_far=highs_so_far: highs_so_far,
        )
    query_bands = np.repeat(np.arange(bands), distinct_keys)
    query, doc = tables.lookup(query_bands, np.tile(pool, bands))
    found = sorted(zip(query.tolist(), doc.tolist(), strict=True))
    expected = sorted(
        (band * distinct_keys + k, d)
        for band in range(bands)
        for k in range(distinct_keys)
        for d in np.flatnonzero(keys[:, band] == pool[k]).tolist()
    )
    assert found == expected
    assert tables.entries.tolist() == [keys.shape[0]] * bands
    assert np.count_nonzero(tables.fingerprints) == bands * keys.shape[0] <= tables.docs.size
    assert tables.buckets * BUCKET_SLOTS * 0.75 >= keys.shape[0]


@settings(max_examples=60, deadline=None)
@given(
    distinct_keys=st.integers(1, 40),
    batches=st.lists(st.tuples(st.integers(1, 300), st.floats(0.0, 1.0)), min_size=1, max_size=6),
    buckets=st.sampled_from([1, 2, 3, 16]),
    seed=st.integers(0, 2**32),
)
def test_removed_entries_are_never_found_and_the_others_always_are_through_growth(
    distinct_keys: int, batches: list[tuple[int, float]], buckets: int, seed: int
) -> None:
    # After each batch a share of every entry still stored is removed; later batches make the tables grow.
    rng = np.random.default_rng(seed)
    highs = rng.integers(0, 2**16, distinct_keys, dtype=np.uint32) << np.uint32(16)
    pool = highs | (np.arange(distinct_keys, dtype=np.uint32) * np.uint32(2) + np.uint32(1))
    bands = 2
    tables = BandTables(bands, buckets)
    keys = np.empty((0, bands), dtype=np.uint32)
    stored = np.empty((0, bands), dtype=bool)
    for size, share in batches:
        new = pool[rng.integers(0, distinct_keys, (size, bands))]
        first = keys.shape[0]
        keys = np.concatenate((keys, new))
        stored = np.concatenate((stored, np.ones(new.shape, dtype=bool)))
        highs_so_far = (keys >> np.uint32(16)).astype(np.uint16)
        tables.insert(
            np.tile(np.arange(bands), size),
            new.ravel(),
            np.repeat(np.arange(first, first + size), bands),
            lambda highs_so_far=highs_so_far: highs_so_far,
        )
        removing = stored & (rng.random(stored.shape) < share)
        docs, bands_of = np.nonzero(removing)
        tables.remove(bands_of, keys[docs, bands_of], docs)
        stored &= ~removing
    query_bands = np.repeat(np.arange(bands), distinct_keys)
    query, doc = tables.lookup(query_bands, np.tile(pool, bands))
    found = sorted(zip(query.tolist(), doc.tolist(), strict=True))
    expected = sorted(
        (band * distinct_keys + k, d)
        for band in range(bands)
        for k in range(distinct_keys)
        for d in np.flatnonzero((keys[:, band] == pool[k]) & stored[:, band]).tolist()
    )
    assert found == expected
    # Slots in use, removed ones too (what the load counts); a removed slot is taken again.
    assert tables.entries.tolist() == np.count_nonzero(tables.fingerprints.reshape(bands, -1), axis=1).tolist()
