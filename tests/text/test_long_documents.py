"""Long documents are hashed in pieces of bounded size, with exactly the shingle hashes of the whole.

The reference is the same document hashed whole, which is what every
document was before pieces: :data:`PIECE_TOKENS` is raised past it. Pieces
are made tiny here (a few tokens) so that every kind of boundary is met: a
window across two pieces, a word cut at a space, pieces shorter than a
shingle, a document with fewer tokens than a shingle.
"""

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.text import Shingling, shingle_chunks
from stream_dedup.text import shingles as shingles_module
from stream_dedup.text.distinct_pieces import whole_chunks

#: Texts with runs of spaces, non-ASCII letters, long words and characters that are words on their own (Han,
#: kana, Thai): whatever a cut could split badly.
texts = st.text(alphabet="ab é  \u3000x中文かก", min_size=1, max_size=120).filter(lambda t: t.strip())
shinglings = st.builds(Shingling, unit=st.sampled_from(["char", "word"]), size=st.integers(1, 6))


@contextmanager
def pieces_of(tokens: int) -> Iterator[None]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(shingles_module, "PIECE_TOKENS", tokens)
        yield


def hash_counts(documents: list[str], shingling: Shingling, folded: bool) -> list[Counter[int]]:
    """Each document's shingle hashes with their repeats, from whatever chunks and pieces it came in."""
    counts: list[Counter[int]] = [Counter() for _ in documents]
    for chunk in shingle_chunks(documents, shingling, 7, folded=folded):
        for row, hashes, count in zip(chunk.rows, chunk.hashes, chunk.counts, strict=True):
            counts[row].update(hashes[:count].tolist())
    return counts


@settings(max_examples=200, deadline=None)
@given(documents=st.lists(texts, min_size=1, max_size=4), shingling=shinglings, piece=st.integers(1, 9))
def test_a_document_hashed_in_pieces_has_the_shingle_hashes_of_the_whole(
    documents: list[str], shingling: Shingling, piece: int
) -> None:
    for folded in (False, True):
        # Not folded: the texts are taken as normalised, their spaces as they are; folded: collapsed first.
        if not folded and not all(" ".join(text.split()) == text for text in documents):
            continue
        whole = hash_counts(documents, shingling, folded)
        with pieces_of(piece):
            assert hash_counts(documents, shingling, folded) == whole


def test_a_long_document_comes_in_pieces_of_bounded_width_after_the_other_chunks() -> None:
    documents = ["short one", "x" * 1000 + " y" * 500, "another short one"]
    with pieces_of(100):
        chunks = list(shingle_chunks(documents, Shingling("char", 5), 1))
    pieces = [chunk for chunk in chunks if chunk.piece]
    assert [chunk.rows.tolist() for chunk in pieces] == [[1]] * len(pieces)
    assert len(pieces) == 20 and max(chunk.hashes.shape[1] for chunk in pieces) <= 100
    assert [chunk.final for chunk in pieces] == [False] * 19 + [True]
    assert not any(chunk.piece for chunk in chunks[: len(chunks) - len(pieces)])


@settings(max_examples=100, deadline=None)
@given(documents=st.lists(texts, min_size=1, max_size=4), shingling=shinglings, piece=st.integers(1, 9))
def test_whole_chunks_give_a_long_documents_distinct_hashes_and_their_repeats(
    documents: list[str], shingling: Shingling, piece: int
) -> None:
    documents = [" ".join(text.split()) for text in documents]
    whole = hash_counts(documents, shingling, folded=False)
    with pieces_of(piece):
        chunks = list(whole_chunks(shingle_chunks(documents, shingling, 7)))
    for chunk in chunks:
        assert not chunk.piece
        for row, hashes, count in zip(chunk.rows, chunk.hashes, chunk.counts, strict=True):
            if chunk.repeats is None:
                assert Counter(hashes[:count].tolist()) == whole[row]
            else:
                assert (hashes[1:count] > hashes[: count - 1]).all()  # sorted, distinct
                assert dict(zip(hashes[:count].tolist(), chunk.repeats.tolist(), strict=True)) == whole[row]
    assert sorted(row for chunk in chunks for row in chunk.rows.tolist()) == list(range(len(documents)))
