"""``run``, ``watch`` and ``produce-sample`` connect alike: one set of flags, variables and file keys, layered alike."""

from dataclasses import fields
from pathlib import Path

import pytest

from stream_dedup.cli import produce_sample_command, watch_command
from stream_dedup.cli.main import build_parser, main
from stream_dedup.errors import BrokersUnreachableError
from stream_dedup.kafka.clients import RECONNECT_BACKOFF_MAX_MS, KafkaConnection
from stream_dedup.worker.settings import ConnectionSettings

COMMANDS = ("run", "watch", "produce-sample")


def _flags(command: str) -> dict[str, tuple[tuple[str, ...], str | None]]:
    """``dest -> (option strings, help)`` of every flag of ``command``."""
    subparsers = next(action for action in build_parser()._actions if action.dest == "command")
    parser = subparsers.choices[command]  # type: ignore[index]
    return {action.dest: (tuple(action.option_strings), action.help) for action in parser._actions}


def test_every_connection_setting_is_a_flag_of_every_command_with_the_same_help() -> None:
    flags = {command: _flags(command) for command in COMMANDS}
    for setting in [*fields(ConnectionSettings), "config"]:
        name = setting if isinstance(setting, str) else setting.name
        described = {flags[command].get(name) for command in COMMANDS}
        assert len(described) == 1 and None not in described, f"{name}: {described}"
        assert next(iter(described))[0] == (f"--{name.replace('_', '-')}",)  # type: ignore[index]


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[KafkaConnection]:
    """The connection each command would use: the start-up check records it and stops the command (exit 3)."""
    seen: list[KafkaConnection] = []

    def check(connection: KafkaConnection) -> None:
        seen.append(connection)
        raise BrokersUnreachableError("stopped by the test")

    for command in (watch_command, produce_sample_command):
        monkeypatch.setattr(command, "check_bootstrap_servers", check)
    for variable in ("STREAM_DEDUP_CONFIG", "STREAM_DEDUP_SASL_PASSWORD", "STREAM_DEDUP_BOOTSTRAP_SERVERS"):
        monkeypatch.delenv(variable, raising=False)
    return seen


@pytest.mark.parametrize("command", ["watch", "produce-sample"])
def test_flags_win_over_variables_which_win_over_the_file(
    command: str, connections: list[KafkaConnection], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "stage.toml"
    config.write_text(
        'bootstrap_servers = "file:9092"\nsecurity_protocol = "SASL_SSL"\nsasl_mechanism = "PLAIN"\n'
        'sasl_username = "from-file"\nsasl_password = "file-secret"\nssl_cafile = "/etc/ca.pem"\n'
    )
    monkeypatch.setenv("STREAM_DEDUP_SASL_USERNAME", "from-env")
    monkeypatch.setenv("STREAM_DEDUP_SASL_PASSWORD", "env-secret")
    assert main([command, "--config", str(config), "--sasl-username", "from-flag"]) == 3
    [connection] = connections
    assert connection.options() == {
        "bootstrap_servers": ["file:9092"],
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "PLAIN",
        "sasl_plain_username": "from-flag",
        "sasl_plain_password": "env-secret",
        "ssl_cafile": "/etc/ca.pem",
        "client_id": "stream-dedup-watch" if command == "watch" else "stream-dedup-sample",
        "reconnect_backoff_max_ms": RECONNECT_BACKOFF_MAX_MS,
    }


@pytest.mark.parametrize("command", ["watch", "produce-sample"])
def test_the_config_file_can_come_from_the_environment(
    command: str, connections: list[KafkaConnection], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "stage.toml"
    config.write_text('bootstrap_servers = "kafka-0:9093,kafka-1:9093"\n')
    monkeypatch.setenv("STREAM_DEDUP_CONFIG", str(config))
    assert main([command]) == 3
    assert connections[0].options()["bootstrap_servers"] == ["kafka-0:9093", "kafka-1:9093"]


@pytest.mark.parametrize("command", ["watch", "produce-sample"])
def test_a_bad_connection_setting_exits_2_naming_it(
    command: str, connections: list[KafkaConnection], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command, "--security-protocol", "SASL_SSL"]) == 2
    assert "invalid setting 'sasl_mechanism': is required with security_protocol=SASL_SSL" in capsys.readouterr().err
    assert main([command, "--security-protocol", "KERBEROS"]) == 2
    assert "invalid setting 'security_protocol': must be one of PLAINTEXT, SSL" in capsys.readouterr().err
    assert main([command, "--bootstrap-servers", "kafka-0:9092,kafka-1:90920"]) == 2
    assert "invalid setting 'bootstrap_servers': 'kafka-1:90920' is not host:port" in capsys.readouterr().err
    assert not connections


def test_an_unreachable_broker_is_one_line_for_watch_too(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch", "--bootstrap-servers", "127.0.0.1:1", "--count", "1"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("stream-dedup: cannot use Kafka: 127.0.0.1:1: connection refused.") and err.count("\n") == 1


def test_watch_takes_the_stage_topics_from_the_settings(
    connections: list[KafkaConnection], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "stage.toml"
    config.write_text('output_topic = "ads-verdicts"\ntext_field = "body"\n')
    seen: list[object] = []
    monkeypatch.setattr(watch_command, "check_bootstrap_servers", lambda connection: None)
    monkeypatch.setattr(watch_command, "_read", lambda args, topics, *rest: seen.append(topics))
    assert (
        main(
            ["watch", "--config", str(config), "--dead-letters", "--dead-letter-topic", "ads-dead", "--format", "json"]
        )
        == 0
    )
    assert seen == [["ads-verdicts", "ads-dead"]]


def test_texts_need_the_text_format(capsys: pytest.CaptureFixture[str], connections: list[KafkaConnection]) -> None:
    assert main(["watch", "--texts", "--format", "json"]) == 2
    assert "--texts shows texts in the text format" in capsys.readouterr().err
    assert not connections
