"""The records of a share group, as Kafka 4 writes them to ``__consumer_offsets``: each member (key version
10), the group's epoch with the hash of its subscribed topics' metadata (11), the target assignment's epoch
(12), each member's target (13), each member's current assignment with its epoch (14) and the share
partitions it has had (15). A member's removal tombstones its current assignment, target and record, in
Kafka's order."""

from __future__ import annotations

from kbroker.coordinators.group import records
from kbroker.coordinators.group.consumer.model import Assignment
from kbroker.coordinators.group.consumer.records import metadata_hash, wire


def topics_hash(counts: dict[bytes, int]) -> int:
    """The subscribed topics' hash (topic id -> partition count), as a consumer group's is made."""
    return metadata_hash(f"{t.hex()}:{n}" for t, n in counts.items())


def member_record(group_id: str, member) -> tuple[bytes, bytes]:
    return (records.share_member_key(10, group_id, member.member_id),
            records.share_member_value(10, {"rack_id": member.rack_id, "client_id": member.client_id,
                                            "client_host": member.client_host,
                                            "subscribed_topic_names": list(member.subscribed_topic_names)}))


def group_epoch_record(group_id: str, epoch: int, hashed: int) -> tuple[bytes, bytes]:
    return records.share_group_key(group_id), records.share_group_value(epoch, hashed)


def assignment_epoch_record(group_id: str, epoch: int) -> tuple[bytes, bytes]:
    return (records.share_member_key(12, group_id),
            records.share_member_value(12, {"assignment_epoch": epoch}))


def target_record(group_id: str, member_id: str, target: Assignment) -> tuple[bytes, bytes]:
    return (records.share_member_key(13, group_id, member_id),
            records.share_member_value(13, {"topic_partitions": wire(target)}))


def current_record(group_id: str, member_id: str, epoch: int, previous_epoch: int,
                   assigned: Assignment) -> tuple[bytes, bytes]:
    return (records.share_member_key(14, group_id, member_id),
            records.share_member_value(14, {"member_epoch": epoch, "previous_member_epoch": previous_epoch,
                                            "state": 0, "assigned_partitions": wire(assigned)}))


def member_tombstones(group_id: str, member_id: str) -> list[tuple[bytes, None]]:
    return [(records.share_member_key(kind, group_id, member_id), None) for kind in (14, 13, 10)]


def group_tombstones(group_id: str) -> list[tuple[bytes, None]]:
    """What deleting an empty group removes: its share partitions, target assignment epoch and epoch."""
    return [(records.share_partitions_key(group_id), None), (records.share_member_key(12, group_id), None),
            (records.share_group_key(group_id), None)]
