"""The commands' own flags: out of range or empty, the parser refuses them naming the flag, before any work."""

import pytest

from stream_dedup.cli.flag_types import rate
from stream_dedup.cli.main import main


def check_refused_by_the_parser(arguments: list[str], refused: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The command line exits 2, the parser's message saying ``refused``."""
    with pytest.raises(SystemExit) as exit_:
        main(arguments)

    assert exit_.value.code == 2
    assert refused in capsys.readouterr().err


@pytest.mark.parametrize(
    ("arguments", "refused"),
    [
        (["produce-sample", "--count", "-5"], "--count: must be a whole number from 0"),
        (["produce-sample", "--partitions", "0"], "--partitions: must be a whole number from 1"),
        (["produce-sample", "--rate", "1e-300"], "--rate: must be a number from 0.01"),
        (["watch", "--idle-seconds", "nan"], "--idle-seconds: must be a number from 0"),
        (["watch", "--count", "-1"], "--count: must be a whole number from 1"),
        (["watch", "--max-lines", "-1"], "--max-lines: must be a whole number from 0"),
        (["params", "--sample-limit", "0"], "--sample-limit: must be a whole number from 1"),
        (["params", "--sample-limit", "2.5"], "--sample-limit: must be a whole number from 1"),
        # The brokers refused to create it: a traceback (InvalidTopicError), or for watch a wait for nothing.
        (["produce-sample", "--topic", "annonces-é"], "--topic: 'annonces-é' is not a valid Kafka topic name"),
        (["produce-sample", "--topic", "a/b"], "--topic: 'a/b' is not a valid Kafka topic name"),
        (["produce-sample", "--topic", "t" * 250], "is not a valid Kafka topic name (1 to 249 letters"),
        (["watch", "--topic", ".."], "--topic: '..' is not a valid Kafka topic name"),
    ],
)
def test_a_flag_out_of_range_is_refused_naming_it(
    arguments: list[str], refused: str, capsys: pytest.CaptureFixture[str]
) -> None:
    check_refused_by_the_parser(arguments, refused, capsys)


#: Where Kafka is not: were an empty flag let through, the command would fail to connect, not reach a broker.
_NO_BROKER = ["--bootstrap-servers", "127.0.0.1:1"]


@pytest.mark.parametrize(
    ("arguments", "refused"),
    [
        # Every record would be rejected for lacking a field named "".
        (["dedup", "missing.jsonl", "--id-field="], "--id-field: must not be empty"),
        (["dedup", "missing.jsonl", "--text-field="], "--text-field: must not be empty"),
        # The rest would each silently mean the flag's absence: a default path, no report, a default topic.
        (["dedup", "missing.jsonl", "--rejects="], "--rejects: must not be empty"),
        (["dedup", "missing.jsonl", "--report="], "--report: must not be empty"),
        # A bare "[Errno 2] No such file or directory: ''" before.
        (["dedup", ""], "input: must not be empty"),
        (["dedup", "missing.jsonl", "--output="], "--output/-o: must not be empty"),
        (["params", "--sample="], "--sample: must not be empty"),
        (["params", "--plot="], "--plot: must not be empty"),
        (["produce-sample", "--topic=", *_NO_BROKER], "--topic: must not be empty"),
        (["watch", "--topic=", *_NO_BROKER], "--topic: must not be empty"),
        (["produce-sample", "--config=", *_NO_BROKER], "--config: must not be empty"),
    ],
)
def test_an_empty_text_flag_is_refused_naming_it_not_read_as_left_out(
    arguments: list[str], refused: str, capsys: pytest.CaptureFixture[str]
) -> None:
    check_refused_by_the_parser(arguments, refused, capsys)


def test_a_rate_of_zero_still_means_as_fast_as_possible() -> None:
    assert rate("0") == 0.0 and rate("200") == 200.0
