"""Settings given that the configuration does not read are each reported once, naming where they came from.

Every case is given the three ways a setting can be (a flag of ``run``, a
``STREAM_DEDUP_*`` variable, a key of the TOML file) and must be reported the
same way by each; settings the configuration reads, and defaults, never are.
"""

import json
from pathlib import Path
from typing import Any

import pytest

from stream_dedup.cli import run_command
from stream_dedup.cli.main import build_parser, main
from stream_dedup.cli.settings_sources import layered_settings
from stream_dedup.cli.unused_settings import UnusedSetting, unused_settings
from stream_dedup.ops.runtime import MetricsEvents
from stream_dedup.worker.settings import WorkerSettings

SOURCES = ("flag", "environment", "file")

#: Settings given (besides any needed to make them valid), the ones reported, and what their reason says.
IGNORED: list[tuple[dict[str, Any], set[str], str]] = [
    ({"method": "simhash", "bands": 4, "rows_per_band": 8}, {"bands", "rows_per_band"}, "method is simhash"),
    ({"method": "simhash", "threshold": 0.9, "num_perm": 64}, {"threshold", "num_perm"}, "method is simhash"),
    ({"method": "simhash", "verification": "estimate"}, {"verification"}, "methods minhash and combined only"),
    ({"method": "simhash", "min_recall": 0.9, "scheme": "classic"}, {"min_recall", "scheme"}, "method is simhash"),
    ({"max_hamming": 5, "simhash_weighting": "frequency"}, {"max_hamming", "simhash_weighting"}, "method is minhash"),
    (
        {"containment_bands": 16, "containment_rows_per_band": 8, "containment_max_ratio": 3},
        {"containment_bands", "containment_rows_per_band", "containment_max_ratio"},
        "containment_threshold is not set",
    ),
    ({"containment_min_recall": 0.8}, {"containment_min_recall"}, "the containment search only"),
    ({"bands": 8, "rows_per_band": 8, "min_recall": 0.9}, {"min_recall"}, "bands and rows_per_band set it"),
    ({"method": "simhash", "text_cache_mb": 64}, {"text_cache_mb"}, "method is simhash"),
    ({"verification": "exact", "text_spool_mb": 0}, {"text_spool_mb"}, "verification is exact"),
    ({"ssl_cafile": "/etc/ca.pem"}, {"ssl_cafile"}, "security_protocol is PLAINTEXT: the connection is not encrypted"),
    (
        {"sasl_username": "stage", "sasl_password": "hunter2"},
        {"sasl_username", "sasl_password"},
        "security_protocol is PLAINTEXT: the connection is not authenticated",
    ),
    (
        {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "PLAIN",
            "sasl_username": "stage",
            "sasl_password": "hunter2",
            "ssl_certfile": "/etc/client.pem",
        },
        {"ssl_certfile"},
        "security_protocol is SASL_PLAINTEXT: the connection is not encrypted",
    ),
    (
        {"security_protocol": "SASL_SSL", "sasl_mechanism": "GSSAPI", "sasl_username": "stage"},
        {"sasl_username"},
        "sasl_mechanism is GSSAPI",
    ),
    (
        {"security_protocol": "SSL", "ssl_keyfile": "/etc/client.key", "ssl_password": "hunter2"},
        {"ssl_keyfile", "ssl_password"},
        "ssl_certfile is not set",
    ),
    ({"metrics_port": 0, "metrics_host": "0.0.0.0"}, {"metrics_host"}, "metrics_port is 0"),
    ({"input_format": "text", "id_field": "/meta/id"}, {"id_field"}, "input_format is text"),
    (
        {"sequenced_topic": "seq", "answers_topic": "answers", "shards": 1, "shard_index": 0},
        {"sequenced_topic", "answers_topic", "shards", "shard_index"},
        "role is all (one process)",
    ),
    ({"role": "judge", "shards": 2, "index_slots": 2, "shard_index": 1}, {"shard_index"}, "role is judge"),
    ({"role": "signer", "shard_index": 0}, {"shard_index"}, "read by role shard only; role is signer"),
    ({"role": "signer", "signing_processes": 2}, {"signing_processes"}, "role is signer"),
    ({"role": "shard", "changelog_topic": "history"}, {"changelog_topic"}, "role is shard"),
]

