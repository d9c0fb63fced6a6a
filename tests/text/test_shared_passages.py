"""Shared passages: each one really occurs in both texts, none overlap, and none that is long enough is missed."""

from hypothesis import example, given, settings
from hypothesis import strategies as st

from stream_dedup.text.shared_passages import Passage, shared_passages
from stream_dedup.text.word_breaks import WORD_SPANS

#: A small vocabulary, so that random texts share runs of words often.
_WORDS = st.lists(st.sampled_from(["flat", "park", "near", "the", "rent", "lift"]), max_size=14)


def _words(text: str, start: int, end: int) -> list[str]:
    """The words of ``text[start:end]``: whitespace-separated runs, a character of Chinese or Thai a word alone."""
    return WORD_SPANS.findall(text[start:end])


def _contains(words: list[str], run: list[str]) -> bool:
    return any(words[i : i + len(run)] == run for i in range(len(words) - len(run) + 1))


def _common_runs(a: list[str], b: list[str], free_a: set[int], free_b: set[int], length: int) -> list[tuple[int, int]]:
    """Brute force: every (i, j) where ``length`` equal words start, all of them unmarked in both texts."""
    return [
        (i, j)
        for i in range(len(a) - length + 1)
        for j in range(len(b) - length + 1)
        if a[i : i + length] == b[j : j + length] and all(i + t in free_a and j + t in free_b for t in range(length))
    ]


def _word_indices(text: str, start: int, end: int) -> set[int]:
    """Indices of the words of ``text`` inside characters ``[start, end)``."""
    before = len(text[:start].split())
    return set(range(before, before + len(_words(text, start, end))))


def test_a_near_copy_shows_its_shared_sentences() -> None:
    a = "sunny flat near the park with a lift, rent 900 euro, no agencies please"
    b = "rent 950 euro: sunny flat near the park with a lift, no agencies please"
    shown = [(a[p.a_start : p.a_end], b[p.b_start : p.b_end]) for p in shared_passages(a, b)]
    assert shown == [("sunny flat near the park with a lift,", "sunny flat near the park with a lift,")]
    assert [a[p.a_start : p.a_end] for p in shared_passages(a, b, min_words=2)] == [
        "sunny flat near the park with a lift,",
        "no agencies please",
    ]


def test_a_chinese_near_copy_shows_the_passages_around_its_edit() -> None:
    """A paragraph of a script written without spaces is not one word that an edit makes differ."""
    a = "流处理系统每天需要处理数以亿计的文档，其中有相当一部分是近似重复的内容"
    b = "流处理系统每天需要处理数以万计的文档，其中有相当一部分是近似重复的内容"
    shown = [(a[p.a_start : p.a_end], b[p.b_start : p.b_end]) for p in shared_passages(a, b)]
    assert shown == [(a[14:], b[14:]), (a[:13], b[:13])]


def test_short_texts_share_their_whole_text() -> None:
    assert shared_passages("studio", "studio") == [Passage(0, 6, 0, 6, 1)]
    assert shared_passages("quiet studio", "a quiet studio") == [Passage(0, 12, 2, 14, 2)]


def test_nothing_is_shared_with_an_empty_text() -> None:
    assert shared_passages("", "flat near the park") == []
    assert shared_passages("   ", "   ") == []


def test_a_repeated_phrase_is_tiled_once_per_occurrence_in_the_other_text() -> None:
    a = "near the park near the park near the park"
    b = "near the park"
    passages = shared_passages(a, b, min_words=3)
    assert [(p.a_start, p.b_start, p.words) for p in passages] == [(0, 0, 3)]


def test_unicode_and_right_to_left_words_are_matched_exactly() -> None:
    a = "דירה יפה ליד הפארק, שקט מאוד — straße 3"
    b = "למכירה: דירה יפה ליד הפארק, שקט מאוד — straße 3"
    [passage] = shared_passages(a, b)
    assert a[passage.a_start : passage.a_end] == a
    assert b[passage.b_start : passage.b_end] == a


@settings(max_examples=300, deadline=None)
@given(_WORDS, _WORDS, st.integers(min_value=1, max_value=4))
def test_tiling_matches_brute_force(a_words: list[str], b_words: list[str], min_words: int) -> None:
    a, b = " ".join(a_words), "  ".join(b_words)
    passages = shared_passages(a, b, min_words)
    shortest = max(1, min(min_words, len(a_words), len(b_words)))
    used_a: set[int] = set()
    used_b: set[int] = set()
    for p in passages:
        assert _words(a, p.a_start, p.a_end) == _words(b, p.b_start, p.b_end)
        assert len(_words(a, p.a_start, p.a_end)) == p.words >= shortest
        in_a, in_b = _word_indices(a, p.a_start, p.a_end), _word_indices(b, p.b_start, p.b_end)
        assert not in_a & used_a and not in_b & used_b, "passages overlap"
        used_a |= in_a
        used_b |= in_b
    assert [p.words for p in passages] == sorted((p.words for p in passages), reverse=True)
    everything_a, everything_b = set(range(len(a_words))), set(range(len(b_words)))
    if a_words and b_words:
        longest = max(
            (
                n
                for n in range(1, min(len(a_words), len(b_words)) + 1)
                if _common_runs(a_words, b_words, everything_a, everything_b, n)
            ),
            default=0,
        )
        assert (passages[0].words if passages else 0) == (longest if longest >= shortest else 0)
    left_a, left_b = everything_a - used_a, everything_b - used_b
    assert not (a_words and b_words and _common_runs(a_words, b_words, left_a, left_b, shortest)), "a run was missed"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60), st.text(max_size=60), st.integers(min_value=1, max_value=5))
@example("中 文 x y", "中文 x y", 2)  # the same words, spaced otherwise
def test_every_passage_occurs_in_both_texts(a: str, b: str, min_words: int) -> None:
    for p in shared_passages(a, b, min_words):
        assert _words(a, p.a_start, p.a_end) == _words(b, p.b_start, p.b_end)
        assert not a[p.a_start].isspace() and not a[p.a_end - 1].isspace()
        shown = _words(a, p.a_start, p.a_end)
        assert _contains(_words(a, 0, len(a)), shown) and _contains(_words(b, 0, len(b)), shown)
