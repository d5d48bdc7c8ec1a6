"""CreatePartitions: grow a topic's partition count (never shrink it). Answered as Kafka 4.2's controller
answers: each repeated name, then each topic not to be altered by this principal, then the others' results; the
names in the order of the Java hash set that held them."""

from kbroker.broker.cluster.assignment import assignment_problem, placement_problem
from kbroker.broker.configuration.quotas import mutation_quota, mutation_throttle
from kbroker.broker.handlers.common import PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS, names_once_and_repeated
from kbroker.protocol.acls import ALTER, TOPIC
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.create_partitions import CREATE_PARTITIONS as API  # noqa: F401  (the registry reads API)
from kbroker.storage.java_order import hash_order, table_size


def _problem(broker, topic, quota, live: set[int]) -> tuple[ErrorCode, str | None]:
    """Kafka 4.2's controller's checks of one topic's growth, in its order and words: the topic known, the new
    count above the old, as many assignments as new partitions, the mutation quota (counted whatever follows),
    then each assignment's replicas, or whether the brokers can hold the topic's replication factor."""
    meta = broker.metadata.topics.get(topic.name)
    if meta is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None   # (Kafka's answer carries no message)
    if topic.count == meta.partitions:
        return ErrorCode.INVALID_PARTITIONS, f"Topic already has {meta.partitions} partition(s)."
    if topic.count < meta.partitions:
        return ErrorCode.INVALID_PARTITIONS, (f"The topic {topic.name} currently has {meta.partitions} "
                                              f"partition(s); {topic.count} would not be an increase.")
    additional = topic.count - meta.partitions
    if topic.assignments is not None and len(topic.assignments) != additional:
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, (f"Attempted to add {additional} additional partition(s), but "
                                                      f"only {len(topic.assignments)} assignment(s) were specified.")
    if not quota.admit(additional):   # (validate_only counts too, as in Kafka)
        return ErrorCode.THROTTLING_QUOTA_EXCEEDED, None   # (no message, as Kafka's)
    if topic.assignments is not None:
        for a in topic.assignments:
            problem = assignment_problem(a.broker_ids, live, meta.replication_factor)
            if problem:
                return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem
        return ErrorCode.NONE, None
    problem = placement_problem(meta.replication_factor, len(live))
    if problem:
        return ErrorCode.INVALID_REPLICATION_FACTOR, problem
    return ErrorCode.NONE, None


def handle(ctx, request):
    broker = ctx.broker
    names = [t.name for t in request.topics]
    live = {b[0] for b in broker.live_brokers()}
    quota = mutation_quota(ctx, strict_since=3)
    # (one record per new partition: an operation past what Kafka's controller writes at once is refused whole)
    known = broker.metadata.topics
    if sum(t.count - known[t.name].partitions for t in request.topics
           if t.name in known and t.count > known[t.name].partitions) > PARTITIONS_PER_REQUEST:
        ctx.log.info("create_partitions_too_large", topics=len(names))
        return {"throttle_time_ms": 0, "results": [
            {"name": name, "error_code": ErrorCode.POLICY_VIOLATION, "error_message": TOO_MANY_PARTITIONS}
            for name in dict.fromkeys(names)]}
    # (Kafka's set of names holds every name before the repeated ones are taken out: sized for all of them)
    singles, duplicates, _ = names_once_and_repeated(names)
    results = [{"name": n, "error_code": ErrorCode.INVALID_REQUEST, "error_message": "Duplicate topic name."}
               for n in hash_order(duplicates)]
    given = []
    for name in hash_order(singles, capacity=table_size(len(singles) + len(duplicates))):
        if ctx.authorized(ALTER, TOPIC, name):
            given.append(name)
        else:
            results.append({"name": name, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "error_message": None})
    topics = {t.name: t for t in request.topics}
    for name in given:
        topic = topics[name]
        error, message = _problem(broker, topic, quota, live)
        if error == ErrorCode.NONE and not request.validate_only:
            assignment = [list(a.broker_ids) for a in topic.assignments] if topic.assignments else None
            broker.admin.add_partitions(topic.name, topic.count, assignment)
        results.append({"name": name, "error_code": error, "error_message": message})
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
