"""A batch that keeps failing: its records judged one by one, and the one that fails alone isolated."""

from types import SimpleNamespace
from typing import Any

from stream_dedup.worker.isolation import BatchFailures


def rec(offset: int, partition: int = 0) -> Any:
    return SimpleNamespace(topic="documents", partition=partition, offset=offset)


def test_three_identical_failures_make_the_records_in_common_suspects() -> None:
    failures = BatchFailures(limit=3)
    error = ValueError("bad text")
    for batch in ([rec(0), rec(1), rec(2)], [rec(1), rec(2), rec(3)], [rec(1), rec(2)]):
        assert failures.failed(batch, error) is None
    assert failures.suspects == {("documents", 0, 1), ("documents", 0, 2)}


def test_different_errors_or_a_success_in_between_break_the_streak() -> None:
    failures = BatchFailures(limit=2)
    failures.failed([rec(0)], ValueError("a"))
    failures.failed([rec(0)], KeyError("b"))
    assert not failures.suspects
    failures.succeeded([rec(5)])
    failures.failed([rec(0)], KeyError("b"))
    assert not failures.suspects


def test_a_suspect_is_cut_out_to_be_judged_alone_and_isolated_when_it_fails_alone() -> None:
    failures = BatchFailures(limit=1)
    failures.failed([rec(0), rec(1), rec(2)], RecursionError("deep"))
    failures.suspects = {("documents", 0, 1)}
    assert failures.cut([rec(0), rec(1), rec(2)]) == ([rec(0)], [rec(1), rec(2)])
    assert failures.cut([rec(1), rec(2)]) == ([rec(1)], [rec(2)])
    assert failures.failed([rec(1)], RecursionError("deep")) == ("documents", 0, 1)
    assert failures.offenders == {("documents", 0, 1): "RecursionError: deep"}
    failures.succeeded([rec(1)])  # dead-lettered
    assert not failures.offenders and not failures.suspects
