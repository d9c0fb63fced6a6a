"""Another process under this replica's ``instance_id``: a settings error to report, not a Kafka fault to retry.

A replica's ``instance_id`` is its static group membership and part of its
transactional id. A second process started with the same one (a compose
service scaled to two containers under one fixed id, a manifest copied
without changing it) fences the first twice over: its producer at
``init_transactions`` and its membership at the join. The fenced process's
next commit fails (ProducerFencedError), and, retried as any Kafka error,
its new session fences the other in turn: the two take the partitions from
each other for ever, each takeover a restore, the verdicts right but the
throughput gone (measured: 3,000 documents over 60 s, each replica fenced
five times, the restart pauses growing to 16 s) and nothing saying why.

A fenced member with nothing to commit hears no more from its coordinator
(kafka-python stops heartbeating it), which ends its session after a while
(:mod:`stream_dedup.kafka.coordinator_silence`): that too may be a fencing.

Neither error alone tells: the brokers also fence a producer whose
transaction they timed out (a stalled commit), and a coordinator falls
silent when the brokers go away, which a new session cures. The group
tells: it lists one member per instance id. If the member holding ours is
not the one this process joined as, another process holds the id now, and
this one stops with a message naming the setting. The same message fits a
replica that was replaced (paused or cut off past its session while a new
process started under its name): it must stop too.
"""

import logging

from kafka import KafkaAdminClient
from kafka.errors import FencedInstanceIdError, KafkaError, ProducerFencedError

from stream_dedup.errors import ConfigError
from stream_dedup.kafka.clients import KafkaConnection
from stream_dedup.kafka.coordinator_silence import CoordinatorSilentError

log = logging.getLogger(__name__)

#: Longest wait for the brokers to say who holds the instance id.
_ASK_MS = 5000


def raise_if_instance_taken(
    error: KafkaError, connection: KafkaConnection, group_id: str, instance_id: str, member_id: str | None
) -> None:
    """Raise a :class:`ConfigError` naming ``instance_id`` if ``error`` is this replica fenced by another process.

    ``member_id`` is the member id this process last joined ``group_id`` as
    (``None`` before its first join: nothing to compare). A group that cannot
    be described (the brokers away) counts as no clash: the session restarts
    as for any Kafka error, and the next fencing asks again.
    """
    if member_id is None or not isinstance(error, ProducerFencedError | FencedInstanceIdError | CoordinatorSilentError):
        return
    holder = _member_holding(connection, group_id, instance_id)
    if holder is None or holder == member_id:
        return
    raise ConfigError(
        "instance_id",
        f"another process joined group {group_id!r} as instance_id {instance_id!r} and fenced this one (the group's "
        f"member for it is now {holder}, this process was {member_id}). Two replicas running under one "
        "instance_id take the partitions from each other for ever: give each its own (STREAM_DEDUP_INSTANCE_ID; "
        "the default is the host name). If this replica was paused or cut off and a new one started in its "
        "place, nothing is lost: the new one holds the partitions",
    ) from error


def _member_holding(connection: KafkaConnection, group_id: str, instance_id: str) -> str | None:
    """The member id of ``group_id``'s member with ``instance_id``; ``None`` if it has none or cannot be asked."""
    try:
        # Bounded: with the brokers away (the usual reason a coordinator falls silent) it would wait 30 s.
        admin = KafkaAdminClient(**connection.options(), bootstrap_timeout_ms=_ASK_MS, request_timeout_ms=_ASK_MS)
        try:
            described = admin.describe_groups([group_id]).get(group_id, {})
        finally:
            admin.close()
    except KafkaError as error:
        log.warning("could not describe group %r to see who holds instance_id %r: %r", group_id, instance_id, error)
        return None
    for member in described.get("members") or []:
        if member.get("group_instance_id") == instance_id:
            return str(member.get("member_id"))
    return None
