"""What the group decided, as the role loop reads it: holding, standing by, or waiting for a join."""

from kafka import TopicPartition

from stream_dedup.kafka.assignments import AssignmentNotes

PARTITION = TopicPartition("sequenced", 0)


def test_a_member_stands_by_only_after_an_empty_assignment_and_until_the_next_join() -> None:
    notes = AssignmentNotes()
    assert not notes.standing_by, "joining: nothing assigned yet"
    notes.on_partitions_assigned([])
    assert notes.take() == [] and notes.standing_by
    notes.on_partitions_revoked([])
    assert not notes.standing_by and notes.join_waited() >= 0, "a rebalance: joining again"
    notes.on_partitions_assigned([PARTITION])
    assert notes.take() == [PARTITION]
    notes.holding = True
    assert not notes.standing_by
    assert notes.take() is None, "an assignment is taken once"
