"""Band tables against a dictionary: every entry is found under its key, in any batch layout."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.lsh.band_table import BUCKET_SLOTS, BandTables

BANDS = 2


def key_pool(rng: np.random.Generator, distinct_keys: int) -> np.ndarray:
    """Odd 32-bit keys whose fingerprints (low 16 bits) are all different."""
    highs = rng.integers(0, 2**16, distinct_keys, dtype=np.uint32) << np.uint32(16)
    return highs | (np.arange(distinct_keys, dtype=np.uint32) * np.uint32(2) + np.uint32(1))


def insert(tables: BandTables, keys: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Insert documents with keys ``new`` after those of ``keys`` (every band); returns all the keys."""
    first = keys.shape[0]
    keys = np.concatenate((keys, new))
    highs = (keys >> np.uint32(16)).astype(np.uint16)
    size = new.shape[0]
    tables.insert(
        np.tile(np.arange(BANDS), size), new.ravel(), np.repeat(np.arange(first, first + size), BANDS), lambda: highs
    )
    return keys


def stored_under_each_key(tables: BandTables, pool: np.ndarray) -> list[tuple[int, int]]:
    """(query, document) of every lookup of each key of ``pool`` in each band."""
    query, doc = tables.lookup(np.repeat(np.arange(BANDS), pool.size), np.tile(pool, BANDS))
    return sorted(zip(query.tolist(), doc.tolist(), strict=True))


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
    pool = key_pool(rng, distinct_keys)
    tables = BandTables(BANDS, buckets)
    keys = np.empty((0, BANDS), dtype=np.uint32)
    for size in batches:
        keys = insert(tables, keys, pool[rng.integers(0, distinct_keys, (size, BANDS))])
    expected = sorted(
        (band * distinct_keys + k, d)
        for band in range(BANDS)
        for k in range(distinct_keys)
        for d in np.flatnonzero(keys[:, band] == pool[k]).tolist()
    )
    assert stored_under_each_key(tables, pool) == expected
    assert tables.entries.tolist() == [keys.shape[0]] * BANDS
    assert np.count_nonzero(tables.fingerprints) == BANDS * keys.shape[0] <= tables.docs.size
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
    pool = key_pool(rng, distinct_keys)
    tables = BandTables(BANDS, buckets)
    keys = np.empty((0, BANDS), dtype=np.uint32)
    stored = np.empty((0, BANDS), dtype=bool)
    for size, share in batches:
        keys = insert(tables, keys, pool[rng.integers(0, distinct_keys, (size, BANDS))])
        stored = np.concatenate((stored, np.ones((size, BANDS), dtype=bool)))
        removing = stored & (rng.random(stored.shape) < share)
        docs, bands_of = np.nonzero(removing)
        tables.remove(bands_of, keys[docs, bands_of], docs)
        stored &= ~removing
    expected = sorted(
        (band * distinct_keys + k, d)
        for band in range(BANDS)
        for k in range(distinct_keys)
        for d in np.flatnonzero((keys[:, band] == pool[k]) & stored[:, band]).tolist()
    )
    assert stored_under_each_key(tables, pool) == expected
    # Slots in use, removed ones too (what the load counts); a removed slot is taken again.
    assert tables.entries.tolist() == np.count_nonzero(tables.fingerprints.reshape(BANDS, -1), axis=1).tolist()
