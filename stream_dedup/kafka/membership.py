"""The group membership a transaction's offsets are sent with, refused once it is lost.

``send_offsets_to_transaction(offsets, consumer.group_metadata())`` fences a
zombie (KIP-447): the broker refuses offsets sent under a generation or
member id that is no longer the group's. But kafka-python's heartbeat thread,
told by the broker that the member is unknown (a process paused past
``session_timeout_seconds``: a long GC pause, a frozen VM, a stopped
container), resets the consumer's generation to none (-1, no member id) until
the next poll joins again. Offsets sent under *no* generation are what a
consumer outside group management sends, and the broker accepts them when the
group has no member (measured on Kafka 4.3: the offsets committed, the stale
generation's were refused). A resumed zombie judging a batch between that
reset and its next poll could then commit the batch after its standby had
taken over and left the group, publishing its verdicts twice. So a
membership without a generation is refused here, before any offset is sent,
and the session ends as for any fenced commit.
"""

from kafka import KafkaConsumer
from kafka.errors import KafkaError
from kafka.structs import ConsumerGroupMetadata


class MembershipLostError(KafkaError):
    """The consumer is no longer a member of its group: its offsets must not be committed."""


def current_membership(consumer: KafkaConsumer) -> ConsumerGroupMetadata:
    """The consumer's group metadata, for ``send_offsets_to_transaction``.

    Raises :class:`MembershipLostError` when it holds no generation (see the
    module docstring): this replica was out of its group, and whoever holds
    the partitions now judges the batch.
    """
    membership = consumer.group_metadata()
    if membership.generation_id < 0 or not membership.member_id:
        raise MembershipLostError(
            f"this replica is no longer a member of group {membership.group_id!r} (was it paused, or cut off "
            "from the brokers, for longer than session_timeout_seconds?): its batch is not committed, and it "
            "joins the group again"
        )
    return membership
