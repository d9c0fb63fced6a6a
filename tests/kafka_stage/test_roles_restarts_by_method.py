"""Roles of a sharded stage stopped at random moments under non-default methods: one process's verdicts, once each.

``test_roles_crash`` kills the roles of a stage of the default settings.
Here a signer, three shards and a judge run SimHash with a binding
hot-cluster cap and retention by count, or ``combined`` with exact
verification, containment and retention by event time; each stop is a
kill -9 or a SIGTERM of a random role, and some restarted shards find their
snapshots deleted (they rebuild from the sequenced topic alone). Every
document must get one verdict, the one a single detector gives on the
sequenced batches (which the signer's restarts cut anew, so retention is
judged on the batches as they were sequenced).
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from stream_dedup.config import DetectionConfig
from tests.corpus import make_clustered_corpus

from .stage import Stage, document_messages, produce, read_committed, role_processes, verdicts_by_source
from .test_roles import one_process_verdicts, sequenced_batches

pytestmark = pytest.mark.kafka

#: Three shards divide six slots.
SLOTS = 6

PROCESSES = {
    "signer-1": {"role": "signer"},
    "shard-0": {"role": "shard", "shard_index": 0},
    "shard-1": {"role": "shard", "shard_index": 1},
    "shard-2": {"role": "shard", "shard_index": 2},
    "judge-1": {"role": "judge"},
}

SETTINGS: dict[str, dict[str, Any]] = {
    "simhash-count": {"method": "simhash", "max_hamming": 6, "max_bucket_size": 2, "max_documents": 300},
    "combined-exact-containment-age": {
        "method": "combined",
        "max_hamming": 10,
        "threshold": 0.7,
        "verification": "exact",
        "containment_threshold": 0.7,
        "max_age_seconds": 30.0,
    },
}


@pytest.mark.parametrize(
    "name", ["combined-exact-containment-age", pytest.param("simhash-count", marks=pytest.mark.long)]
)
def test_roles_stopped_at_random_under_each_method_publish_one_process_verdicts_once(
    stage: Stage, tmp_path: Path, name: str
) -> None:
    rng = random.Random(61)
    corpus = make_clustered_corpus(1500, seed=61, copies=0.5)
    # 0.1 s apart: 30 s of age is the newest 300 documents.
    first = int(time.time() * 1000) - 200_000
    produce(stage.bootstrap, stage.input_topic, document_messages(corpus, 3, first, spacing_ms=100))
    settings = SETTINGS[name]
    common = {
        "batch_size": 25,
        "shards": 3,
        "index_slots": SLOTS,
        "snapshot_interval_seconds": 1,
        "snapshot_every_documents": 200,
        **settings,
    }
    # Any process left running is killed after the test (conftest).
    processes = role_processes(stage, tmp_path, PROCESSES, **common)
    for _ in range(8):
        time.sleep(rng.uniform(0.5, 3.0))
        victim = rng.choice(list(processes))
        process = processes[victim]
        if rng.random() < 0.5:
            process.kill()
        else:
            process.signal(signal.SIGTERM)
            # -SIGTERM: stopped while Python was still importing, before the handler was installed.
            assert process.wait(60) in (0, -signal.SIGTERM), f"{victim} stopped by SIGTERM exited with an error"
        if victim.startswith("shard") and rng.random() < 0.4:
            shutil.rmtree(stage.snapshot_root / victim, ignore_errors=True)
        process.start()
    records = read_committed(stage.bootstrap, stage.output_topic, len(corpus), timeout=300, settle=4)
    assert all(process.running() for process in processes.values()), "a role died by itself"
    published = [json.loads(r.value) for r in records]
    assert all(len(verdicts) == 1 for verdicts in verdicts_by_source(published).values())
    assert len(published) == len(corpus)
    config = DetectionConfig(index_slots=SLOTS, **settings)
    batches = sequenced_batches(stage.bootstrap, f"{stage.group_id}.sequenced", config)
    assert sorted(d for b in batches for d in b.entry.documents.ids) == sorted(f"doc-{i}" for i in range(len(corpus)))
    expected = one_process_verdicts(batches, config, stage)
    wrong = {v["id"]: (v, expected[v["id"]]) for v in published if v != expected[v["id"]]}
    assert not wrong, f"{len(wrong)} verdicts differ from one process's, e.g. {next(iter(wrong.items()))}"
    assert sum(v["verdict"] != "unique" for v in published) > 100
