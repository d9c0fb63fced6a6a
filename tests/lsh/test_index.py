import itertools

import numpy as np

from stream_dedup.lsh import BandIndex, BandParameters, Retention, band_keys, pairs_within_batch
from stream_dedup.lsh.band_table import BandTables
from stream_dedup.lsh.generation import IndexedBatch

BANDING = BandParameters(bands=4, rows_per_band=2)


def random_signatures(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 8), dtype=np.uint8)


def add(index: BandIndex, signatures: np.ndarray, times: np.ndarray | None = None) -> None:
    keys = band_keys(signatures, BANDING)
    lookup = index.lookup(keys)
    _, _, ranks = pairs_within_batch(keys, index.max_bucket_size)
    first = index.next_seq
    ids = [f"d{first + i}" for i in range(len(signatures))]
    batch = IndexedBatch(ids, signatures, keys, np.zeros(len(ids)) if times is None else times)
    index.add(batch, lookup.newest_counts + ranks)


def test_lookup_finds_exactly_the_documents_sharing_a_band() -> None:
    stored = random_signatures(3000, seed=1)
    index = BandIndex(8, BANDING)
    for start in range(0, 3000, 500):
        add(index, stored[start : start + 500])
    queries = stored[::7].copy()
    queries[:, :2] = 0  # break band 0 of every query
    lookup = index.lookup(band_keys(queries, BANDING))
    found = set(zip(lookup.rows.tolist(), lookup.seqs.tolist(), strict=True))
    keys_q, keys_s = band_keys(queries, BANDING), band_keys(stored, BANDING)
    expected = {(q, s) for q in range(len(queries)) for s in range(len(stored)) if (keys_q[q] == keys_s[s]).any()}
    assert found == expected


def test_tables_keep_every_entry_when_they_grow() -> None:
    tables = BandTables(bands=2, buckets=2)
    keys = np.random.default_rng(3).integers(0, 2**64, (5000, 2), dtype=np.uint64)
    for start in range(0, 5000, 1000):
        docs = np.arange(start, start + 1000)
        stored = keys[: start + 1000]
        tables.insert(
            np.tile([0, 1], 1000),
            keys[start : start + 1000].ravel(),
            np.repeat(docs, 2),
            lambda stored=stored: stored,
        )
    query, doc = tables.lookup(np.tile([0, 1], 5000), keys.ravel())
    assert tables.buckets > 2
    found = set(zip(query.tolist(), doc.tolist(), strict=True))
    expected = {(q, q // 2) for q in range(10000)}
    assert expected <= found
    assert len(found - expected) <= 5  # 16-bit fingerprint collisions in a shared bucket


def test_pairs_within_batch_match_brute_force_and_respect_the_cap() -> None:
    keys = np.random.default_rng(5).integers(0, 4, (60, 3)).astype(np.uint64)
    rows, earlier, ranks = pairs_within_batch(keys, max_bucket_size=1000)
    expected = {(i, j) for i, j in itertools.combinations(range(60), 2) if (keys[i] == keys[j]).any()}
    assert {(int(e), int(r)) for r, e in zip(rows, earlier, strict=True)} == expected
    assert all(e < r for r, e in zip(rows, earlier, strict=True))
    assert ranks[5, 1] == int((keys[:5, 1] == keys[5, 1]).sum())
    capped_rows, _, _ = pairs_within_batch(keys, max_bucket_size=2)
    per_band_partners = np.bincount(capped_rows, minlength=60)
    assert per_band_partners.max() <= 2 * 3


def test_hot_bucket_is_capped_and_counted() -> None:
    index = BandIndex(8, BANDING, max_bucket_size=5)
    same = np.zeros((50, 8), dtype=np.uint8)
    add(index, same[:30])
    add(index, same[30:])
    lookup = index.lookup(band_keys(same[:1], BANDING))
    assert len(index) == 50
    assert lookup.seqs.size == 5 * BANDING.bands  # only the first five, in every band
    assert set(lookup.seqs.tolist()) == set(range(5))
    assert index.hot_bucket_skips == 45 * BANDING.bands


def test_retention_by_count_evicts_whole_generations_oldest_first() -> None:
    index = BandIndex(8, BANDING, retention=Retention(max_documents=1000))
    for start in range(0, 5000, 100):
        add(index, random_signatures(100, seed=start))
    assert 1000 <= len(index) <= 1250
    assert index.evicted_documents == 5000 - len(index)
    assert index.generations[0].base_seq == index.evicted_documents


def test_retention_by_age_forgets_documents_older_than_the_limit() -> None:
    index = BandIndex(8, BANDING, retention=Retention(max_age_seconds=100.0))
    for minute in range(20):
        add(index, random_signatures(50, seed=minute), times=np.full(50, minute * 60.0))
    oldest_kept = index.generations[0].first_event_time
    assert oldest_kept >= 19 * 60.0 - 100.0 - 60.0
    assert index.evicted_documents > 0


def test_retention_sizes_each_generation_up_front_so_tables_never_grow() -> None:
    index = BandIndex(8, BANDING, retention=Retention(max_documents=20_000))
    sizes = set()
    for start in range(0, 4500, 500):  # a generation holds 20,000 / 4 = 5,000
        add(index, random_signatures(500, seed=start))
        sizes.add(index.generations[-1].tables.buckets)
    assert len(index.generations) == 1
    assert sizes == {index.generations[-1].tables.buckets}
    assert index.generations[-1].tables.buckets * 8 * 0.75 >= 5000
