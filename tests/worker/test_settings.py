"""Worker settings: flags over environment over file over defaults; bad values name the setting."""

import os
import re
import typing
from dataclasses import fields
from pathlib import Path

import kafka.net.sasl as kafka_sasl
import pytest

from stream_dedup.cli.settings_sources import resolve_settings
from stream_dedup.errors import ConfigError
from stream_dedup.worker.settings import SASL_MECHANISMS, WorkerSettings, default_instance_id


def test_flags_win_over_the_environment_which_wins_over_the_file(tmp_path: Path) -> None:
    config = tmp_path / "stage.toml"
    config.write_text('batch_size = 10\ninput_topic = "from-file"\noutput_topic = "out-file"\nthreshold = 0.7\n')
    environ = {"STREAM_DEDUP_BATCH_SIZE": "20", "STREAM_DEDUP_OUTPUT_TOPIC": "out-env"}
    settings = resolve_settings({"batch_size": "30"}, environ, str(config))
    assert settings.batch_size == 30
    assert settings.output_topic == "out-env"
    assert settings.input_topic == "from-file"
    assert settings.detection.threshold == 0.7


def test_the_config_file_can_come_from_the_environment(tmp_path: Path) -> None:
    config = tmp_path / "stage.toml"
    config.write_text('group_id = "dedup-ads"\n')
    settings = resolve_settings({}, {"STREAM_DEDUP_CONFIG": str(config)})
    assert settings.group_id == "dedup-ads"
    assert settings.changelog_topic == "dedup-ads.changelog"


def test_computed_defaults_are_filled_in() -> None:
    settings = resolve_settings({}, {"STREAM_DEDUP_GROUP_ID": "dedup-ads", "STREAM_DEDUP_CHANGELOG_TOPIC": ""})
    assert settings.changelog_topic == "dedup-ads.changelog"
    assert settings.instance_id == default_instance_id()
    assert settings.transactional_id == f"dedup-ads-{default_instance_id()}"


def test_a_partition_buffers_two_batches_at_least_1000_records_unless_set() -> None:
    assert resolve_settings({}, {}).partition_buffer_limit == 2000
    assert resolve_settings({"batch_size": "100"}, {}).partition_buffer_limit == 1000
    assert resolve_settings({"batch_size": "5000"}, {}).partition_buffer_limit == 10_000
    environ = {"STREAM_DEDUP_MAX_PARTITION_BUFFERED_RECORDS": "50"}
    assert resolve_settings({"batch_size": "5000"}, environ).partition_buffer_limit == 50


def test_the_text_cache_is_32_mib_unless_set_from_the_environment() -> None:
    assert resolve_settings({}, {}).text_cache_bytes == 32 << 20
    assert resolve_settings({}, {"STREAM_DEDUP_TEXT_CACHE_MB": "128"}).text_cache_bytes == 128 << 20


def test_every_setting_holds_a_value_of_its_declared_type() -> None:
    settings = WorkerSettings()
    hints = typing.get_type_hints(WorkerSettings)
    for setting in fields(settings):
        value, declared = getattr(settings, setting.name), hints[setting.name]
        if typing.get_origin(declared) is typing.Literal:
            assert value in typing.get_args(declared), setting.name
        else:
            assert isinstance(value, declared), f"{setting.name}: {value!r} is not a {declared}"


def test_values_from_the_environment_are_typed() -> None:
    settings = resolve_settings(
        {},
        {
            "STREAM_DEDUP_STRIP_PUNCTUATION": "yes",
            "STREAM_DEDUP_MAX_DOCUMENTS": "5000",
            "STREAM_DEDUP_MAX_AGE_SECONDS": "",
            "STREAM_DEDUP_SNAPSHOT_INTERVAL_SECONDS": "2.5",
        },
    )
    assert settings.detection.strip_punctuation is True
    assert settings.detection.max_documents == 5000
    assert settings.detection.max_age_seconds is None
    assert settings.snapshot_interval_seconds == 2.5


