"""A streams group as StreamsGroupDescribe shows it: its topology as configured against the cluster's topics
(internal topics with the partition counts the coordinator decided) once ready, else as its members sent it;
each member with its current and target tasks."""

from __future__ import annotations

from kbroker.coordinators.group.streams.model import StreamsGroup, Target, keys
from kbroker.coordinators.group.streams.records import wire
from kbroker.storage.java_order import hash_order


def _topic_info(info, partitions: int | None = None) -> dict:
    configs = dict(info.configs)
    names = hash_order(configs) if partitions is not None else list(configs)   # (a HashMap once configured)
    return {"name": info.name, "partitions": info.partitions if partitions is None else partitions,
            "replication_factor": info.replication_factor,
            "topic_configs": [{"key": k, "value": configs[k]} for k in names]}


def _topology(group: StreamsGroup, configured) -> dict:
    ready = configured is not None and configured.is_ready
    subtopologies = []
    for s in sorted(group.topology.subtopologies, key=lambda s: s.subtopology_id):
        def infos(topics):
            return sorted((_topic_info(i, configured.internal[i.name] if ready else None) for i in topics),
                          key=lambda i: i["name"])
        subtopologies.append({"subtopology_id": s.subtopology_id, "source_topics": sorted(s.source_topics),
                              "repartition_sink_topics": sorted(s.repartition_sink_topics),
                              "state_changelog_topics": infos(s.state_changelog_topics),
                              "repartition_source_topics": infos(s.repartition_source_topics)})
    return {"epoch": group.topology.epoch, "subtopologies": subtopologies}


def _assignment(active, standby, warmup) -> dict:
    return {"active_tasks": wire(active), "standby_tasks": wire(standby), "warmup_tasks": wire(warmup)}


def streams_group_description(group: StreamsGroup, configured) -> dict:
    """``configured``: the topology against the cluster's topics now (topology.configure), or None."""
    members = []
    for m in group.members.values():
        target = group.target.get(m.member_id, Target())
        endpoint = None if m.user_endpoint is None else {"host": m.user_endpoint[0], "port": m.user_endpoint[1]}
        members.append({
            "member_id": m.member_id, "member_epoch": m.member_epoch, "instance_id": m.instance_id,
            "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
            "topology_epoch": m.topology_epoch, "process_id": m.process_id, "user_endpoint": endpoint,
            "client_tags": [{"key": k, "value": v} for k, v in m.client_tags], "task_offsets": [],
            "task_end_offsets": [], "assignment": _assignment(keys(m.active), m.standby, m.warmup),
            "target_assignment": _assignment(target.active, target.standby, target.warmup), "is_classic": False})
    return {"error_code": 0, "error_message": None, "group_id": group.group_id, "group_state": group.state,
            "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
            "topology": _topology(group, configured) if group.topology is not None else None,
            "members": members, "authorized_operations": -2147483648}
