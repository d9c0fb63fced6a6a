from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.text import Shingling, shingle_chunks
from stream_dedup.text.shingles import _CHUNK_CELLS


@settings(max_examples=40, deadline=None)
@given(
    documents=st.lists(
        st.tuples(st.sampled_from([1, 2, 7, 300, 1_000, 5_000, 40_000, 200_000]), st.booleans()),
        min_size=1,
        max_size=60,
    ),
    unit=st.sampled_from(["char", "word"]),
)
def test_chunks_hold_every_document_once_within_the_cell_budget(documents: list[tuple[int, bool]], unit: str) -> None:
    texts = [(("äb " if accented else "ab ") * length)[:length].strip() or "a" for length, accented in documents]
    seen: list[int] = []
    for chunk in shingle_chunks(texts, Shingling(unit, 3), 1):  # type: ignore[arg-type]
        seen += chunk.rows.tolist()
        assert chunk.hashes.size <= _CHUNK_CELLS or chunk.rows.size == 1
        assert len({texts[i].isascii() for i in chunk.rows}) == 1  # ASCII chunks stay bytes
    assert sorted(seen) == list(range(len(texts)))
