"""Looking at processes from outside (Linux /proc): which are running, and which a process started."""

import os
import time
from collections.abc import Iterable
from pathlib import Path


def running(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie (exited, not yet reaped) has ended."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def children(pid: int, command_fragment: str) -> list[int]:
    """Running processes whose parent is ``pid`` and whose command line holds ``command_fragment``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            parent = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
            continue
        if parent == pid and command_fragment in command and running(int(entry)):
            found.append(int(entry))
    return sorted(found)


def wait_ended(pids: Iterable[int], timeout: float) -> list[int]:
    """Wait up to ``timeout`` seconds for ``pids`` to end; return those still running."""
    deadline = time.monotonic() + timeout
    alive = [pid for pid in pids if running(pid)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [pid for pid in alive if running(pid)]
    return alive
