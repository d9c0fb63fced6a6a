"""Layering the worker's settings: flags over ``STREAM_DEDUP_*`` variables over a TOML file over defaults.

Every setting has one name used everywhere: the file key (``batch_size``),
the flag (``--batch-size``) and the variable (``STREAM_DEDUP_BATCH_SIZE``).
Values from the environment and the file are converted to the setting's type
here, so a typo or a bad value stops start-up with the setting's name and
where the value came from. An unknown ``STREAM_DEDUP_*`` variable or file key
is an error too: a misspelt setting silently ignored is the worst kind.
"""

import tomllib
import types
import typing
from collections.abc import Mapping
from dataclasses import fields
from pathlib import Path
from typing import Any

from stream_dedup.config import DetectionConfig
from stream_dedup.errors import ConfigError
from stream_dedup.worker.settings import WorkerSettings

ENV_PREFIX = "STREAM_DEDUP_"
#: The variable naming the config file (like the ``--config`` flag).
CONFIG_VARIABLE = "STREAM_DEDUP_CONFIG"
#: What a setting's value may be in the file: an array, a table or a date is none of them (int() and float()
#: raised TypeError on those, a traceback, and str() turned ``snapshot_dir = ["a"]`` into a directory ``['a']``).
_SCALARS = (str, int, float, bool)
_TRUE = {"1", "true", "yes", "on"}
#: Settings whose values no message shows (the passwords).
_SECRETS = frozenset(setting.name for setting in fields(WorkerSettings) if not setting.repr)
_FALSE = {"0", "false", "no", "off"}


def setting_types() -> dict[str, Any]:
    """Every setting's name and type: the worker's and the detection ones."""
    types_ = {f.name: f.type for f in fields(DetectionConfig)}
    hints = typing.get_type_hints(WorkerSettings)
    types_.update({f.name: hints[f.name] for f in fields(WorkerSettings) if f.name != "detection"})
    return types_


def resolve_settings(
    flags: Mapping[str, Any], environ: Mapping[str, str], config_file: str | None = None
) -> WorkerSettings:
    """Build and validate the settings; ``flags`` holds only the flags given (others absent or ``None``)."""
    return layered_settings(flags, environ, config_file)[0]


def layered_settings(
    flags: Mapping[str, Any], environ: Mapping[str, str], config_file: str | None = None
) -> tuple[WorkerSettings, dict[str, str]]:
    """The settings (as :func:`resolve_settings`), and where each one given explicitly came from.

    The origins (``flag --bands``, ``environment variable STREAM_DEDUP_BANDS``,
    ``config file stage.toml``) are those of the values that won; a setting
    left at its default has none. A value that means "unset" (an empty
    variable for an optional setting) is not counted as given.
    """
    types_ = setting_types()
    values: dict[str, Any] = {}
    origins: dict[str, str] = {}
    path = config_file or environ.get(CONFIG_VARIABLE)
    if path:
        for name, raw in _read_file(Path(path)).items():
            if name not in types_:
                raise ConfigError(name, f"unknown setting in {path}")
            values[name] = _convert(name, raw, types_[name], f"{path}")
            origins[name] = f"config file {path}"
    for variable, raw in environ.items():
        if not variable.startswith(ENV_PREFIX) or variable == CONFIG_VARIABLE:
            continue
        name = variable[len(ENV_PREFIX) :].lower()
        if name not in types_:
            raise ConfigError(name, f"unknown setting (environment variable {variable})")
        origins[name] = f"environment variable {variable}"
        values[name] = _convert(name, raw, types_[name], origins[name])
    for name, value in flags.items():
        if name in types_ and value is not None:
            origins[name] = f"flag --{name.replace('_', '-')}"
            values[name] = _convert(name, value, types_[name], origins[name])
    detection_names = {f.name for f in fields(DetectionConfig)}
    detection = DetectionConfig(**{k: v for k, v in values.items() if k in detection_names})
    settings = WorkerSettings(detection=detection, **{k: v for k, v in values.items() if k not in detection_names})
    return settings, {name: origin for name, origin in origins.items() if values[name] is not None}


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as source:
            return tomllib.load(source)
    except OSError as error:
        raise ConfigError("config", f"cannot read the config file {path}: {error.strerror}") from error
    except tomllib.TOMLDecodeError as error:
        raise ConfigError("config", f"{path} is not valid TOML: {error}") from error
    except UnicodeDecodeError as error:  # TOML is UTF-8: a Latin-1 or UTF-16 file fails before parsing
        raise ConfigError(
            "config", f"{path} is not UTF-8 text (byte {error.start}: {error.reason}): save it as UTF-8"
        ) from error


