"""Which role a process runs, from its settings: the runner for ``role`` = signer, shard or judge."""

from stream_dedup.roles.judge import Judge
from stream_dedup.roles.session import RoleRunner
from stream_dedup.roles.shard import Shard, records_per_step, snapshot_directory
from stream_dedup.roles.signer import Signer
from stream_dedup.roles.unique_forwards import UniqueForwards
from stream_dedup.worker.events import WorkerEvents
from stream_dedup.worker.settings import WorkerSettings
from stream_dedup.worker.snapshot_store import SnapshotStore


def role_runner(settings: WorkerSettings, events: WorkerEvents | None = None) -> RoleRunner:
    """The runner of ``settings.role`` (not ``all``: that is :class:`~stream_dedup.worker.loop.Worker`)."""
    s = settings
    events = events or WorkerEvents()
    if s.role == "signer":
        # One signer merges every partition in event-time order; several sequence in the order of their commits.
        single_active = not s.parallel_signers
        return RoleRunner(s, lambda: Signer(s, events), events, single_active, max_poll_records=s.batch_size)
    if s.role == "shard":
        store = SnapshotStore(snapshot_directory(s), s.snapshots_kept)
        texts = s.record_texts(str(snapshot_directory(s)))
        return RoleRunner(s, lambda: Shard(s, store, events, texts), events, max_poll_records=records_per_step(s))
    if s.role == "judge":
        forwards = UniqueForwards.of(s)
        return RoleRunner(s, lambda: Judge(s, forwards), events)
    raise ValueError(f"role {s.role!r} runs in worker.loop.Worker, not as a role")
