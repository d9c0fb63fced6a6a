"""Where a document's id and text sit in its JSON object: a field name, or a JSON Pointer into nested values.

Records of real pipelines often nest them: ``{"payload": {"body": ...}}``, a
change-data-capture envelope's ``{"after": {...}}``, a crawler's
``{"page": {"content": ...}}``. A setting (``id_field``, ``text_field``,
``--id-field``, ``--text-field``) that starts with ``/`` is a JSON Pointer
(RFC 6901): ``/payload/body``, ``/pages/0/text`` (a decimal index into an
array), with ``~1`` standing for ``/`` and ``~0`` for ``~`` inside a name.
Any other setting is a top-level field name taken as it is, as it always
was: a name holding a dot is never split.
"""

import functools
from typing import Any

from stream_dedup.errors import ConfigError


class _Missing:
    """What :func:`find_field` returns when the object has nothing where the setting points."""


MISSING = _Missing()


def check_field_setting(setting: str, value: str) -> None:
    """Raise :class:`ConfigError` naming ``setting`` unless ``value`` is a field name or a well-formed pointer."""
    if not value:
        raise ConfigError(setting, "must not be empty")
    try:
        _steps(value)
    except ValueError as error:
        raise ConfigError(setting, f"{value!r} is not a JSON Pointer: {error}") from None


def find_field(document: dict[str, Any], field: str) -> object:
    """The value ``field`` names in ``document`` (see the module docstring), or :data:`MISSING`.

    ``field`` is assumed checked (:func:`check_field_setting`): one that is not
    a well-formed pointer raises ValueError.
    """
    if not field.startswith("/"):
        return document.get(field, MISSING)
    value: object = document
    for step in _steps(field):
        if isinstance(value, dict):
            value = value.get(step, MISSING)
        elif isinstance(value, list) and _is_index(step) and int(step) < len(value):
            value = value[int(step)]
        else:
            return MISSING
        if value is MISSING:
            return MISSING
    return value


@functools.lru_cache(maxsize=64)
def _steps(field: str) -> tuple[str, ...]:
    """The names a pointer steps through (one, the name itself, for a field name); ValueError if malformed."""
    if not field.startswith("/"):
        return (field,)
    steps = []
    for part in field[1:].split("/"):
        if "~" in part.replace("~0", "").replace("~1", ""):
            raise ValueError(f"'~' in {part!r} must be followed by 0 (for '~') or 1 (for '/')")
        steps.append(part.replace("~1", "/").replace("~0", "~"))
    return tuple(steps)


def _is_index(step: str) -> bool:
    """An array index as RFC 6901 writes it: decimal digits, no leading zero."""
    return step.isascii() and step.isdigit() and (step == "0" or not step.startswith("0"))
