"""The records of a streams group, as Kafka 4.2 writes them to ``__consumer_offsets``: the group's epoch with its
topics' hash, validated topology epoch and assignment configs (key version 17), each member (19), the target
assignment's epoch (20), each member's target (21), each member's current assignment (22) and the topology
(23). A group's removal writes tombstones in Kafka's order: current assignments, targets, the target epoch,
members, the epoch, the topology."""

from __future__ import annotations

from kbroker.coordinators.group import records
from kbroker.coordinators.group.streams.model import (
    ActiveTasks, StreamsGroup, StreamsMember, Target, Tasks, Topology)


def wire(t: Tasks) -> list:
    """Tasks as records and answers carry them: by subtopology id, partitions sorted."""
    return [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(t.items()) if ps]


def wire_with_epochs(t: ActiveTasks) -> list:
    return [{"subtopology_id": s, "partitions": sorted(ps), "assignment_epochs": [ps[p] for p in sorted(ps)]}
            for s, ps in sorted(t.items()) if ps]


def topology_value(topology: Topology) -> dict:
    def info(i):
        return {"name": i.name, "partitions": i.partitions, "replication_factor": i.replication_factor,
                "topic_configs": [{"key": k, "value": v} for k, v in i.configs]}
    return {"epoch": topology.epoch, "subtopologies": [
        {"subtopology_id": s.subtopology_id, "source_topics": list(s.source_topics), "source_topic_regex": [],
         "state_changelog_topics": [info(i) for i in s.state_changelog_topics],
         "repartition_sink_topics": list(s.repartition_sink_topics),
         "repartition_source_topics": [info(i) for i in s.repartition_source_topics],
         "copartition_groups": [{"source_topics": list(src), "source_topic_regex": [],
                                 "repartition_source_topics": list(rep)} for src, rep in s.copartition_groups]}
        for s in topology.subtopologies]}


def topology_record(group_id: str, topology: Topology) -> tuple[bytes, bytes]:
    return records.streams_group_key(23, group_id), records.streams_group_value(23, topology_value(topology))


def epoch_record(group_id: str, epoch: int, metadata_hash: int, validated_topology_epoch: int,
                 configs: dict[str, str]) -> tuple[bytes, bytes]:
    return (records.streams_group_key(17, group_id), records.streams_group_value(17, {
        "epoch": epoch, "metadata_hash": metadata_hash, "validated_topology_epoch": validated_topology_epoch,
        "last_assignment_configs": [{"key": k, "value": v} for k, v in sorted(configs.items())]}))


def member_record(group_id: str, member: StreamsMember) -> tuple[bytes, bytes]:
    endpoint = None if member.user_endpoint is None else {"host": member.user_endpoint[0],
                                                          "port": member.user_endpoint[1]}
    return (records.streams_group_key(19, group_id, member.member_id), records.streams_group_value(19, {
        "instance_id": member.instance_id, "rack_id": member.rack_id, "client_id": member.client_id,
        "client_host": member.client_host, "rebalance_timeout_ms": member.rebalance_timeout_ms,
        "topology_epoch": member.topology_epoch, "process_id": member.process_id, "user_endpoint": endpoint,
        "client_tags": [{"key": k, "value": v} for k, v in member.client_tags]}))


def assignment_epoch_record(group_id: str, epoch: int) -> tuple[bytes, bytes]:
    return records.streams_group_key(20, group_id), records.streams_group_value(20, {"assignment_epoch": epoch})


def target_record(group_id: str, member_id: str, target: Target) -> tuple[bytes, bytes]:
    return (records.streams_group_key(21, group_id, member_id), records.streams_group_value(21, {
        "active_tasks": wire(target.active), "standby_tasks": wire(target.standby),
        "warmup_tasks": wire(target.warmup)}))


def current_record(group_id: str, member: StreamsMember) -> tuple[bytes, bytes]:
    return (records.streams_group_key(22, group_id, member.member_id), records.streams_group_value(22, {
        "member_epoch": member.member_epoch, "previous_member_epoch": member.previous_member_epoch,
        "state": int(member.state), "active_tasks": wire_with_epochs(member.active),
        "standby_tasks": wire(member.standby), "warmup_tasks": wire(member.warmup),
        "active_tasks_pending_revocation": wire_with_epochs(member.active_revoking),
        "standby_tasks_pending_revocation": wire(member.standby_revoking),
        "warmup_tasks_pending_revocation": wire(member.warmup_revoking)}))


def member_tombstones(group_id: str, member_id: str) -> list[tuple[bytes, None]]:
    """Kafka's order: current assignment, target, then the member itself."""
    return [(records.streams_group_key(kind, group_id, member_id), None) for kind in (22, 21, 19)]


def group_tombstones(group: StreamsGroup) -> list[tuple[bytes, None]]:
    gid = group.group_id
    return ([(records.streams_group_key(22, gid, m), None) for m in group.members]
            + [(records.streams_group_key(21, gid, m), None) for m in group.members]
            + [(records.streams_group_key(20, gid), None)]
            + [(records.streams_group_key(19, gid, m), None) for m in group.members]
            + [(records.streams_group_key(17, gid), None), (records.streams_group_key(23, gid), None)])
