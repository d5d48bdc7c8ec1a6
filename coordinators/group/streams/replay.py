"""Applying one streams group record of ``__consumer_offsets`` to the groups of a coordinator.

The only way a streams group's state changes, at load and after each successful append alike. As for consumer
groups, a group's offsets live on whichever group object holds its id: a streams group made over an empty
classic group (or over offsets alone) takes them over, and one whose epoch record is tombstoned leaves them to
an empty classic group.
"""

from __future__ import annotations

from kbroker.coordinators.group.consumer.replay import drop_keeping_offsets, typed_group
from kbroker.coordinators.group.records import StreamsGroupKey
from kbroker.coordinators.group.streams.model import (
    MemberState, StreamsGroup, StreamsMember, Subtopology, Target, TopicInfo, Topology, tasks)


def _tasks(task_ids) -> dict:
    return tasks((t.subtopology_id, t.partitions) for t in task_ids)


def _active(task_ids, fallback_epoch: int) -> dict:
    out = {}
    for t in task_ids:
        epochs = t.assignment_epochs if t.assignment_epochs is not None else [fallback_epoch] * len(t.partitions)
        if t.partitions:
            out[t.subtopology_id] = dict(zip(t.partitions, epochs))
    return out


def _topic_info(i) -> TopicInfo:
    return TopicInfo(i.name, i.partitions, i.replication_factor, tuple((c.key, c.value) for c in i.topic_configs))


def topology_of(value) -> Topology:
    """A topology from its record (or a heartbeat's request: the two carry the same fields)."""
    return Topology(value.epoch, tuple(
        Subtopology(s.subtopology_id, tuple(s.source_topics), tuple(s.repartition_sink_topics),
                    tuple(_topic_info(i) for i in s.state_changelog_topics),
                    tuple(_topic_info(i) for i in s.repartition_source_topics),
                    tuple((tuple(g.source_topics), tuple(g.repartition_source_topics)) for g in s.copartition_groups))
        for s in value.subtopologies))


def replay_streams_record(groups: dict, key: StreamsGroupKey, value, now_ms: int) -> None:
    existing = groups.get(key.group)
    if value is None and not isinstance(existing, StreamsGroup):
        return
    group = typed_group(groups, key.group, StreamsGroup)
    if key.kind == 17:
        if value is None:
            drop_keeping_offsets(groups, group)
            return
        group.group_epoch, group.metadata_hash = value.epoch, value.metadata_hash
        group.validated_topology_epoch = value.validated_topology_epoch
        group.assignment_configs = {c.key: c.value for c in value.last_assignment_configs or ()}
        group.state_timestamp_ms = now_ms
    elif key.kind == 23:
        group.topology = None if value is None else topology_of(value)
    elif key.kind == 20:
        group.assignment_epoch = value.assignment_epoch if value is not None else 0
    elif key.kind == 21:
        if value is None:
            group.target.pop(key.member, None)
        else:
            group.target[key.member] = Target(_tasks(value.active_tasks), _tasks(value.standby_tasks),
                                              _tasks(value.warmup_tasks))
    elif key.kind == 19:
        if value is None:
            group.members.pop(key.member, None)
            if not group.members:     # (an empty group forgets a shutdown request, as Kafka's does)
                group.shutdown_requested_by = None
            return
        member = group.members.get(key.member) or StreamsMember(key.member)
        endpoint = None if value.user_endpoint is None else (value.user_endpoint.host, value.user_endpoint.port)
        group.put_member(member.with_(
            instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id,
            client_host=value.client_host, rebalance_timeout_ms=value.rebalance_timeout_ms,
            topology_epoch=value.topology_epoch, process_id=value.process_id, user_endpoint=endpoint,
            client_tags=tuple((t.key, t.value) for t in value.client_tags)))
    elif key.kind == 22:
        member = group.members.get(key.member)
        if value is None:
            if member is not None:
                group.put_member(member.with_(
                    member_epoch=0, previous_member_epoch=-1, state=MemberState.STABLE, active={}, standby={},
                    warmup={}, active_revoking={}, standby_revoking={}, warmup_revoking={}))
            return
        try:
            state = MemberState(value.state)
        except ValueError:
            state = MemberState.UNKNOWN
        group.put_member((member or StreamsMember(key.member)).with_(
            member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch, state=state,
            active=_active(value.active_tasks, value.member_epoch), standby=_tasks(value.standby_tasks),
            warmup=_tasks(value.warmup_tasks),
            active_revoking=_active(value.active_tasks_pending_revocation, value.member_epoch),
            standby_revoking=_tasks(value.standby_tasks_pending_revocation),
            warmup_revoking=_tasks(value.warmup_tasks_pending_revocation)))
