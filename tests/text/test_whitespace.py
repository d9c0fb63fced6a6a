import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.errors import InputError
from stream_dedup.text import Shingling, fold, normalize, shingle_chunks, shingle_set
from stream_dedup.text.whitespace import LAST_WHITESPACE, collapse_whitespace

#: Every kind of whitespace, and characters around and beyond the ones looked up.
_TRICKY = " \t\n\x0b\x0c\r\x1c\x1f\x85\xa0\u1680\u2000\u200a\u200b\u2028\u2029\u202f\u205f\u3000\u3001\x00\x7f\x84ab日"
documents = st.lists(st.text(alphabet=st.sampled_from(_TRICKY)) | st.text(), min_size=1, max_size=8)


def collapsed(texts: list[str], ascii_bytes: bool) -> list[str]:
    joined = "".join(texts)
    if ascii_bytes:
        codes = np.frombuffer(joined.encode("ascii"), dtype=np.uint8)
    else:
        codes = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32)
    out, lengths = collapse_whitespace(codes, np.array([len(t) for t in texts], dtype=np.intp))
    assert lengths.sum() == out.size
    ends = np.cumsum(lengths)
    return ["".join(map(chr, out[end - length : end].tolist())) for end, length in zip(ends, lengths, strict=True)]


@settings(max_examples=300, deadline=None)
@given(texts=documents)
def test_collapsing_code_points_equals_joining_the_split_words(texts: list[str]) -> None:
    expected = [" ".join(t.split()) for t in texts]
    assert collapsed(texts, ascii_bytes=False) == expected
    if "".join(texts).isascii():
        assert collapsed(texts, ascii_bytes=True) == expected


def test_no_code_point_above_the_last_whitespace_is_whitespace() -> None:
    assert chr(LAST_WHITESPACE).isspace()
    assert not any(chr(c).isspace() for c in range(LAST_WHITESPACE + 1, sys.maxunicode + 1))


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(st.text(alphabet=st.sampled_from(_TRICKY), min_size=1), min_size=1, max_size=6))
def test_shingles_of_folded_text_are_those_of_its_normalised_form(texts: list[str]) -> None:
    texts = [t for t in texts if normalize(t)] or ["a"]
    for shingling in (Shingling("char", 3), Shingling("word", 2)):
        folded = hashes_by_row([fold(t) for t in texts], shingling, folded=True)
        assert folded == hashes_by_row([normalize(t) for t in texts], shingling, folded=False)


def hashes_by_row(texts: list[str], shingling: Shingling, folded: bool) -> dict[int, list[int]]:
    return {
        int(row): hashes[:count].tolist()
        for chunk in shingle_chunks(texts, shingling, 1, folded)
        for row, hashes, count in zip(chunk.rows, chunk.hashes, chunk.counts, strict=True)
    }


@pytest.mark.parametrize("unit", ["char", "word"])
def test_a_folded_document_of_whitespace_only_is_bad_input_naming_its_position(unit: str) -> None:
    texts = ["some text", "more text", " \t\u3000\n "]
    with pytest.raises(InputError, match="position 2"):
        list(shingle_chunks(texts, Shingling(unit, 2), 1, folded=True))  # type: ignore[arg-type]


def test_without_folded_the_tokens_are_taken_as_they_are() -> None:
    # A piece fed to an incremental signature keeps its leading space: it is a token of a shingle.
    (chunk,) = shingle_chunks([" x", "x"], Shingling("char", 1), 1)
    assert chunk.counts[np.argsort(chunk.rows)].tolist() == [2, 1]


@settings(max_examples=100, deadline=None)
@given(
    texts=st.lists(st.text(alphabet=st.sampled_from("ab é  "), min_size=1, max_size=12), min_size=1, max_size=6),
    unit=st.sampled_from(["char", "word"]),
    size=st.integers(1, 4),
)
def test_without_folded_even_empty_words_are_tokens(texts: list[str], unit: str, size: int) -> None:
    # Leading, trailing and double spaces make empty words, as str.split(" ") does.
    shingling = Shingling(unit, size)  # type: ignore[arg-type]
    hashes = hashes_by_row(texts, shingling, folded=False)
    for row, text in enumerate(texts):
        assert len(set(hashes[row])) == len(shingle_set(text, shingling))
