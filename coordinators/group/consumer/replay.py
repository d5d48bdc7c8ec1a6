"""Applying one KIP-848 record of ``__consumer_offsets`` to the groups of a coordinator.

The only way a consumer group's state changes, at load and after each successful append alike. A group's
offsets live on whichever group object holds the id: a consumer group made over an empty classic group (or
over offsets alone) takes them over, and a consumer group whose epoch record is tombstoned leaves them to an
empty classic group, as Kafka keeps offsets apart from group metadata.
"""

from __future__ import annotations

from kbroker.coordinators.group.consumer.model import (
    ClassicMetadata, ConsumerGroup, ConsumerMember, MemberState, normalized)
from kbroker.coordinators.group.group import GroupMetadata
from kbroker.coordinators.group.records import ConsumerGroupKey


def _assignment(topic_partitions) -> dict:
    return normalized({bytes(tp.topic_id): tp.partitions for tp in topic_partitions})


def _classic(value) -> ClassicMetadata | None:
    if value is None:
        return None
    return ClassicMetadata(value.session_timeout_ms,
                           tuple((p.name, bytes(p.metadata)) for p in value.supported_protocols))


def typed_group(groups: dict, group_id: str, kind=ConsumerGroup):
    """The group of type ``kind`` holding the id, made over whatever held it before (taking its offsets)."""
    group = groups.get(group_id)
    if isinstance(group, kind):
        return group
    fresh = kind(group_id)
    if group is not None:
        fresh.offsets, fresh.pending_txn_offsets = group.offsets, group.pending_txn_offsets
    groups[group_id] = fresh
    return fresh


def replay_consumer_record(groups: dict, key: ConsumerGroupKey, value, now_ms: int) -> None:
    existing = groups.get(key.group)
    if value is None and not isinstance(existing, ConsumerGroup):
        return
    if key.kind == 4:      # Kafka 4.0's subscription metadata: recomputed from the topics instead
        return
    group = typed_group(groups, key.group)
    if key.kind == 3:
        if value is None:
            drop_keeping_offsets(groups, group)
        else:
            group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash
            group.state_timestamp_ms = now_ms
    elif key.kind == 6:
        group.assignment_epoch = value.assignment_epoch if value is not None else 0
    elif key.kind == 7:
        if value is None:
            group.target.pop(key.member, None)
        else:
            group.target[key.member] = _assignment(value.topic_partitions)
    elif key.kind == 5:
        if value is None:
            group.remove_member(key.member)
        else:
            member = group.members.get(key.member) or ConsumerMember(key.member)
            group.put_member(member.with_(
                instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
                client_host=value.client_host, subscribed_topic_names=tuple(value.subscribed_topic_names),
                subscribed_topic_regex=value.subscribed_topic_regex,
                rebalance_timeout_ms=value.rebalance_timeout_ms, server_assignor=value.server_assignor,
                classic=_classic(value.classic_member_metadata)))
    elif key.kind == 8:
        member = group.members.get(key.member)
        if value is None:
            if member is not None:
                group.put_member(member.with_(member_epoch=0, previous_member_epoch=0, state=MemberState.STABLE,
                                              assigned={}, pending_revocation={}))
            return
        try:
            state = MemberState(value.state)
        except ValueError:
            state = MemberState.UNKNOWN
        group.put_member((member or ConsumerMember(key.member)).with_(
            member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch, state=state,
            assigned=_assignment(value.assigned_partitions),
            pending_revocation=_assignment(value.partitions_pending_revocation)))


def drop_keeping_offsets(groups: dict, group) -> None:
    """A KIP-848, or KIP-1071, group whose epoch record is tombstoned: its offsets stay with an empty classic
    group."""
    if groups.get(group.group_id) is not group:
        return
    if group.offsets or group.pending_txn_offsets:
        holder = GroupMetadata(group.group_id, offsets=group.offsets)
        holder.pending_txn_offsets = group.pending_txn_offsets
        groups[group.group_id] = holder
    else:
        del groups[group.group_id]
