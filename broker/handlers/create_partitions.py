"""CreatePartitions: grow a topic's partition count (never shrink it)."""

from kbroker.broker.configuration.quotas import mutation_quota, mutation_throttle
from kbroker.broker.handlers.common import PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS
from kbroker.protocol.acls import ALTER, TOPIC
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.create_partitions import CREATE_PARTITIONS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    broker = ctx.broker
    names = [t.name for t in request.topics]
    live = {b[0] for b in broker.live_brokers()}
    results, answered = [], set()
    quota = mutation_quota(ctx, strict_since=3)
    # (one record per new partition: an operation past what Kafka's controller writes at once is refused whole)
    known = broker.metadata.topics
    if sum(t.count - known[t.name].partitions for t in request.topics
           if t.name in known and t.count > known[t.name].partitions) > PARTITIONS_PER_REQUEST:
        ctx.log.info("create_partitions_too_large", topics=len(names))
        return {"throttle_time_ms": 0, "results": [
            {"name": name, "error_code": ErrorCode.POLICY_VIOLATION, "error_message": TOO_MANY_PARTITIONS}
            for name in dict.fromkeys(names)]}
    for topic in request.topics:
        if topic.name in answered:
            continue   # (a duplicated topic is answered once, as Kafka's)
        answered.add(topic.name)
        meta = broker.metadata.topics.get(topic.name)
        error, message = ErrorCode.NONE, None
        if names.count(topic.name) > 1:
            error, message = ErrorCode.INVALID_REQUEST, "Duplicate topic in request."
        elif not ctx.authorized(ALTER, TOPIC, topic.name):
            error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "The topic authorization is failed."
        elif meta is None:
            error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION   # (Kafka's answer carries no message)
        elif topic.count <= meta.partitions:
            error = ErrorCode.INVALID_PARTITIONS
            message = (f"Topic currently has {meta.partitions} partitions, which is higher than the requested "
                       f"{topic.count}." if topic.count < meta.partitions
                       else f"Topic already has {meta.partitions} partitions.")
        elif topic.assignments is not None and (
                len(topic.assignments) != topic.count - meta.partitions
                or any(len(a.broker_ids) != meta.replication_factor or len(set(a.broker_ids)) != len(a.broker_ids)
                       for a in topic.assignments)
                or any(b not in live for a in topic.assignments for b in a.broker_ids)):
            error, message = ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Invalid replica assignment."
        elif meta.replication_factor > len(live):
            error = ErrorCode.INVALID_REPLICATION_FACTOR
            message = f"Replication factor: {meta.replication_factor} larger than available brokers: {len(live)}."
        elif not quota.admit(topic.count - meta.partitions):   # (validate_only counts too, as in Kafka)
            error, message = ErrorCode.THROTTLING_QUOTA_EXCEEDED, None   # (no message, as Kafka's)
        elif not request.validate_only:
            assignment = [list(a.broker_ids) for a in topic.assignments] if topic.assignments else None
            broker.admin.add_partitions(topic.name, topic.count, assignment)
        results.append({"name": topic.name, "error_code": error, "error_message": message})
    response = {"throttle_time_ms": mutation_throttle(ctx, quota), "results": results}
    if broker.cluster is None or request.validate_only or request.timeout_ms <= 0:
        return response   # (no time to wait: answered at once, as CreateTopics)
    return _wait_for_leaders(broker, request, response)


async def _wait_for_leaders(broker, request, response):
    """Answer once the new partitions have leaders, or REQUEST_TIMED_OUT at the request's timeout."""
    counts = {t.name: t.count for t in request.topics}
    counts = {r["name"]: counts[r["name"]] for r in response["results"] if r["error_code"] == 0}
    for name in await broker.cluster.wait_for_leaders(counts, request.timeout_ms):
        for result in response["results"]:
            if result["name"] == name:
                result.update(error_code=ErrorCode.REQUEST_TIMED_OUT,
                              error_message="Partition creation did not complete within the timeout")
    return response
