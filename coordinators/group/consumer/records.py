"""The records of a KIP-848 consumer group, as Kafka 4 writes them to ``__consumer_offsets``: the group's epoch
(key version 3), each member (5), the target assignment's epoch (6) and each member's target (7), and each
member's current assignment with its epochs and state (8). A tombstone removes one; a group's removal writes
them in Kafka's order, members' current assignments first, the group's epoch last."""

from __future__ import annotations

import hashlib
from typing import Iterable

from kbroker.coordinators.group import records
from kbroker.coordinators.group.consumer.model import Assignment, ConsumerGroup, ConsumerMember


def wire(a: Assignment) -> list:
    """An assignment as records and answers carry it: topics by id, partitions sorted (share groups' too)."""
    return [{"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(a.items())]


def metadata_hash(described: Iterable[str]) -> int:
    """The hash of a group's subscribed topics, one line per topic, that is the same in every process (a
    group's epoch record keeps it; a different one at a heartbeat moves the epoch)."""
    digest = hashlib.blake2b("\n".join(sorted(described)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def member_record(group_id: str, member: ConsumerMember) -> tuple[bytes, bytes]:
    return (records.consumer_group_key(5, group_id, member.member_id),
            records.consumer_group_value(5, {
                "instance_id": member.instance_id, "rack_id": member.rack_id, "client_id": member.client_id,
                "client_host": member.client_host, "subscribed_topic_names": list(member.subscribed_topic_names),
                "subscribed_topic_regex": member.subscribed_topic_regex,
                "rebalance_timeout_ms": member.rebalance_timeout_ms, "server_assignor": member.server_assignor,
                "classic_member_metadata": None if member.classic is None else {
                    "session_timeout_ms": member.classic.session_timeout_ms,
                    "supported_protocols": [{"name": n, "metadata": m} for n, m in member.classic.protocols]}}))


def current_record(group_id: str, member: ConsumerMember) -> tuple[bytes, bytes]:
    return (records.consumer_group_key(8, group_id, member.member_id),
            records.consumer_group_value(8, {
                "member_epoch": member.member_epoch, "previous_member_epoch": member.previous_member_epoch,
                "state": int(member.state), "assigned_partitions": wire(member.assigned),
                "partitions_pending_revocation": wire(member.pending_revocation)}))


def target_record(group_id: str, member_id: str, target: Assignment) -> tuple[bytes, bytes]:
    return (records.consumer_group_key(7, group_id, member_id),
            records.consumer_group_value(7, {"topic_partitions": wire(target)}))


def epoch_record(group_id: str, epoch: int, metadata_hash: int) -> tuple[bytes, bytes]:
    return (records.consumer_group_key(3, group_id),
            records.consumer_group_value(3, {"epoch": epoch, "metadata_hash": metadata_hash}))


def assignment_epoch_record(group_id: str, epoch: int) -> tuple[bytes, bytes]:
    return records.consumer_group_key(6, group_id), records.consumer_group_value(6, {"assignment_epoch": epoch})


def member_tombstones(group_id: str, member_id: str) -> list[tuple[bytes, None]]:
    """Kafka's order: current assignment, target, then the member itself."""
    return [(records.consumer_group_key(8, group_id, member_id), None),
            (records.consumer_group_key(7, group_id, member_id), None),
            (records.consumer_group_key(5, group_id, member_id), None)]


def group_tombstones(group: ConsumerGroup) -> list[tuple[bytes, None]]:
    out = []
    for member_id in group.members:
        out += member_tombstones(group.group_id, member_id)
    return out + [(records.consumer_group_key(6, group.group_id), None),
                  (records.consumer_group_key(3, group.group_id), None)]
