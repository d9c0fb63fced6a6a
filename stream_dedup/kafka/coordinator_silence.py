"""A group member that hears nothing from its group coordinator for too long ends its session.

kafka-python heartbeats from its own thread. When the coordinator stops
answering (its broker stopped, crashed, or cut off from this replica), it
marks the coordinator dead and looks for it again, for as long as it takes,
and tells the caller nothing: ``poll()`` returns no records, as for a quiet
input. A standby then tailed nothing and said "standby" (ready, its heartbeat
fresh) through a broker outage of any length: a PodDisruptionBudget counted
it and ``StreamDedupNoStandby`` stayed silent, though it could take over
nothing; an active replica with a quiet input said "active" until some other
request timed out. So a member that has heard nothing from its coordinator
for three session timeouts (the broker itself drops a member after one)
raises :class:`CoordinatorSilentError`, a Kafka error, as a join that never
completes does: the session ends, the replica is not ready (role
``restoring``) but alive, and a new session restores and joins once the
brokers answer again, by itself.

A word from the coordinator is a heartbeat answered, or a join completed.
Finding the coordinator again is not one: any broker answers that, also
while the coordinator itself stays out of reach.
"""

import time

from kafka import KafkaConsumer
from kafka.errors import KafkaError

#: Session timeouts without a word from the coordinator after which the session ends.
SILENT_SESSION_TIMEOUTS = 3


class CoordinatorSilentError(KafkaError):
    """The group coordinator has not answered for too long: the session ends, and a new one joins again."""


def check_heard_from_coordinator(consumer: KafkaConsumer, joined_at: float, session_timeout_seconds: float) -> None:
    """Raise :class:`CoordinatorSilentError` if ``consumer`` heard nothing from its group coordinator for
    ``SILENT_SESSION_TIMEOUTS`` x ``session_timeout_seconds``.

    ``joined_at`` (``time.monotonic()``) is when its last join completed; call
    this only while no join is under way (a join has its own limit).
    """
    # kafka-python notes the time of the last heartbeat answered only here.
    answered = consumer._coordinator.heartbeat.last_receive
    silent = time.monotonic() - max(answered, joined_at)
    limit = SILENT_SESSION_TIMEOUTS * session_timeout_seconds
    if silent > limit:
        group = consumer.config["group_id"]
        raise CoordinatorSilentError(
            f"no answer from the coordinator of group {group!r} for {silent:.0f} s "
            f"({SILENT_SESSION_TIMEOUTS} x session_timeout_seconds): are the brokers reachable? The session "
            "ends; a new one restores and joins once they answer"
        )


def heard_from_coordinator_lately(consumer: KafkaConsumer) -> bool:
    """Whether ``consumer``'s group coordinator answered a heartbeat within the last two heartbeat intervals.

    Asked before a transaction nothing else calls for (offsets past
    transaction markers): begun while the brokers are away, it would only
    wait for them.
    """
    answered = consumer._coordinator.heartbeat.last_receive
    return bool(time.monotonic() - answered < 2 * consumer.config["heartbeat_interval_ms"] / 1000)
