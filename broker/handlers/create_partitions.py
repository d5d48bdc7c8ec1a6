"""CreatePartitions: grow a topic's partition count (never shrink it)."""

from protocol.errors import ErrorCode
from protocol.messages.create_partitions import CREATE_PARTITIONS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    broker = ctx.broker
    names = [t.name for t in request.topics]
    results = []
    for topic in request.topics:
        meta = broker.metadata.topics.get(topic.name)
        error, message = ErrorCode.NONE, None
        if names.count(topic.name) > 1:
            error, message = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
        elif meta is None:
            error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic.name}' does not exist."
        elif topic.count <= meta.partitions:
            error = ErrorCode.INVALID_PARTITIONS
            message = (f"Topic currently has {meta.partitions} partitions, which is higher than the requested "
                       f"{topic.count}." if topic.count < meta.partitions
                       else f"Topic already has {meta.partitions} partitions.")
        elif topic.assignments is not None and (
                len(topic.assignments) != topic.count - meta.partitions
                or any(b != broker.broker_id for a in topic.assignments for b in a.broker_ids)):
            error, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Invalid replica assignment."
        elif not request.validate_only:
            broker.add_partitions(topic.name, topic.count)
        results.append({"name": topic.name, "error_code": error, "error_message": message})
    return {"throttle_time_ms": 0, "results": results}