@pytest.mark.parametrize(
    "flags, environ, setting",
    [
        ({}, {"STREAM_DEDUP_BATCH_SIZE": "many"}, "batch_size"),
        ({}, {"STREAM_DEDUP_BACH_SIZE": "10"}, "bach_size"),
        ({"batch_size": "0"}, {}, "batch_size"),
        ({"threshold": "1.5"}, {}, "threshold"),
        ({"input_format": "xml"}, {}, "input_format"),
        ({"output_topic": "documents"}, {}, "output_topic"),
        ({"output_topic": "has space"}, {}, "output_topic"),
        ({"security_protocol": "SASL_SSL"}, {}, "sasl_mechanism"),
        ({"metrics_port": "70000"}, {}, "metrics_port"),
        ({"log_format": "yaml"}, {}, "log_format"),
        ({"instance_id": "pod/0"}, {}, "instance_id"),
        ({"dead_letter_topic": "verdicts"}, {}, "dead_letter_topic"),
        ({"dead_letter_topic": "c", "changelog_topic": "c"}, {}, "changelog_topic"),
        ({"unique_topic": "c", "changelog_topic": "c"}, {}, "unique_topic"),
        ({"max_partition_idle_ms": "-1"}, {}, "max_partition_idle_ms"),
        ({}, {"STREAM_DEDUP_MAX_PARTITION_IDLE_MS": "600001"}, "max_partition_idle_ms"),
        ({"max_partition_buffered_records": "0"}, {}, "max_partition_buffered_records"),
        ({}, {"STREAM_DEDUP_MAX_PARTITION_BUFFERED_RECORDS": "lots"}, "max_partition_buffered_records"),
        ({"text_cache_mb": "0"}, {}, "text_cache_mb"),
        ({"text_spool_mb": "-1"}, {}, "text_spool_mb"),
        ({}, {"STREAM_DEDUP_MAX_BUCKET_SIZE": "0"}, "max_bucket_size"),
    ],
)
def test_a_bad_value_stops_start_up_naming_the_setting(
    flags: dict[str, str], environ: dict[str, str], setting: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        resolve_settings(flags, environ)
    assert raised.value.setting == setting


@pytest.mark.parametrize(
    ("setting", "value", "words"),
    [
        ("transaction_timeout_seconds", "inf", "from 1 to 900 (the brokers' default transaction.max.timeout.ms"),
        ("transaction_timeout_seconds", "901", "from 1 to 900"),
        ("session_timeout_seconds", "inf", "from 6 to 1800 (the brokers' defaults group.min.session.timeout.ms"),
        ("session_timeout_seconds", "5", "from 6 to 1800"),
        ("max_age_seconds", "inf", "from 1 to 315360000 (ten years"),
        ("max_age_seconds", "1e300", "from 1 to 315360000"),
        ("max_age_seconds", "nan", "from 1 to 315360000"),
        ("max_documents", "100000000000000000", "from 1 to 10000000000"),
        ("shutdown_grace_seconds", "inf", "from 1 to 3600"),
        ("snapshot_interval_seconds", "nan", "from 1 to 604800"),
        ("batch_timeout_ms", "10001", "from 0 to 10000"),
        ("max_document_bytes", "1000000000000", "from 1 to 104857600 (100 MiB)"),
        ("max_id_bytes", "65537", "from 1 to 65536"),
        ("max_partition_buffered_bytes", "0", "from 1 to 1073741824 (1 GiB)"),
        ("snapshot_every_documents", "100000000000000000", "from 1 to 10000000000"),
        ("snapshots_kept", "101", "from 1 to 100"),
    ],
)
def test_a_number_out_of_its_range_is_refused_naming_the_setting_and_the_range(
    setting: str, value: str, words: str
) -> None:
    """Infinities, NaN and huge values included: past the range they would fail later, after topics were made."""
    with pytest.raises(
        ConfigError, match=re.escape(f"invalid setting {setting!r}: must be a") + ".*" + re.escape(words)
    ):
        resolve_settings({setting: value}, {})


@pytest.mark.parametrize(
    ("flags", "environ", "line"),
    [
        ({"metrics_host": ""}, {}, ""),
        ({}, {"STREAM_DEDUP_METRICS_HOST": " "}, ""),
        ({}, {}, 'metrics_host = ""'),
    ],
)
def test_an_empty_metrics_host_is_refused_not_read_as_every_interface(
    flags: dict[str, str], environ: dict[str, str], line: str, tmp_path: Path
) -> None:
    """Python binds "" to every interface: exposing the status page must be written out (0.0.0.0 or ::)."""
    config = tmp_path / "stage.toml"
    config.write_text(line + "\n")
    with pytest.raises(ConfigError, match=re.escape("'metrics_host': must not be empty: write 0.0.0.0 or ::")):
        resolve_settings(flags, environ, str(config))


@pytest.mark.parametrize(("flags", "line"), [({"snapshot_dir": " "}, ""), ({}, 'snapshot_dir = ""')])
def test_an_empty_snapshot_dir_is_refused_not_read_as_the_working_directory(
    flags: dict[str, str], line: str, tmp_path: Path
) -> None:
    config = tmp_path / "stage.toml"
    config.write_text(line + "\n")
    with pytest.raises(ConfigError, match=re.escape("'snapshot_dir': must not be empty: name a directory")):
        resolve_settings(flags, {}, str(config))


@pytest.mark.parametrize("setting", ["id_field", "text_field"])
def test_a_malformed_json_pointer_field_is_refused_naming_the_setting(setting: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(f"invalid setting {setting!r}: '/a/~x' is not a JSON Pointer")):
        resolve_settings({setting: "/a/~x"}, {})
    assert getattr(resolve_settings({setting: "/a/~1b"}, {}), setting) == "/a/~1b"


def test_a_batch_wait_as_long_as_the_shutdown_grace_is_refused() -> None:
    with pytest.raises(ConfigError, match="'batch_timeout_ms': must be less than shutdown_grace_seconds x 1000 = 5000"):
        resolve_settings({"batch_timeout_ms": "5000", "shutdown_grace_seconds": "5"}, {})


@pytest.mark.parametrize(
    ("line", "setting"),
    [
        ("batch_size = 2.7", "batch_size"),
        ("shards = 0.9", "shards"),
        ("batch_size = inf", "batch_size"),
        ("max_documents = nan", "max_documents"),
    ],
)
def test_a_fraction_in_the_file_for_a_whole_number_is_refused_not_cut(tmp_path: Path, line: str, setting: str) -> None:
    config = tmp_path / "stage.toml"
    config.write_text(line + "\n")
    value = line.split(" = ")[1]
    message = f"'{setting}': must be a whole number, got {value} (from {config})"
    with pytest.raises(ConfigError, match=re.escape(message)):
        resolve_settings({}, {}, str(config))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("batch_size = [500]", "'batch_size': must be one int, not the TOML array [500]"),
        ("threshold = { value = 0.9 }", "'threshold': must be one float, not the TOML table {'value': 0.9}"),
        ("max_age_seconds = 2024-01-01", "'max_age_seconds': must be one float, not the TOML date or time 2024-01-01"),
        ('snapshot_dir = ["/data"]', "'snapshot_dir': must be one str, not the TOML array ['/data']"),
        ('method = ["simhash"]', "'method': must be one str, not the TOML array ['simhash']"),
    ],
)
def test_an_array_table_or_date_in_the_file_is_refused_naming_the_setting(
    tmp_path: Path, line: str, message: str
) -> None:
    config = tmp_path / "stage.toml"
    config.write_text(line + "\n")
    with pytest.raises(ConfigError, match=re.escape(f"{message} (from {config})")):
        resolve_settings({}, {}, str(config))


