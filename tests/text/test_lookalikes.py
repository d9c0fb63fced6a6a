"""Lookalike letters of other scripts fold to the Latin letter they look like, and change nothing else.

What must hold: a copy disguised by such letters is found; text of one
script alone keeps exactly the similarities it had (checked against the
shingle sets made without folding, not against the table); the default
leaves every text, and every index's fingerprint, as it was.
"""

import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stream_dedup.cli.settings_sources import resolve_settings
from stream_dedup.config import DetectionConfig
from stream_dedup.engine import Detector
from stream_dedup.text import Folding, Shingling, normalize, shingle_set
from stream_dedup.text.lookalikes import LOOKALIKES

ON = Folding(fold_lookalikes=True)
#: Latin letters and the Cyrillic letters (a, e, o, p, c, x, y, i) that spammers put in their place.
DISGUISE = str.maketrans("aeopcxyi", "\u0430\u0435\u043e\u0440\u0441\u0445\u0443\u0456")
PROSE = (
    "Spacious two-bedroom apartment close to the city centre, with a bright open kitchen, a quiet "
    "courtyard and a private parking place. Available from the first of the month, pets welcome, "
    "viewings every day except Sunday; call the owner directly for an appointment."
)


def jaccard(left: set[str], right: set[str]) -> float:
    return len(left & right) / len(left | right)


def script(letter: str) -> str:
    return unicodedata.name(letter).split()[0]


@pytest.mark.parametrize("code", sorted(LOOKALIKES), ids=lambda code: f"U+{code:04X}")
def test_each_folded_letter_is_a_letter_of_another_script_that_folding_would_otherwise_keep(code: int) -> None:
    letter = chr(code)
    assert not letter.isascii() and unicodedata.category(letter).startswith("L")
    assert script(letter) != "LATIN"
    # What fold() sees after NFKC and casefolding: a letter either would change is never reached.
    assert unicodedata.normalize("NFKC", letter) == letter and letter.casefold() == letter
    assert LOOKALIKES[code] in "abcdefghijklmnopqrstuvwxyz"


def test_no_script_has_two_letters_folding_to_the_same_latin_letter() -> None:
    targets = [(script(chr(code)), latin) for code, latin in LOOKALIKES.items()]
    assert len(set(targets)) == len(targets)


def test_a_disguised_copy_folds_to_its_original_and_is_found() -> None:
    disguised = PROSE.translate(DISGUISE)
    assert disguised != PROSE and disguised.lower() != PROSE.lower()
    assert normalize(disguised, ON) == normalize(PROSE, ON)
    shingling = Shingling()
    apart = jaccard(shingle_set(normalize(PROSE), shingling), shingle_set(normalize(disguised), shingling))
    assert apart < 0.1, "unfolded, the disguise leaves almost no shingle in common"

    def verdicts(config: DetectionConfig) -> list[str]:
        return [v.verdict for v in Detector(config).process(["original", "copy"], [PROSE, disguised])]

    assert verdicts(DetectionConfig(fold_lookalikes=True)) == ["unique", "duplicate"]
    assert verdicts(DetectionConfig()) == ["unique", "unique"]


@pytest.mark.parametrize("text", ["sale", "big sale", "Cheap phone", "apex"])
def test_short_disguised_texts_are_found_as_brute_force_on_folded_text_says(text: str) -> None:
    """One or two words: a single shingle or a few, where one disguised letter changes them all."""
    disguised = text.translate(DISGUISE)
    assert disguised != text
    shingling = Shingling()
    exact = jaccard(shingle_set(normalize(text, ON), shingling), shingle_set(normalize(disguised, ON), shingling))
    assert exact == 1.0
    config = DetectionConfig(fold_lookalikes=True)
    verdicts = Detector(config).process(["original", "copy"], [text, disguised])
    assert [v.verdict for v in verdicts] == ["unique", "duplicate"] and verdicts[1].duplicate_of == "original"
    assert Detector(DetectionConfig()).process(["original", "copy"], [text, disguised])[1].verdict == "unique"


def test_upper_case_disguises_are_folded_through_casefolding() -> None:
    assert normalize("\u0410\u0412\u0421 OFFER", ON) == normalize("aBc offer", ON).replace("b", "\u0432")


def alphabet(first: int, last: int) -> list[str]:
    return [chr(c) for c in range(first, last + 1) if unicodedata.category(chr(c)).startswith(("L", "M"))]


SCRIPTS = {
    "Greek": alphabet(0x0370, 0x03FF),
    "Cyrillic": alphabet(0x0400, 0x052F),
    "Armenian": alphabet(0x0531, 0x058A),
    "Cherokee": alphabet(0x13A0, 0x13FD) + alphabet(0xAB70, 0xABBF),
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_text_of_one_script_keeps_its_exact_similarities(name: str, data: st.DataObject) -> None:
    """One-to-one within a script: the Jaccard of any two such texts is what it was unfolded.

    The second text is the first edited, so that they share shingles, and
    mostly with letters that fold: two that fold alike would meet there.
    """
    letters = SCRIPTS[name]
    folded = [letter for letter in letters if ord(letter) in LOOKALIKES]
    letter = st.sampled_from(folded) | st.sampled_from(letters) | st.just(" ")
    drawn = data.draw(st.lists(letter, min_size=1, max_size=40))
    edited = list(drawn)
    for position, replacement in data.draw(st.lists(st.tuples(st.integers(0, len(drawn) - 1), letter), max_size=6)):
        edited[position] = replacement
    first, second = "".join(drawn), "".join(edited)
    shingling = Shingling("char", 3)

    def similarity(folding: Folding) -> float:
        return jaccard(
            shingle_set(normalize(first, folding) or "-", shingling),
            shingle_set(normalize(second, folding) or "-", shingling),
        )

    assert similarity(ON) == similarity(Folding())


@given(st.text())
def test_off_by_default_and_ascii_is_untouched(text: str) -> None:
    assert normalize(text) == normalize(text, Folding(fold_lookalikes=False))
    if text.isascii():
        assert normalize(text, ON) == normalize(text)


def test_a_signature_parameter_named_only_when_on() -> None:
    """Indexes made with it off (all of them, before it existed) keep their fingerprints."""
    off, on = DetectionConfig(), DetectionConfig(fold_lookalikes=True)
    assert "fold_lookalikes" not in off.signature_parameters()
    assert on.signature_parameters()["fold_lookalikes"] is True
    assert on.signature_fingerprint() != off.signature_fingerprint() and on.fingerprint() != off.fingerprint()


def test_the_stage_reads_the_setting_and_its_signers_and_input_reading_follow() -> None:
    settings_ = resolve_settings({}, {"STREAM_DEDUP_FOLD_LOOKALIKES": "true"})
    assert settings_.detection.fold_lookalikes is True
    assert settings_.input_reading().folding == ON
    assert settings_.detection.shingling().folding == ON
