"""A partition assignor that gives every input partition to one member of the group.

The index is global: every document is compared with every earlier one, in
whatever partition it arrived. Two members splitting the partitions would
split the index, and each would miss the other's duplicates. So one member
(the *active* one) gets everything and the others get nothing: they stand by,
tail the changelog to keep a warm copy of the index, and take over when the
active member leaves or dies (the group then rebalances without it).

The choice is sticky: a member that holds the partitions says so in its
subscription's user data, and keeps them when a standby joins. Without that,
a standby restarting would steal the partitions from a healthy active member
and force a needless handover.
"""

from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription

_HOLDER = b"active"
_NOT_HOLDER = b""


class SingleActiveAssignor(AbstractPartitionAssignor):
    """All partitions to one member: the current holder if any, else the first by instance id."""

    name = "stream-dedup-single-active"
    version = 0

    def __init__(self) -> None:
        self.holds_partitions = False

    def assign(self, cluster, members):  # type: ignore[no-untyped-def]  # kafka-python's signature
        ranked = sorted(
            members,
            key=lambda m: (m.metadata.user_data != _HOLDER, m.group_instance_id or "", m.member_id),
        )
        chosen = ranked[0].member_id if ranked else None
        topics = sorted({topic for member in members for topic in member.metadata.topics})
        everything = [(topic, sorted(cluster.partitions_for_topic(topic) or ())) for topic in topics]
        return {
            member.member_id: ConsumerProtocolAssignment(
                self.version, everything if member.member_id == chosen else [], b""
            )
            for member in members
        }

    def metadata(self, topics):  # type: ignore[no-untyped-def]
        return ConsumerProtocolSubscription(
            self.version, sorted(topics), _HOLDER if self.holds_partitions else _NOT_HOLDER
        )

    def on_assignment(self, assignment, generation):  # type: ignore[no-untyped-def]
        self.holds_partitions = bool(assignment.partitions())