#: Settings the configuration they come with reads: none is reported.
READ: list[dict[str, Any]] = [
    {"method": "combined", "max_hamming": 10, "threshold": 0.85, "bands": 8, "rows_per_band": 8},
    {"containment_threshold": 0.8, "containment_bands": 16, "containment_rows_per_band": 8, "min_recall": 0.95},
    {"containment_threshold": 0.8, "containment_max_ratio": 1.5, "containment_min_recall": 0.8},
    {"method": "simhash", "max_hamming": 4, "simhash_weighting": "frequency", "max_bucket_size": 10},
    {"verification": "exact", "method": "combined", "sketch_bits": 2048},
    {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": "stage",
        "sasl_password": "hunter2",
        "ssl_cafile": "/etc/ca.pem",
        "ssl_certfile": "/etc/client.pem",
        "ssl_keyfile": "/etc/client.key",
        "ssl_password": "hunter2",
    },
    {"signing_processes": 0, "changelog_topic": "history", "metrics_host": "0.0.0.0", "id_field": "/meta/id"},
    {"role": "shard", "shards": 2, "index_slots": 2, "shard_index": 1, "snapshot_dir": "shards", "text_cache_mb": 64},
    # A sharded stage's roles share one set of settings (deploy/): one role's are not reported on another.
    {"role": "judge", "shards": 2, "index_slots": 2, "snapshot_dir": "x", "snapshots_kept": 3, "unique_topic": "u"},
    {"role": "signer", "sequenced_topic": "seq", "text_spool_mb": 0, "input_format": "json", "answers_topic": "a"},
]


def given(source: str, settings: dict[str, Any], tmp_path: Path) -> list[UnusedSetting]:
    """What ``run`` reports for ``settings`` given as flags, variables or file keys."""
    flags: list[str] = []
    environ: dict[str, str] = {}
    config = None
    if source == "flag":
        flags = [word for name, value in settings.items() for word in (f"--{name.replace('_', '-')}", str(value))]
    elif source == "environment":
        environ = {f"STREAM_DEDUP_{name.upper()}": str(value) for name, value in settings.items()}
    else:
        config = tmp_path / "stage.toml"
        config.write_text("".join(f"{name} = {json.dumps(value)}\n" for name, value in settings.items()))
    args = build_parser().parse_args(["run", *flags])
    return unused_settings(*layered_settings(vars(args), environ, str(config) if config else None))


def origin(source: str, name: str, tmp_path: Path) -> str:
    return {
        "flag": f"flag --{name.replace('_', '-')}",
        "environment": f"environment variable STREAM_DEDUP_{name.upper()}",
        "file": f"config file {tmp_path / 'stage.toml'}",
    }[source]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(("settings", "ignored", "why"), IGNORED)
def test_each_setting_the_configuration_ignores_is_reported_once_with_its_origin_and_why(
    source: str, settings: dict[str, Any], ignored: set[str], why: str, tmp_path: Path
) -> None:
    reported = given(source, settings, tmp_path)
    assert sorted(unused.name for unused in reported) == sorted(ignored)
    for unused in reported:
        assert unused.origin == origin(source, unused.name, tmp_path)
        assert why in unused.why
        assert str(unused) == f"{unused.name} ({unused.origin}) has no effect: {unused.why}"


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("settings", READ)
def test_settings_the_configuration_reads_are_not_reported(
    source: str, settings: dict[str, Any], tmp_path: Path
) -> None:
    assert given(source, settings, tmp_path) == []


@pytest.mark.parametrize("method", ["minhash", "simhash", "combined"])
@pytest.mark.parametrize("role", ["all", "signer", "shard", "judge"])
def test_defaults_are_never_reported(method: str, role: str, tmp_path: Path) -> None:
    # Every other setting keeps its default, read or not by this method and role.
    assert given("flag", {"method": method, "role": role}, tmp_path) == []


def test_an_empty_variable_of_an_optional_setting_unsets_it_and_is_not_reported(tmp_path: Path) -> None:
    environ = {"STREAM_DEDUP_SSL_CAFILE": "", "STREAM_DEDUP_SASL_USERNAME": "", "STREAM_DEDUP_BANDS": ""}
    args = build_parser().parse_args(["run", "--method", "simhash"])
    assert unused_settings(*layered_settings(vars(args), environ)) == []


