"""How a consumer group reads in ConsumerGroupDescribe: epochs, the assignor, and each member's current and
target assignment with topic names. (The classic DescribeGroups answers for a consumer group as for no group,
as Kafka 4.2 does.)"""

from __future__ import annotations

from kbroker.coordinators.group.consumer.assignors import assignor_of
from kbroker.coordinators.group.consumer.model import Assignment, ConsumerGroup


def _described(assignment: Assignment, names: dict[bytes, str]) -> dict:
    return {"topic_partitions": [{"topic_id": t, "topic_name": names.get(t, ""), "partitions": sorted(ps)}
                                 for t, ps in sorted(assignment.items())]}


def consumer_group_description(group: ConsumerGroup, names: dict[bytes, str], default_assignor: str) -> dict:
    """``names``: topic id -> name of the topics there are."""
    members = [{"member_id": m.member_id, "instance_id": m.instance_id, "rack_id": m.rack_id,
                "member_epoch": m.member_epoch, "client_id": m.client_id, "client_host": m.client_host,
                "subscribed_topic_names": list(m.subscribed_topic_names),
                "subscribed_topic_regex": m.subscribed_topic_regex,
                "assignment": _described(m.assigned, names),
                "target_assignment": _described(group.target.get(m.member_id, {}), names),
                "member_type": 0 if m.classic else 1} for m in group.members.values()]
    return {"error_code": 0, "error_message": None, "group_id": group.group_id, "group_state": group.state,
            "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "assignor_name": assignor_of(group.members.values(), default_assignor), "members": members,
            "authorized_operations": -2147483648}
