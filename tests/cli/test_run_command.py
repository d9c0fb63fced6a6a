"""`stream-dedup run`: every setting is a flag; a bad setting exits 2 naming it, before any connection."""

import socket
from pathlib import Path

import pytest
from kafka.errors import TopicAuthorizationFailedError

from stream_dedup.cli import run_command
from stream_dedup.cli.main import main
from stream_dedup.cli.settings_sources import setting_types
from stream_dedup.worker.loop import Worker


def test_every_setting_has_a_flag(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    help_text = capsys.readouterr().out
    for name in setting_types():
        assert f"--{name.replace('_', '-')}" in help_text, name


def test_a_bad_setting_exits_2_naming_it(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAM_DEDUP_SNAPSHOTS_KEPT", "0")
    assert main(["run", "--bootstrap-servers", "127.0.0.1:1"]) == 2
    assert "invalid setting 'snapshots_kept': must be a whole number from 1 to 100" in capsys.readouterr().err


@pytest.mark.parametrize(
    "flag",
    ["--transaction-timeout-seconds", "--session-timeout-seconds", "--max-age-seconds", "--shutdown-grace-seconds"],
)
def test_an_infinite_number_exits_2_naming_it_before_kafka_is_used(
    flag: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def contacted(connection: object) -> None:
        raise AssertionError("Kafka was used before the settings were refused")

    monkeypatch.setattr(run_command, "check_bootstrap_servers", contacted)
    assert main(["run", flag, "inf", "--metrics-port", "0"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"invalid setting '{flag[2:].replace('-', '_')}': must be a number from" in err


def test_a_metrics_host_not_of_this_machine_exits_2_naming_it(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("STREAM_DEDUP_METRICS_HOST", "999.1.1.1")
    assert main(["run", "--bootstrap-servers", "127.0.0.1:1", "--metrics-port", "9", "--log-level", "ERROR"]) == 2
    assert (
        "invalid setting 'metrics_host': cannot serve metrics and health checks on 999.1.1.1:9"
        in capsys.readouterr().err
    )


@pytest.mark.parametrize("given_in", ["flags", "config file"])
def test_shards_with_the_all_in_one_role_exit_2_naming_both_before_kafka_is_used(
    given_in: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def contacted(connection: object) -> None:
        raise AssertionError("Kafka was used before the settings were refused")

    monkeypatch.setattr(run_command, "check_bootstrap_servers", contacted)
    config = tmp_path / "stage.toml"
    config.write_text('role = "all"\nshards = 3\n')
    chosen = ["--config", str(config)] if given_in == "config file" else ["--role", "all", "--shards", "3"]
    assert main(["run", *chosen, "--index-slots", "12", "--metrics-port", "0", "--log-level", "ERROR"]) == 2
    err = capsys.readouterr().err
    assert "invalid setting 'shards': is 3, but role all runs the whole index in one process" in err
    assert "set shards to 1, or role to signer, shard or judge" in err


@pytest.mark.parametrize("role", [["--role", "all"], ["--role", "shard", "--shards", "1"]], ids=["all", "shard"])
def test_a_snapshot_dir_that_is_a_file_exits_2_naming_it_before_kafka_is_used(
    role: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Not exit 3 for brokers that are down: the setting is wrong whatever the brokers do."""

    def contacted(connection: object) -> None:
        raise AssertionError("Kafka was used before the settings were refused")

    monkeypatch.setattr(run_command, "check_bootstrap_servers", contacted)
    taken = tmp_path / "snapshots"
    taken.write_text("not a directory")
    options = ["--snapshot-dir", str(taken), "--metrics-port", "0", "--log-level", "ERROR"]
    assert main(["run", *role, *options]) == 2
    assert f"invalid setting 'snapshot_dir': cannot make the snapshot directory {taken}" in capsys.readouterr().err


def test_an_unreachable_broker_exits_3_with_one_line_naming_it(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "--bootstrap-servers", "127.0.0.1:1", "--metrics-port", "0", "--log-level", "ERROR"])
    err = capsys.readouterr().err
    assert code == 3
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("stream-dedup: cannot use Kafka: 127.0.0.1:1: connection refused.")
    assert "bootstrap_servers=127.0.0.1:1, security_protocol=PLAINTEXT" in err


def test_a_broker_that_takes_the_connection_and_answers_nothing_is_named_hung_not_misconfigured(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A hung broker (SIGSTOP, a long GC pause): the kernel accepts the connection, nothing answers on it."""
    with socket.create_server(("127.0.0.1", 0)) as hung:
        server = f"127.0.0.1:{hung.getsockname()[1]}"
        assert main(["run", "--bootstrap-servers", server, "--metrics-port", "0", "--log-level", "ERROR"]) == 3
    err = capsys.readouterr().err
    assert err.startswith(f"stream-dedup: cannot use Kafka: {server}: answered nothing (")
    assert "Check the brokers: they take connections but answer nothing" in err
    assert "Check security_protocol" not in err


def test_every_bootstrap_server_is_named_with_its_answer(capsys: pytest.CaptureFixture[str]) -> None:
    servers = "127.0.0.1:1,no-such-broker.invalid:9092"
    assert main(["run", "--bootstrap-servers", servers, "--metrics-port", "0", "--log-level", "ERROR"]) == 3
    err = capsys.readouterr().err
    assert "127.0.0.1:1: connection refused; no-such-broker.invalid:9092: DNS lookup failed" in err
    assert "Check the host names in bootstrap_servers." in err


def test_the_sasl_settings_are_named_but_never_the_password(capsys: pytest.CaptureFixture[str]) -> None:
    secret = "hunter2-very-secret"
    sasl = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN", "--sasl-username", "dedup"]
    argv = ["run", "--bootstrap-servers", "127.0.0.1:1", *sasl, "--sasl-password", secret, "--metrics-port", "0"]
    assert main([*argv, "--log-level", "ERROR"]) == 3
    err = capsys.readouterr().err
    assert "sasl_mechanism=PLAIN, sasl_username='dedup', sasl_password set" in err
    assert secret not in err


def test_a_missing_ssl_file_is_a_bad_setting(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    missing = tmp_path / "ca.pem"
    argv = ["run", "--bootstrap-servers", "127.0.0.1:1", "--security-protocol", "SSL", "--ssl-cafile", str(missing)]
    assert main([*argv, "--metrics-port", "0", "--log-level", "ERROR"]) == 2
    assert f"invalid setting 'ssl_cafile': no such file: {missing}" in capsys.readouterr().err


def test_an_ssl_file_that_is_a_directory_is_named_a_directory_not_missing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["run", "--bootstrap-servers", "127.0.0.1:1", "--security-protocol", "SSL", "--ssl-cafile", str(tmp_path)]
    assert main([*argv, "--metrics-port", "0", "--log-level", "ERROR"]) == 2
    assert (
        f"invalid setting 'ssl_cafile': {tmp_path} is a directory: name the PEM file in it" in capsys.readouterr().err
    )


def test_a_topic_refused_at_start_up_exits_4_naming_user_and_topics(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(worker: Worker) -> None:
        raise TopicAuthorizationFailedError({"docs"})

    monkeypatch.setattr(run_command, "check_bootstrap_servers", lambda connection: None)
    monkeypatch.setattr(Worker, "run", refuse)
    sasl = ["--security-protocol", "SASL_PLAINTEXT", "--sasl-mechanism", "PLAIN", "--sasl-username", "dedup"]
    argv = ["run", "--bootstrap-servers", "kafka-0:9093", *sasl, "--sasl-password", "secret", "--input-topic", "docs"]
    assert main([*argv, "--metrics-port", "0", "--log-level", "ERROR"]) == 4
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "kafka-0:9093 refused access (TopicAuthorizationFailedError" in err
    assert "Refused: Read or Write on topic docs)." in err and "sasl_username='dedup'" in err
    # Each ACL the stage needs, the one refused and the others (one missing hides the next).
    assert (
        "Grant that user Read on topic docs; Write and DescribeConfigs on topic verdicts, dead-letters; Read, "
        "Write and DescribeConfigs on topic stream-dedup.changelog; Create on the cluster (or on those topics) "
        "while any of them is missing; Read on group stream-dedup and Write on transactional id stream-dedup-"
    ) in err


def test_a_refusal_holding_a_whole_request_is_cut_short(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """kafka-python's errors may hold a request's repr: a changelog topic's configs ran to 900 characters."""

    def refuse(worker: Worker) -> None:
        raise TopicAuthorizationFailedError("Request 'CreateTopicsRequest(" + "x" * 2000 + ")'")

    monkeypatch.setattr(run_command, "check_bootstrap_servers", lambda connection: None)
    monkeypatch.setattr(Worker, "run", refuse)
    assert main(["run", "--bootstrap-servers", "kafka-0:9093", "--metrics-port", "0", "--log-level", "ERROR"]) == 4
    err = capsys.readouterr().err
    assert "the anonymous user" in err and len(err) < 1000


def test_a_topic_refused_to_a_sharded_role_names_its_topics_group_and_transactional_id(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class RefusedRole:
        def run(self) -> None:
            raise TopicAuthorizationFailedError()

        def stop(self) -> None:
            pass

    monkeypatch.setattr(run_command, "check_bootstrap_servers", lambda connection: None)
    monkeypatch.setattr(run_command, "role_runner", lambda settings, events: RefusedRole())
    argv = ["run", "--bootstrap-servers", "kafka-0:9093", "--role", "shard", "--shards", "3", "--shard-index", "2"]
    argv += ["--index-slots", "12"]
    assert main([*argv, "--group-id", "dd", "--instance-id", "s2", "--metrics-port", "0", "--log-level", "ERROR"]) == 4
    err = capsys.readouterr().err
    assert "topic documents, verdicts, dead-letters, dd.sequenced, dd.answers;" in err.replace("stream-dedup.", "dd.")
    assert "changelog" not in err
    assert "Read on group dd.shard-2 and Write on transactional id dd.shard-2-s2." in err