def _convert(name: str, raw: Any, kind: Any, origin: str) -> Any:
    """``raw`` (a string from the environment, or a TOML or flag value) as a value of type ``kind``."""
    if not isinstance(raw, _SCALARS):
        written = _toml_kind(raw, "(not shown)" if name in _SECRETS else None)
        raise ConfigError(name, f"must be one {_type_name(kind)}, not the TOML {written} (from {origin})")
    optional = isinstance(kind, types.UnionType) or typing.get_origin(kind) is typing.Union
    options = typing.get_args(kind) if optional else ()
    if options:
        if isinstance(raw, str) and raw.strip().lower() in ("", "none", "null"):
            return None
        kind = next(option for option in options if option is not type(None))
    if typing.get_origin(kind) is typing.Literal:
        return raw  # the dataclass checks the choices and lists them
    if kind is str and not isinstance(raw, str):
        # Only the file gives anything but text. str() would make a setting of another value than the one
        # written: ``sasl_password = 0x1F`` the password "31", ``snapshot_dir = true`` a directory "True".
        written = f"a TOML {type(raw).__name__} (not shown)" if name in _SECRETS else repr(raw)
        raise ConfigError(name, f"must be text, in quotes in the file: got {written} (from {origin})")
    if isinstance(raw, str) and "\0" in raw:
        # Only the file can hold one ("\u0000"): no path, host name or password can, and the calls below
        # (os.mkdir for snapshot_dir, the socket for metrics_host) raised ValueError and TypeError on it.
        raise ConfigError(name, f"must not hold a NUL character (\\u0000) (from {origin})")
    if kind is int and isinstance(raw, float) and not raw.is_integer():
        # A TOML float: int() would cut 2.7 to 2 (and fail on inf with an OverflowError).
        raise ConfigError(name, f"must be a whole number, got {raw!r} (from {origin})")
    try:
        if kind is bool:
            return _boolean(raw)
        if kind is int and not isinstance(raw, bool):
            return int(raw)
        if kind is float and not isinstance(raw, bool):
            return float(raw)
        if kind is str:
            return str(raw)
    except ValueError:
        pass
    raise ConfigError(name, f"expected {getattr(kind, '__name__', kind)}, got {raw!r} (from {origin})")


def _type_name(kind: Any) -> str:
    """How a message names a setting's type: ``int``, ``float``, ``bool``, or ``str`` for text and choices."""
    if typing.get_origin(kind) is not typing.Literal:
        kind = next((option for option in typing.get_args(kind) if option is not type(None)), kind)
    return "str" if typing.get_origin(kind) is typing.Literal else str(getattr(kind, "__name__", kind))


def _toml_kind(raw: Any, shown: str | None = None) -> str:
    """A value that is no single setting value as TOML calls it and wrote it (``shown`` instead, for a secret):
    an array, a table, a date or time."""
    if isinstance(raw, list):
        return f"array {shown or repr(raw)}"
    return f"table {shown or repr(raw)}" if isinstance(raw, dict) else f"date or time {shown or raw}"


def _boolean(raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in _TRUE | _FALSE:
        return text in _TRUE
    raise ValueError(raw)