@pytest.mark.parametrize(
    ("line", "setting"),
    [
        ("sasl_password = 0x1F", "sasl_password"),
        ("snapshot_dir = true", "snapshot_dir"),
        ("input_topic = 1e3", "input_topic"),
        ("group_id = 1_000", "group_id"),
        ("unique_topic = 2024", "unique_topic"),
    ],
)
def test_a_number_or_boolean_in_the_file_for_a_text_setting_is_refused_not_rewritten(
    tmp_path: Path, line: str, setting: str
) -> None:
    """TOML reads ``0x1F`` as 31: taken as text, the setting would be "31", not what the file says."""
    config = tmp_path / "stage.toml"
    config.write_text(line + "\n")
    with pytest.raises(ConfigError, match=f"'{setting}': must be text, in quotes in the file"):
        resolve_settings({}, {}, str(config))


@pytest.mark.parametrize(
    "servers",
    [
        "127.0.0.1:0",
        "127.0.0.1:65536",
        "kafka-0:9092,kafka-1:99999",
        "kafka-0:\u00b2",
        "kafka-0:\u0663",
        ":9092",
        "kafka-0",
    ],
)
def test_a_bootstrap_server_that_is_not_host_and_port_is_refused_when_the_settings_are_built(servers: str) -> None:
    """Not when the servers are tried: a port out of range was "connection refused" (exit 3), and ``²`` a
    traceback (``str.isdigit`` takes it, ``int`` does not)."""
    with pytest.raises(ConfigError, match=r"is not host:port \(a port from 1 to 65535\)") as raised:
        resolve_settings({"bootstrap_servers": servers}, {})
    assert raised.value.setting == "bootstrap_servers"


