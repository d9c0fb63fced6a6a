import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.errors import ConfigError
from stream_dedup.text import Shingling, normalize, shingle_chunks, shingle_set
from stream_dedup.text.hashing import MAX_U64
from stream_dedup.text.shingles import MAX_SHINGLE_SIZE


def hash_sets(texts: list[str], shingling: Shingling, seed: int = 1) -> list[set[int]]:
    out: list[set[int]] = [set() for _ in texts]
    for chunk in shingle_chunks(texts, shingling, seed):
        for row, hashes, count in zip(chunk.rows, chunk.hashes, chunk.counts, strict=True):
            assert (hashes[count:] == MAX_U64).all()
            out[row] = set(hashes[:count].tolist())
    return out


@settings(max_examples=60, deadline=None)
@given(
    texts=st.lists(st.text(min_size=1, max_size=80).map(normalize).filter(bool), min_size=1, max_size=12),
    size=st.integers(1, 7),
    unit=st.sampled_from(["char", "word"]),
)
def test_hashed_shingles_match_exact_shingles_one_to_one(texts: list[str], size: int, unit: str) -> None:
    shingling = Shingling(unit, size)  # type: ignore[arg-type]
    for text, hashes in zip(texts, hash_sets(texts, shingling), strict=True):
        assert len(hashes) == len(shingle_set(text, shingling))


def test_shingle_hashes_do_not_depend_on_the_batch() -> None:
    texts = ["alpha beta gamma", "a", "delta epsilon " * 50, "ünïcödé text"]
    together = hash_sets(texts, Shingling())
    alone = [hash_sets([t], Shingling())[0] for t in texts]
    assert together == alone


def test_equal_windows_hash_equal_across_documents() -> None:
    first, second = hash_sets(["xxhello", "hello yy"], Shingling("char", 5))
    assert len(first & second) == 1  # "hello"


def test_characters_are_code_points_not_bytes() -> None:
    # 3 code points (9 UTF-8 bytes): with k=3 that is one shingle, not seven.
    assert len(hash_sets(["日本語"], Shingling("char", 3))[0]) == 1


def test_short_documents_get_distinct_shingles() -> None:
    shorts = ["ab", "cd", "a", "xyz"]
    sets = hash_sets(shorts, Shingling("char", 5))
    assert all(len(s) == 1 for s in sets)
    assert len(set().union(*sets)) == len(shorts)


def test_seed_changes_every_hash() -> None:
    text = ["the same text under two seeds"]
    assert not hash_sets(text, Shingling(), seed=1)[0] & hash_sets(text, Shingling(), seed=2)[0]


def test_shingle_hashes_are_stable_across_releases() -> None:
    # Golden values: if this fails, signatures changed and every stored index
    # and snapshot is incomparable. Bump SIGNATURE_FORMAT instead of editing.
    chunk = next(shingle_chunks(["hello world"], Shingling("char", 5), 1))
    assert chunk.hashes[0, :3].tolist() == GOLDEN_CHAR
    chunk = next(shingle_chunks(["hello big world"], Shingling("word", 2), 1))
    assert chunk.hashes[0, :2].tolist() == GOLDEN_WORD


GOLDEN_CHAR = [11092622434406929522, 4620922995012149601, 5937937291182350605]
GOLDEN_WORD = [13135614856380322802, 4353379494621615613]


def test_word_shingles_ignore_character_layout_inside_words() -> None:
    first, second = hash_sets(["red fox runs", "red fox walks"], Shingling("word", 2))
    assert len(first & second) == 1


def test_hashes_are_uint64() -> None:
    chunk = next(shingle_chunks(["abcdef"], Shingling(), 1))
    assert chunk.hashes.dtype == np.uint64


@pytest.mark.parametrize("size", [0, MAX_SHINGLE_SIZE + 1, 2**64, True])
def test_a_shingle_size_out_of_range_is_refused_naming_the_setting(size: int) -> None:
    # Past 2**63 the size used to be taken, and every batch failed in numpy's int64 arithmetic.
    with pytest.raises(ConfigError, match=f"'shingle_size': must be a whole number from 1 to {MAX_SHINGLE_SIZE}"):
        Shingling("char", size)


def test_the_largest_shingle_size_makes_each_document_one_shingle() -> None:
    first, second = hash_sets(["hello world", "hello world!"], Shingling("char", MAX_SHINGLE_SIZE))
    assert len(first) == len(second) == 1
    assert first != second
