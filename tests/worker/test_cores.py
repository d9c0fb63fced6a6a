"""The cores a worker may use, and the signer processes it starts by default."""

import os
from pathlib import Path

import pytest

from stream_dedup.cli.settings_sources import resolve_settings
from stream_dedup.errors import ConfigError
from stream_dedup.worker import cores
from stream_dedup.worker.cores import MAX_DEFAULT_SIGNERS, cgroup_quota, default_signing_processes


def cgroup(tmp_path: Path, v2: str | None = None, v1: tuple[str, str] | None = None) -> tuple[Path, Path]:
    v2_file, v1_dir = tmp_path / "cpu.max", tmp_path / "cpu"
    if v2 is not None:
        v2_file.write_text(v2)
    if v1 is not None:
        v1_dir.mkdir()
        (v1_dir / "cpu.cfs_quota_us").write_text(v1[0])
        (v1_dir / "cpu.cfs_period_us").write_text(v1[1])
    return v2_file, v1_dir


@pytest.mark.parametrize(
    ("v2", "v1", "quota"),
    [
        ("150000 100000\n", None, 1.5),
        ("max 100000\n", ("50000", "100000"), None),  # v2 says unlimited: v1 files are not consulted
        (None, ("200000", "100000"), 2.0),
        (None, ("-1", "100000"), None),
        (None, None, None),
        ("garbage", None, None),
    ],
)
def test_a_container_cpu_limit_is_read_from_either_cgroup_version(
    tmp_path: Path, v2: str | None, v1: tuple[str, str] | None, quota: float | None
) -> None:
    assert cgroup_quota(*cgroup(tmp_path, v2, v1)) == quota


@pytest.mark.parametrize(("available", "signers"), [(1, 0), (2, 1), (3, 2), (64, MAX_DEFAULT_SIGNERS)])
def test_one_signer_per_core_beside_the_worker_by_default(
    monkeypatch: pytest.MonkeyPatch, available: int, signers: int
) -> None:
    monkeypatch.setattr(cores, "available_cores", lambda: available)
    assert default_signing_processes() == signers


def test_a_fractional_quota_rounds_up_to_a_whole_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cores, "cgroup_quota", lambda: 1.5)
    assert cores.available_cores() == min(2, len(os.sched_getaffinity(0)))


@pytest.mark.parametrize("value", ["-1", "65"])
def test_a_signing_processes_value_out_of_range_stops_start_up_naming_it(value: str) -> None:
    with pytest.raises(ConfigError, match=r"'signing_processes'.*from 0 to 64"):
        resolve_settings({}, {"STREAM_DEDUP_SIGNING_PROCESSES": value})


def test_zero_signing_processes_signs_in_the_worker() -> None:
    assert resolve_settings({}, {"STREAM_DEDUP_SIGNING_PROCESSES": "0"}).signing_processes == 0