def test_bootstrap_servers_take_ipv6_addresses_in_brackets_and_spaces_after_commas() -> None:
    settings = resolve_settings({"bootstrap_servers": "[::1]:9092, kafka-1:65535"}, {})
    assert settings.connection().servers() == ["[::1]:9092", "kafka-1:65535"]


@pytest.mark.parametrize(
    ("values", "setting", "words"),
    [
        ({"sasl_mechanism": "plain"}, "sasl_mechanism", "must be one of PLAIN, SCRAM-SHA-256"),
        ({"sasl_mechanism": "OAUTHBEARER"}, "sasl_mechanism", "must be one of PLAIN, SCRAM-SHA-256"),
        (
            {"sasl_mechanism": "PLAIN", "sasl_password": "secret"},
            "sasl_username",
            "is required with sasl_mechanism=PLAIN",
        ),
        ({"sasl_mechanism": "SCRAM-SHA-512", "sasl_username": "dedup"}, "sasl_password", "is required with"),
        (
            {"sasl_mechanism": "PLAIN", "sasl_username": "dedup", "sasl_password": os.fsdecode(b"s\xe9cret")},
            "sasl_password",
            "is not UTF-8 text",
        ),
    ],
)
def test_sasl_settings_the_handshake_would_refuse_are_refused_by_name(
    values: dict[str, str], setting: str, words: str
) -> None:
    """kafka-python refuses these only in the handshake, which the start-up check took for the brokers'
    refusal: "SASL mechanism not enabled" (exit 4) for a missing password."""
    with pytest.raises(ConfigError, match=re.escape(words)) as raised:
        resolve_settings({"security_protocol": "SASL_SSL", **values}, {})
    assert raised.value.setting == setting
    assert "cret" not in str(raised.value)


def test_the_sasl_mechanisms_are_those_kafka_python_can_use_without_a_token_provider() -> None:
    assert set(SASL_MECHANISMS) == set(kafka_sasl.SASL_MECHANISMS) - {"OAUTHBEARER"}


