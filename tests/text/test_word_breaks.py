"""Word shingles of scripts written without spaces: each of their characters is a word.

The truth here is computed apart from the package: for text of these scripts
alone, word k-shingles are the k-grams of its characters other than spaces.
Before, a paragraph of Chinese was one word, and a near-copy with one
character changed shared no word shingle with its original.
"""

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector
from stream_dedup.text import normalize, shingle_set
from stream_dedup.text.hashing import U64, fmix64, prefix_sums, span_values
from stream_dedup.text.shingles import _word_tokens
from stream_dedup.text.word_breaks import split_words

#: Real paragraphs of Chinese, Japanese and Thai (Thai puts spaces between phrases only), two of each.
PARAGRAPHS = (
    "流处理系统每天需要处理数以亿计的文档，其中有相当一部分是近似重复的内容，例如转载的新闻、稍作修改的广告"
    "以及被多次抓取的网页。如果不加以识别，这些重复内容会浪费存储空间，降低搜索质量，并且在训练语言模型时导致"
    "模型记住特定的段落。",
    "杭州西湖位于浙江省杭州市西部，是中国著名的风景名胜区。湖的三面环山，面积约六点三九平方千米，湖中有孤山、"
    "白堤和苏堤等景点。每年春天，苏堤两岸桃红柳绿，吸引大量游客前来观光。",
    "東京の朝は早い。まだ日が昇る前から、駅には通勤する人々が集まり始める。電車は数分おきに到着し、乗客を乗せて"
    "はすぐに次の駅へと向かっていく。多くの人は車内でスマートフォンを見たり、本を読んだりして時間を過ごしている。",
    "日本の伝統的な料理である和食は、二千十三年にユネスコの無形文化遺産に登録された。季節の食材を生かし、"
    "見た目の美しさを大切にすることが特徴であり、一汁三菜を基本とする献立が広く知られている。",
    "กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทยและเป็นศูนย์กลางทางเศรษฐกิจ การศึกษา และวัฒนธรรม "
    "มีประชากรอาศัยอยู่หลายล้านคน และมีนักท่องเที่ยวจากทั่วโลกเดินทางมาเยี่ยมชมวัดวาอารามและตลาดน้ำทุกปี",
    "การออกกำลังกายอย่างสม่ำเสมอช่วยให้ร่างกายแข็งแรงและลดความเสี่ยงของโรคหลายชนิด "
    "ผู้เชี่ยวชาญแนะนำให้ออกกำลังกายอย่างน้อยวันละสามสิบนาที และควรดื่มน้ำให้เพียงพอในแต่ละวัน",
)


def character_grams(text: str, size: int) -> set[str]:
    """Word ``size``-shingles of text of these scripts alone, by hand: the ``size``-grams of its non-spaces."""
    letters = normalize(text).replace(" ", "")
    return {letters[i : i + size] for i in range(len(letters) - size + 1)}


def edited(text: str, rng: random.Random) -> str:
    """``text`` with one character changed (into its neighbour), away from its ends."""
    at = rng.randrange(20, len(text) - 20)
    return text[:at] + text[at + 1] + text[at + 1 :]


def jaccard(a: str, b: str) -> float:
    first, second = character_grams(a, 5), character_grams(b, 5)
    return len(first & second) / len(first | second)


def test_scripts_without_spaces_break_into_a_word_a_character_and_the_others_at_spaces() -> None:
    assert split_words("中文。abc def") == ["中", "文", "。abc", "def"]
    assert split_words("東京の朝") == ["東", "京", "の", "朝"]
    assert split_words("ภาษา ไทย") == ["ภ", "า", "ษ", "า", "ไ", "ท", "ย"]
    assert split_words("한국어 문장") == ["한국어", "문장"]  # Korean is written with spaces
    assert split_words("a  b") == ["a", "", "b"]  # as before: an empty word between two spaces


def test_near_copies_in_chinese_japanese_and_thai_are_found_by_word_shingles_as_brute_force_says() -> None:
    config = DetectionConfig(shingle_unit="word", shingle_size=5)
    rng = random.Random(3)
    copies = [edited(text, rng) for text in PARAGRAPHS]
    texts = [*PARAGRAPHS, *copies]
    verdicts = Detector(config).process([str(i) for i in range(len(texts))], texts)

    # One character changed: 5 of about 100 grams on each side, so each copy lies at 0.88 to 0.94 of its
    # original; the paragraphs lie near 0 of each other.
    similar = [[jaccard(texts[i], texts[j]) for j in range(i)] for i in range(len(texts))]
    assert all(similar[len(PARAGRAPHS) + i][i] >= 0.88 for i in range(len(copies)))
    assert all(s < 0.2 for i, row in enumerate(similar) for j, s in enumerate(row) if j != i - len(PARAGRAPHS))
    assert [v.verdict for v in verdicts] == ["unique"] * len(PARAGRAPHS) + ["duplicate"] * len(copies)
    assert [v.duplicate_of for v in verdicts[len(PARAGRAPHS) :]] == [str(i) for i in range(len(copies))]
    # The exact shingles agree with the brute force's, one for one.
    assert all(len(shingle_set(normalize(t), config.shingling())) == len(character_grams(t, 5)) for t in texts)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet="ab  é中文かกไ한", min_size=1, max_size=30), min_size=1, max_size=5))
def test_the_hashed_words_are_those_split_words_finds_each_hashed_alone(texts: list[str]) -> None:
    codes = np.frombuffer("".join(texts).encode("utf-32-le"), dtype=np.uint32)
    words, counts = _word_tokens(codes, np.array([len(t) for t in texts]))

    expected = []
    for text in texts:
        for word in split_words(text):
            points = np.frombuffer(word.encode("utf-32-le"), dtype=np.uint32).astype(U64) + U64(1)
            value = span_values(prefix_sums(points), np.array([0]), np.array([points.size]))
            expected.append(int(fmix64(value)[0] | U64(1)))
    assert counts.tolist() == [len(split_words(text)) for text in texts]
    assert words.tolist() == expected


def test_every_block_of_the_scripts_without_spaces_breaks_a_character_a_word() -> None:
    """Extensions of those scripts, in blocks of their own, break too: once a run of them was one word."""
    samples = {
        "Bopomofo extended": "ㆠㆡㆢ",
        "Myanmar extended A (Khamti)": "ꩠꩡꩢ",
        "Myanmar extended B (Shan)": "ꧠꧡꧢ",
        "Khmer symbols": "᧠᧡᧢",
        "New Tai Lue": "ᦀᦁᦂ",
        "Tai Tham": "ᨠᨡᨢ",
        "Tai Viet": "ꪀꪁꪂ",
        "Tangut": "𗀀𗀁𗀂",
        "Kana supplement": "𛀁𛀂𛀃",
        "Nushu": "𛅰𛅱𛅲",
        "ideographic iteration and closing marks, number zero": "人々〆〇",
        "Hangzhou numerals and the vertical iteration mark": "〡〢〩〻",
        "CJK radicals supplement": "⺀⺁⺂",
    }
    for block, text in samples.items():
        assert split_words(f"x {text} y") == ["x", *text, "y"], block
