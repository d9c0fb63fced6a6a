"""How many CPU cores this process may use, for the default number of signer processes.

``os.cpu_count()`` counts the machine's cores, not this process's share: in
a container the CPU limit is a cgroup quota, and a process pinned to some
cores sees all of them. Starting more signers than the cores allowed only
makes them take turns.
"""

import math
import os
from pathlib import Path

#: Signer processes the default never exceeds: the worker's own share of a batch
#: (Kafka I/O, the index, the transaction) bounds the rate long before that.
MAX_DEFAULT_SIGNERS = 4
_CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")
_CGROUP_V1 = Path("/sys/fs/cgroup/cpu")


def available_cores() -> int:
    """Cores this process may run on (its affinity), capped by a cgroup CPU quota if there is one."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    quota = cgroup_quota()
    return max(1, min(cores, math.ceil(quota))) if quota is not None else max(1, cores)


def default_signing_processes() -> int:
    """One signer per core beside the worker's own, at most :data:`MAX_DEFAULT_SIGNERS`; 0 on a single core."""
    return min(MAX_DEFAULT_SIGNERS, available_cores() - 1)


def cgroup_quota(v2: Path = _CGROUP_V2, v1: Path = _CGROUP_V1) -> float | None:
    """The cgroup's CPU limit in cores (``cpu.max``, or v1's ``cfs_quota_us``), ``None`` if unlimited or unknown."""
    try:
        fields = v2.read_text().split()
        if fields[0] == "max":
            return None
        return int(fields[0]) / int(fields[1])
    except (OSError, ValueError, IndexError):
        pass
    try:
        quota = int((v1 / "cpu.cfs_quota_us").read_text())
        period = int((v1 / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota <= 0 or period <= 0 else quota / period
