"""Metadata: brokers, topics and partition leaders; auto-creates requested topics when allowed."""

from broker.metadata import topic_name_error
from protocol.errors import ErrorCode
from protocol.messages.metadata import METADATA as API  # noqa: F401  (the registry reads API)

NO_OPERATIONS = -2147483648


def brokers(ctx) -> list[dict]:
    broker = ctx.broker
    _, host, port = broker.endpoints[0]
    return [{"node_id": broker.broker_id, "host": host, "port": port, "rack": None}]


def describe_topic(ctx, name: str, error: ErrorCode = ErrorCode.NONE) -> dict:
    broker = ctx.broker
    meta = broker.metadata.topics.get(name)
    if meta is None:
        return {"error_code": error or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                "partitions": [], "topic_authorized_operations": NO_OPERATIONS}
    partitions = []
    for index in range(meta.partitions):
        p = broker.replica_manager.get(name, index)
        if p is None:
            partitions.append({"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "partition_index": index,
                               "leader_id": -1, "replica_nodes": [], "isr_nodes": []})
            continue
        partitions.append({"error_code": 0, "partition_index": index, "leader_id": p.leader_id,
                           "leader_epoch": p.leader_epoch, "replica_nodes": list(p.replicas),
                           "isr_nodes": list(p.isr), "offline_replicas": []})
    return {"error_code": 0, "name": name, "topic_id": meta.topic_id, "is_internal": meta.is_internal,
            "partitions": partitions, "topic_authorized_operations": NO_OPERATIONS}


def handle(ctx, request):
    broker = ctx.broker
    requested = request.topics
    if requested is None or (ctx.api_version == 0 and not requested):
        names = sorted(broker.metadata.topics)
        topics = [describe_topic(ctx, n) for n in names]
    else:
        by_id = {t.topic_id: n for n, t in broker.metadata.topics.items()}
        allow_create = broker.config["auto.create.topics.enable"] and request.allow_auto_topic_creation
        topics = []
        for item in requested:
            name = item.name
            if name is None:
                name = by_id.get(item.topic_id)
                if name is None:
                    topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None,
                                   "topic_id": item.topic_id, "partitions": []})
                    continue
            invalid = topic_name_error(name)
            if invalid:
                ctx.log.info("invalid_topic_name", topic=name, reason=invalid)
                topics.append({"error_code": ErrorCode.INVALID_TOPIC_EXCEPTION, "name": name, "partitions": []})
                continue
            if name not in broker.metadata.topics and allow_create and not name.startswith("__"):
                broker.create_topic(name, broker.config["num.partitions"],
                                    broker.config["default.replication.factor"], {})
            topics.append(describe_topic(ctx, name))
    return {"throttle_time_ms": 0, "brokers": brokers(ctx), "cluster_id": broker.cluster_id,
            "controller_id": broker.broker_id, "topics": topics,
            "cluster_authorized_operations": NO_OPERATIONS}