def test_the_origin_is_the_source_whose_value_won(tmp_path: Path) -> None:
    config = tmp_path / "stage.toml"
    config.write_text("max_hamming = 5\nsimhash_weighting = 'frequency'\n")
    args = build_parser().parse_args(["run", "--max-hamming", "6"])
    environ = {"STREAM_DEDUP_SIMHASH_WEIGHTING": "set"}
    reported = {
        unused.name: unused.origin for unused in unused_settings(*layered_settings(vars(args), environ, str(config)))
    }
    assert reported == {
        "max_hamming": "flag --max-hamming",
        "simhash_weighting": "environment variable STREAM_DEDUP_SIMHASH_WEIGHTING",
    }


class _StoppedError(Exception):
    """Raised where the worker would be made: start-up is over."""


def test_run_logs_each_unused_setting_once_at_start_up_and_exports_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    observed: list[MetricsEvents] = []

    def worker(settings: WorkerSettings, events: MetricsEvents) -> None:
        observed.append(events)
        raise _StoppedError()

    monkeypatch.setattr(run_command, "Worker", worker)
    monkeypatch.setenv("STREAM_DEDUP_ROWS_PER_BAND", "8")
    argv = ["run", "--method", "simhash", "--bands", "4", "--max-hamming", "4", "--metrics-port", "0"]
    with pytest.raises(_StoppedError):
        main([*argv, "--log-format", "json"])
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    warnings = [(line["setting"], line["message"]) for line in lines if line["level"] == "WARNING"]
    assert warnings == [
        ("bands", "bands (flag --bands) has no effect: read by methods minhash and combined only; method is simhash"),
        (
            "rows_per_band",
            "rows_per_band (environment variable STREAM_DEDUP_ROWS_PER_BAND) has no effect: read by methods "
            "minhash and combined only; method is simhash",
        ),
    ]
    (events,) = observed
    exported = {
        sample.labels["setting"]: sample.value
        for metric in events.metrics.registry.collect()
        for sample in metric.samples
        if sample.name == "stream_dedup_unused_settings"
    }
    assert exported == {"bands": 1.0, "rows_per_band": 1.0}


#: Detection flags of the offline commands, the ones reported, and what their reason says.
OFFLINE_IGNORED: list[tuple[list[str], set[str], str]] = [
    (["--method", "simhash", "--bands", "4", "--rows-per-band", "8"], {"bands", "rows_per_band"}, "method is simhash"),
    (["--threshold", "0.9", "--max-hamming", "5"], {"max_hamming"}, "method is minhash"),
    (["--containment-max-ratio", "3"], {"containment_max_ratio"}, "containment_threshold is not set"),
]


@pytest.mark.parametrize("command", ["dedup", "params"])
@pytest.mark.parametrize(("flags", "reported", "reason"), OFFLINE_IGNORED)
def test_offline_commands_name_each_detection_flag_they_do_not_read(
    command: str, flags: list[str], reported: set[str], reason: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    documents = tmp_path / "in.jsonl"
    documents.write_text('{"id": "a", "text": "the quick brown fox jumps over the lazy dog"}\n')
    where = [str(documents), "--output", str(tmp_path / "out.jsonl")] if command == "dedup" else []
    assert main([command, *where, *flags]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("stream-dedup: warning: ")]
    assert {line.split()[2] for line in warnings} == reported
    assert all(reason in line and "(flag --" in line for line in warnings)


@pytest.mark.parametrize("command", ["dedup", "params"])
def test_offline_commands_report_no_flag_read_or_left_at_its_default(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    documents = tmp_path / "in.jsonl"
    documents.write_text('{"id": "a", "text": "the quick brown fox jumps over the lazy dog"}\n')
    where = [str(documents), "--output", str(tmp_path / "out.jsonl")] if command == "dedup" else []
    assert main([command, *where, "--method", "simhash", "--max-hamming", "4"]) == 0
    assert main([command, *where, "--threshold", "0.8", "--bands", "16", "--rows-per-band", "8"]) == 0
    assert "warning" not in capsys.readouterr().err
