import pytest

from stream_dedup.errors import InputError
from stream_dedup.text import normalize, normalize_all


def test_compatibility_forms_case_and_whitespace_are_folded() -> None:
    assert normalize("  ＦＵＬＬ-width\tStraße \n\n ﬁne  ") == "full-width strasse fine"


def test_punctuation_is_stripped_only_when_asked() -> None:
    assert normalize("Hello, world! «quoted»") == "hello, world! «quoted»"
    assert normalize("Hello, world! «quoted»", strip_punctuation=True) == "hello world quoted"


def test_text_empty_after_normalisation_is_bad_input_naming_its_position() -> None:
    with pytest.raises(InputError, match="position 1"):
        normalize_all(["fine", " \t\n "])
    with pytest.raises(InputError):
        normalize_all(["...!"], strip_punctuation=True)
