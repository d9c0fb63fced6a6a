"""A document's id and text under a field name or a JSON Pointer into nested objects and arrays (RFC 6901)."""

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from stream_dedup.engine.field_paths import MISSING, check_field_setting, find_field
from stream_dedup.errors import ConfigError

DOCUMENT: dict[str, Any] = {
    "text": "top",
    "a.b": "a name with a dot",
    "payload": {"body": "nested", "tags": ["x", "y"], "a/b": "slash", "m~n": "tilde", "": "empty name"},
    "pages": [{"text": "first"}, {"text": "second"}],
}


@pytest.mark.parametrize(
    ("field", "found"),
    [
        ("text", "top"),
        ("a.b", "a name with a dot"),  # a name is never split at dots
        ("/text", "top"),
        ("/payload/body", "nested"),
        ("/payload/tags/1", "y"),
        ("/pages/0/text", "first"),
        ("/payload/a~1b", "slash"),
        ("/payload/m~0n", "tilde"),
        ("/payload/", "empty name"),
        ("/payload", DOCUMENT["payload"]),
    ],
)
def test_a_field_or_pointer_finds_its_value(field: str, found: object) -> None:
    assert find_field(DOCUMENT, field) == found


@pytest.mark.parametrize(
    "field",
    [
        "missing",
        "/missing",
        "/payload/missing",
        "/payload/body/deeper",
        "/pages/2/text",
        "/pages/01/text",
        "/pages/-/text",
        "/pages/+1/text",
        "/payload/tags/١",
        "payload/body",
        "/a.b/c",
    ],
)
def test_nothing_where_a_field_or_pointer_leads_nowhere(field: str) -> None:
    assert find_field(DOCUMENT, field) is MISSING


@pytest.mark.parametrize("field", ["/a~", "/a~2b", "/~/x", "/ok/~~0"])
def test_a_malformed_pointer_is_a_settings_error_naming_the_setting(field: str) -> None:
    with pytest.raises(ConfigError, match=r"text_field.*is not a JSON Pointer") as raised:
        check_field_setting("text_field", field)
    assert raised.value.setting == "text_field"


def test_an_empty_setting_is_refused_and_names_with_tildes_need_no_escape_outside_a_pointer() -> None:
    with pytest.raises(ConfigError, match="must not be empty"):
        check_field_setting("id_field", "")
    check_field_setting("id_field", "a~b")
    assert find_field({"a~b": 1}, "a~b") == 1


def _escaped(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


@given(
    names=st.lists(st.text(max_size=6), min_size=1, max_size=5),
    value=st.one_of(st.text(), st.integers(), st.none()),
)
def test_any_nesting_is_found_by_its_escaped_pointer(names: list[str], value: object) -> None:
    document: object = value
    for name in reversed(names):
        document = {name: document}
    assert isinstance(document, dict)
    pointer = "".join("/" + _escaped(name) for name in names)
    check_field_setting("text_field", pointer)
    assert find_field(document, pointer) == value