@pytest.mark.parametrize("setting", ["snapshot_dir", "metrics_host", "sasl_password", "ssl_cafile", "text_field"])
def test_a_nul_character_in_a_text_setting_of_the_file_is_refused_naming_the_setting(
    tmp_path: Path, setting: str
) -> None:
    """os.mkdir (snapshot_dir) and the socket (metrics_host) raised ValueError and TypeError on it: tracebacks."""
    config = tmp_path / "stage.toml"
    config.write_text(f'{setting} = "a\\u0000b"\n')
    with pytest.raises(ConfigError, match=re.escape(f"'{setting}': must not hold a NUL character")):
        resolve_settings({}, {}, str(config))


@pytest.mark.parametrize("value", ["0x1F", '["hunter2"]', '{ value = "hunter2" }', "2024-01-01"])
@pytest.mark.parametrize("setting", ["sasl_password", "ssl_password"])
def test_a_password_of_the_wrong_type_in_the_file_is_refused_without_showing_it(
    tmp_path: Path, setting: str, value: str
) -> None:
    config = tmp_path / "stage.toml"
    config.write_text(f"{setting} = {value}\n")
    with pytest.raises(ConfigError, match=f"'{setting}'") as raised:
        resolve_settings({}, {}, str(config))
    assert not {"31", "hunter2", "2024"} & set(re.findall(r"\w+", str(raised.value).split(" (from ")[0]))


def test_a_whole_float_in_the_file_is_taken_for_its_number(tmp_path: Path) -> None:
    config = tmp_path / "stage.toml"
    config.write_text("batch_size = 2.0\n")
    assert resolve_settings({}, {}, str(config)).batch_size == 2


@pytest.mark.parametrize(
    ("setting", "value"),
    [
        ("output_topic", "verdicts\n"),
        ("input_topic", "."),
        ("dead_letter_topic", ".."),
        ("group_id", "."),
        ("instance_id", "pod-0\n"),
        ("instance_id", ".."),
        ("group_id", "ads\n"),
    ],
)
def test_a_name_kafka_refuses_is_refused_naming_the_setting(setting: str, value: str) -> None:
    with pytest.raises(ConfigError, match="is not a valid Kafka name") as raised:
        resolve_settings({setting: value}, {})
    assert raised.value.setting == setting


def test_a_group_id_too_long_for_the_default_changelog_topic_is_named() -> None:
    group_id = "g" * 249
    with pytest.raises(
        ConfigError, match=f"'{group_id}.changelog', the default changelog_topic made from it,"
    ) as raised:
        resolve_settings({"group_id": group_id}, {})
    assert raised.value.setting == "group_id"


def test_an_unknown_key_in_the_file_is_an_error(tmp_path: Path) -> None:
    config = tmp_path / "stage.toml"
    config.write_text("treshold = 0.9\n")
    with pytest.raises(ConfigError, match=r"treshold.*unknown setting"):
        resolve_settings({}, {}, str(config))


