"""Flags shared by the commands: settings flags built from the settings' own definitions, and detection flags.

Every setting of :class:`~stream_dedup.worker.settings.WorkerSettings` is
defined once, with its help text; the flags of ``run``, ``watch`` and
``produce-sample`` are made from those definitions, so the three commands
cannot drift apart on how they connect to Kafka.
"""

import argparse
import sys
from collections.abc import Iterable
from dataclasses import MISSING, Field, fields
from typing import Any

from stream_dedup.cli.flag_types import non_empty_text
from stream_dedup.cli.settings_sources import CONFIG_VARIABLE
from stream_dedup.cli.unused_settings import unused_detection_flags
from stream_dedup.config import DetectionConfig
from stream_dedup.worker.settings import ConnectionSettings


def add_connection_options(parser: argparse.ArgumentParser) -> None:
    """``--config`` and a flag per connection setting: what every command that talks to Kafka takes.

    The flags have no defaults (a flag not given must not hide the
    environment and the file); :func:`~stream_dedup.cli.settings_sources.resolve_settings`
    layers them.
    """
    parser.add_argument("--config", type=non_empty_text, help=f"TOML file of settings (or {CONFIG_VARIABLE})")
    add_setting_flags(parser, "kafka connection", fields(ConnectionSettings))


def add_setting_flags(parser: argparse.ArgumentParser, title: str, settings: Iterable[Field[Any]]) -> None:
    """A flag per setting (``batch_size`` -> ``--batch-size``), its help and default from the setting's field."""
    group = parser.add_argument_group(title)
    for setting in settings:
        group.add_argument(
            f"--{setting.name.replace('_', '-')}",
            dest=setting.name,
            metavar=setting.name.upper(),
            help=setting.metadata["help"] + _shown_default(setting),
        )


def _shown_default(setting: Field[Any]) -> str:
    """`` (default X)``, or nothing for a default computed at start-up or left unset (its help says what then)."""
    computed = setting.default is MISSING or setting.default in ("", None)
    return "" if computed else f" (default {setting.default})"


def add_detection_options(parser: argparse.ArgumentParser) -> None:
    """Add the flags of :class:`DetectionConfig`, whose defaults come from the class (each help states it).

    A flag not given is ``None``, so that :func:`given_detection_flags` tells
    it from one given with the default's value, and ``run``'s environment
    and file layers are not hidden by it.
    """
    group = parser.add_argument_group("detection")
    group.add_argument(
        "--method",
        choices=("minhash", "simhash", "combined"),
        help="minhash (default): Jaccard by banded MinHash; simhash: 64-bit SimHash within --max-hamming bits "
        "(8 bytes per document); combined: MinHash matches that SimHash confirms",
    )
    group.add_argument(
        "--threshold",
        type=float,
        help="Jaccard threshold (default 0.8)",
    )
    group.add_argument(
        "--num-perm",
        type=int,
        help="length of the MinHash signature the bands are cut from (default 128)",
    )
    group.add_argument(
        "--sketch-bits",
        type=int,
        help="bits of the one-bit verification sketch kept per document (default 1024 = 128 bytes)",
    )
    group.add_argument(
        "--shingle-size",
        type=int,
        help="characters or words per shingle (default 5)",
    )
    group.add_argument("--shingle-unit", choices=("char", "word"), help="shingles of characters (default) or words")
    group.add_argument("--strip-punctuation", action="store_true", help="delete punctuation before shingling")
    group.add_argument(
        "--ignore-invisible",
        action=argparse.BooleanOptionalAction,
        help="delete invisible characters (zero-width spaces and joiners, soft hyphens, bidi controls, variation "
        "selectors, tags) before shingling (default on; off for indexes made before the setting existed)",
    )
    group.add_argument(
        "--fold-lookalikes",
        action=argparse.BooleanOptionalAction,
        help="fold letters of other scripts that look like Latin ones (Cyrillic a, e, o, p, c; Greek omicron...) "
        "to them before shingling, so that copies disguised by them are found (default off)",
    )
    group.add_argument(
        "--scheme",
        choices=("oph", "classic"),
        help="MinHash scheme (default oph)",
    )
    group.add_argument("--seed", type=int, help="hash seed (default 1)")
    group.add_argument("--bands", type=int, help="LSH bands (with --rows-per-band; default: chosen)")
    group.add_argument("--rows-per-band", type=int, help="signature slots per band")
    group.add_argument(
        "--min-recall",
        type=float,
        help="candidate probability required at the threshold when choosing the banding (default 0.99)",
    )
    group.add_argument(
        "--verification",
        choices=("estimate", "exact"),
        help="verify candidates by signature estimate (default) or exact Jaccard (keeps shingle sets)",
    )
    group.add_argument(
        "--max-bucket-size",
        type=int,
        help="hot-bucket cap (default 64)",
    )
    group.add_argument(
        "--index-slots",
        type=int,
        help="count the hot-bucket cap per slot of content (default 1); sharded indexes need a multiple of shards",
    )
    group.add_argument(
        "--max-hamming",
        type=int,
        help="simhash and combined: largest Hamming distance (of 64 bits) of a duplicate (default 3)",
    )
    group.add_argument(
        "--simhash-weighting",
        choices=("set", "frequency"),
        help="simhash and combined: count each distinct shingle once (set, default) or every occurrence",
    )
    group.add_argument("--max-documents", type=int, help="retention: keep about this many newest documents")
    group.add_argument("--max-age-seconds", type=float, help="retention: forget documents older than this")
    _add_containment_options(parser)
    parser.set_defaults(**{setting.name: None for setting in fields(DetectionConfig)})


def _add_containment_options(parser: argparse.ArgumentParser) -> None:
    """The containment settings' flags (seed 002's containment; off unless ``--containment-threshold``)."""
    group = parser.add_argument_group("containment (methods minhash and combined)")
    group.add_argument(
        "--containment-threshold",
        type=float,
        help="report a document that is not a near-duplicate as contained when an earlier one holds at least "
        "this share of its shingles, or as containing one when it holds that share of an earlier one's "
        "(default off)",
    )
    group.add_argument(
        "--containment-max-ratio",
        type=float,
        help="pairs whose shingle-set sizes differ by a larger factor are not judged (default 2)",
    )
    group.add_argument(
        "--containment-min-recall",
        type=float,
        help="candidate probability required for a pair at the containment threshold, sizes "
        "--containment-max-ratio apart, when the containment banding is chosen (default 0.9)",
    )
    group.add_argument(
        "--containment-bands",
        type=int,
        help="the index's bands with containment on, near-duplicates found through them too "
        "(with --containment-rows-per-band; default: chosen)",
    )
    group.add_argument("--containment-rows-per-band", type=int, help="signature slots per containment band")


def config_from(args: argparse.Namespace) -> DetectionConfig:
    """Build and validate the configuration (raises ``ConfigError`` naming the setting).

    Each flag given that the configuration does not read (``--bands`` with
    ``--method simhash``) is named on standard error: it changes no verdict.
    """
    given = given_detection_flags(args)
    config = DetectionConfig(**given)
    for setting in unused_detection_flags(config, given):
        print(f"stream-dedup: warning: {setting}", file=sys.stderr)
    return config


def given_detection_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The detection settings given as flags, by name; those left out take the class's defaults.

    Every flag is named after its setting (``--num-perm`` -> ``num_perm``), so
    the settings are picked from the parsed flags by field name.
    """
    given = vars(args)
    return {f.name: given[f.name] for f in fields(DetectionConfig) if given.get(f.name) is not None}
