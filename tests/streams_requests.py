"""StreamsGroupHeartbeat requests as a Kafka Streams client sends them (KIP-1071), for tests that speak the
protocol itself: a topology of subtopologies, a join, a heartbeat reporting owned tasks, a leave."""

from __future__ import annotations

STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE = 88, 89


def topic_info(name: str, partitions: int = 0, replication_factor: int = 0, **configs) -> dict:
    return {"name": name, "partitions": partitions, "replication_factor": replication_factor,
            "topic_configs": [{"key": k.replace("_", "."), "value": v} for k, v in configs.items()]}


def subtopology(subtopology_id: str, sources=(), sinks=(), changelogs=(), repartition_sources=(),
                copartition=()) -> dict:
    """``changelogs`` and ``repartition_sources``: names, or topic_info dicts; ``copartition``: groups of
    (source indexes, repartition source indexes)."""
    def infos(items):
        return [i if isinstance(i, dict) else topic_info(i) for i in items]
    return {"subtopology_id": subtopology_id, "source_topics": list(sources), "source_topic_regex": [],
            "state_changelog_topics": infos(changelogs), "repartition_sink_topics": list(sinks),
            "repartition_source_topics": infos(repartition_sources),
            "copartition_groups": [{"source_topics": list(s), "source_topic_regex": [],
                                    "repartition_source_topics": list(r)} for s, r in copartition]}


def heartbeat(group: str, member: str, epoch: int, *, topology=None, topology_epoch: int = 0,
              process: str | None = None, active=None, standby=None, warmup=None, rebalance_timeout_ms=-1,
              endpoint_epoch: int = 0, **fields) -> dict:
    """A heartbeat; ``topology`` (a list of subtopologies) makes it a join's; ``active``/``standby``/``warmup``
    map subtopology ids to partitions (None: not reported)."""
    def tasks(t):
        return None if t is None else [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in t.items()]
    body = {"group_id": group, "member_id": member, "member_epoch": epoch,
            "endpoint_information_epoch": endpoint_epoch, "instance_id": None, "rack_id": None,
            "rebalance_timeout_ms": rebalance_timeout_ms,
            "topology": None if topology is None else {"epoch": topology_epoch, "subtopologies": topology},
            "active_tasks": tasks(active), "standby_tasks": tasks(standby), "warmup_tasks": tasks(warmup),
            "process_id": process, "user_endpoint": None, "client_tags": None, "task_offsets": None,
            "task_end_offsets": None, "shutdown_application": False}
    body.update(fields)
    return body


def join(group: str, member: str, topology, *, process: str = "process-1", **fields) -> dict:
    """A member's first heartbeat, as Streams sends it: its topology, process, and no tasks."""
    fields.setdefault("rebalance_timeout_ms", 30000)
    return heartbeat(group, member, 0, topology=topology, process=process, active={}, standby={}, warmup={},
                     **fields)


def leave(group: str, member: str) -> dict:
    return heartbeat(group, member, -1)


def tasks_of(answer_tasks) -> dict[str, list[int]] | None:
    """An answer's tasks as {subtopology id: partitions}, None if it did not say."""
    if answer_tasks is None:
        return None
    return {t.subtopology_id: list(t.partitions) for t in answer_tasks}