def test_a_config_file_that_is_not_utf8_is_refused_naming_it(tmp_path: Path) -> None:
    config = tmp_path / "stage.toml"
    config.write_bytes('group_id = "dédup"\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match=re.escape(f"'config': {config} is not UTF-8 text (byte 13:")):
        resolve_settings({}, {}, str(config))


def test_secrets_stay_out_of_the_settings_repr() -> None:
    settings = resolve_settings({}, {"STREAM_DEDUP_SASL_PASSWORD": "hunter2", "STREAM_DEDUP_SASL_MECHANISM": "PLAIN"})
    assert settings.connection().options()["sasl_plain_password"] == "hunter2"
    assert "hunter2" not in repr(settings) and "hunter2" not in repr(settings.connection())


def test_each_role_gets_its_own_group_and_transactional_id_under_one_group_id() -> None:
    def of(**values: str) -> WorkerSettings:
        environ = {"STREAM_DEDUP_GROUP_ID": "ads", "STREAM_DEDUP_INSTANCE_ID": "pod-1", "STREAM_DEDUP_INDEX_SLOTS": "6"}
        return resolve_settings({}, {**environ, **{f"STREAM_DEDUP_{k.upper()}": v for k, v in values.items()}})

    whole = of()
    assert (whole.role_group_id, whole.transactional_id) == ("ads", "ads-pod-1")
    assert (whole.sequenced_topic, whole.answers_topic) == ("ads.sequenced", "ads.answers")
    assert of(role="signer").role_group_id == "ads.signers"
    shard = of(role="shard", shards="3", shard_index="2")
    assert (shard.role_group_id, shard.transactional_id) == ("ads.shard-2", "ads.shard-2-pod-1")
    assert of(role="judge", shards="3").transactional_id == "ads.judge-pod-1"


@pytest.mark.parametrize(
    ("values", "setting", "words"),
    [
        ({"ROLE": "sharder"}, "role", "all, signer, shard, judge"),
        ({"SHARDS": "0"}, "shards", "at least 1"),
        # The single process holds the whole index: a shard count would be ignored, not obeyed.
        ({"SHARDS": "3", "INDEX_SLOTS": "12"}, "shards", "is 3, but role all"),
        ({"ROLE": "all", "SHARDS": "4"}, "shards", "is 4, but role all"),
        ({"ROLE": "shard", "SHARDS": "3", "SHARD_INDEX": "3", "INDEX_SLOTS": "6"}, "shard_index", "0 to shards - 1"),
        ({"ROLE": "judge", "SHARDS": "4", "INDEX_SLOTS": "6"}, "shards", "must divide index_slots=6"),
        ({"SHARD_INDEX": "1"}, "shard_index", "0 to shards - 1 = 0"),
        ({"ROLE": "judge", "UNIQUE_TOPIC": "x.answers", "ANSWERS_TOPIC": "x.answers"}, "unique_topic", "must differ"),
        ({"ROLE": "signer", "SEQUENCED_TOPIC": "documents"}, "input_topic", "must differ from sequenced_topic"),
        # A signer's dead letters would land among the signature records, and every shard fail on them for good.
        ({"ROLE": "signer", "DEAD_LETTER_TOPIC": "x.seq", "SEQUENCED_TOPIC": "x.seq"}, "dead_letter_topic", "differ"),
        ({"ROLE": "judge", "DEAD_LETTER_TOPIC": "x.ans", "ANSWERS_TOPIC": "x.ans"}, "dead_letter_topic", "differ"),
        (
            {"ROLE": "signer", "ANSWERS_TOPIC": "x.sequenced", "SEQUENCED_TOPIC": "x.sequenced"},
            "answers_topic",
            "differ from sequenced",
        ),
    ],
)
def test_role_settings_that_cannot_work_are_refused_by_name(values: dict[str, str], setting: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words) as raised:
        resolve_settings({}, {f"STREAM_DEDUP_{k}": v for k, v in values.items()})
    assert raised.value.setting == setting


@pytest.mark.parametrize(
    "search", [{"METHOD": "minhash"}, {"METHOD": "simhash"}, {"METHOD": "combined"}, {"CONTAINMENT_THRESHOLD": "0.8"}]
)
def test_every_method_and_the_containment_search_can_be_sharded(search: dict[str, str]) -> None:
    environment = {"ROLE": "shard", "SHARDS": "2", "INDEX_SLOTS": "6", **search}
    settings = resolve_settings({}, {f"STREAM_DEDUP_{k}": v for k, v in environment.items()})
    assert settings.role == "shard"
    assert settings.detection.method == search.get("METHOD", "minhash")
    assert settings.detection.containment_threshold == (0.8 if "CONTAINMENT_THRESHOLD" in search else None)


def test_invisible_characters_are_ignored_unless_turned_off_and_reading_follows_the_setting() -> None:
    assert resolve_settings({}, {}).input_reading().ignore_invisible is True
    settings = resolve_settings({}, {"STREAM_DEDUP_IGNORE_INVISIBLE": "off"})
    assert settings.detection.ignore_invisible is False
    assert settings.input_reading().ignore_invisible is False
