"""The ranges numeric settings must lie in: one check each for numbers and whole numbers, one message.

A value outside them (NaN, infinity, ``1e300``) passes a bare ``> 0`` test
and fails later, far from its cause: an ``OverflowError`` in a timer or a
conversion, a broker refusing a topic config after other topics were
created. Checked when the settings are built, it stops start-up naming the
setting and the range.
"""

from stream_dedup.errors import ConfigError


def check_number(setting: str, value: object, low: float, high: float, why: str = "") -> None:
    """Refuse ``value`` unless it is a number from ``low`` to ``high`` (NaN never is); ``why`` explains the bounds."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise ConfigError(setting, f"must be a number from {low} to {high}{_because(why)}, got {value!r}")


def check_whole_number(setting: str, value: object, low: int, high: int, why: str = "") -> None:
    """Refuse ``value`` unless it is a whole number from ``low`` to ``high``; ``why`` explains the bounds."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ConfigError(setting, f"must be a whole number from {low} to {high}{_because(why)}, got {value!r}")


def _because(why: str) -> str:
    return f" ({why})" if why else ""
