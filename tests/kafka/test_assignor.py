"""One member gets every partition; the holder keeps them when others join."""

from typing import Any, NamedTuple

from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription

from stream_dedup.kafka.assignor import SingleActiveAssignor


class Cluster:
    def partitions_for_topic(self, topic: str) -> set[int]:
        return {0, 1, 2}


class Member(NamedTuple):
    member_id: str
    group_instance_id: str | None
    metadata: Any


def member(name: str, holder: bool = False) -> Member:
    assignor = SingleActiveAssignor()
    assignor.holds_partitions = holder
    return Member(f"{name}-uuid", name, assignor.metadata({"documents"}))


def assigned(result: dict[str, Any]) -> dict[str, list[Any]]:
    return {member_id: assignment.partitions() for member_id, assignment in result.items()}


def test_every_partition_goes_to_one_member() -> None:
    result = assigned(SingleActiveAssignor().assign(Cluster(), [member("b"), member("a"), member("c")]))
    assert [len(p) for p in result.values()].count(3) == 1
    assert result["a-uuid"] and not result["b-uuid"] and not result["c-uuid"]


def test_the_current_holder_keeps_the_partitions_when_a_standby_joins() -> None:
    result = assigned(SingleActiveAssignor().assign(Cluster(), [member("a"), member("z", holder=True)]))
    assert len(result["z-uuid"]) == 3 and not result["a-uuid"]


def test_on_assignment_remembers_whether_this_member_holds_partitions() -> None:
    assignor = SingleActiveAssignor()
    winner = SingleActiveAssignor().assign(Cluster(), [Member("m", "m", assignor.metadata({"documents"}))])["m"]
    assignor.on_assignment(winner, generation=1)
    assert assignor.metadata({"documents"}).user_data != ConsumerProtocolSubscription(0, [], b"").user_data
