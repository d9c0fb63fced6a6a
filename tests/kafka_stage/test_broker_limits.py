"""Brokers whose limits refuse our timeouts: start-up stops at once, exit 2, naming our setting and theirs.

One jar broker for the module, with transaction.max.timeout.ms and
group.max.session.timeout.ms below the stage's defaults (15 s and 10 s). It
refuses the transactional producer (INVALID_TRANSACTION_TIMEOUT) and, with
the transaction timeout lowered, the group join (INVALID_SESSION_TIMEOUT).
Each new session would be refused the same way: the process must not retry.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .broker import JarBroker, jar_broker
from .stage import REPO

pytestmark = pytest.mark.kafka

#: Below the defaults of transaction_timeout_seconds (15) and session_timeout_seconds (10).
LIMITS = {"transaction.max.timeout.ms": "5000", "group.max.session.timeout.ms": "8000"}


@pytest.fixture(scope="module")
def strict_broker() -> Iterator[JarBroker]:
    with jar_broker(overrides=LIMITS) as broker:
        yield broker


@pytest.mark.parametrize("role", ["all", "signer"])
@pytest.mark.parametrize(
    ("settings", "ours", "theirs"),
    [
        ({}, "transaction_timeout_seconds", "transaction.max.timeout.ms"),
        ({"transaction_timeout_seconds": "4"}, "session_timeout_seconds", "group.max.session.timeout.ms"),
    ],
)
def test_a_timeout_the_brokers_refuse_stops_start_up_naming_both_settings(
    strict_broker: JarBroker, tmp_path: Path, role: str, settings: dict[str, str], ours: str, theirs: str
) -> None:
    name = f"limits-{uuid.uuid4().hex[:8]}"
    values = {
        "bootstrap_servers": strict_broker.bootstrap,
        "group_id": name,
        "input_topic": f"{name}-in",
        "output_topic": f"{name}-out",
        "dead_letter_topic": f"{name}-dead",
        "role": role,
        "signing_processes": "0",
        "snapshot_dir": str(tmp_path),
        "metrics_port": "0",
        "log_format": "json",
        **settings,
    }
    environment = {f"STREAM_DEDUP_{setting.upper()}": value for setting, value in values.items()}
    # Restarting the session forever would run into the timeout (the first restart alone waits 1 s, then 2 s...).
    run = subprocess.run(
        [sys.executable, "-m", "stream_dedup.cli.main", "run"],
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO,
    )
    assert run.returncode == 2, run.stderr[-3000:]
    ours_lines = [line for line in run.stderr.splitlines() if line.startswith("stream-dedup:")]
    assert len(ours_lines) == 1, run.stderr[-3000:]
    assert ours_lines[0].startswith(f"stream-dedup: invalid setting '{ours}': the brokers refuse")
    assert theirs in ours_lines[0]
    assert "restarting the session" not in run.stderr
