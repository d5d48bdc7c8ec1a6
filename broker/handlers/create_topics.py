"""CreateTopics: validated as Kafka does (name, collisions, partitions, replication factor, configs)."""

from kbroker.broker.configuration.quotas import mutation_quota, mutation_throttle
from kbroker.broker.handlers.alter_configs import stored_topic_configs, topic_configs_problem
from kbroker.broker.handlers.common import PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS
from kbroker.broker.handlers.describe_configs import topic_config_entries
from kbroker.broker.metadata import TopicNotCreated, topic_name_error
from kbroker.protocol.acls import CREATE, TOPIC
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.create_topics import CREATE_TOPICS as API  # noqa: F401  (the registry reads API)


def _collides(name: str, existing) -> str | None:
    """Kafka forbids topics whose names differ only in '.' versus '_' (metric names would clash)."""
    normalized = name.replace(".", "_")
    for other in existing:
        if other != name and other.replace(".", "_") == normalized:
            return other
    return None


def _assignment_problem(assignments, live: set[int]) -> str | None:
    """Why manual replica assignments cannot make a topic, in Kafka's controller's order, or None: each partition
    once, each with replicas, each broker registered and named once, as many replicas as the partitions
    before, and the partitions numbered 0 up without a gap."""
    seen: set[int] = set()
    replicas = None
    for a in assignments:
        if a.partition_index in seen:
            return f"Found multiple manual partition assignments for partition {a.partition_index}"
        seen.add(a.partition_index)
        if not a.broker_ids:
            return "The manual partition assignment includes an empty replica list."
        for broker_id in sorted(a.broker_ids):
            if broker_id not in live:
                return f"The manual partition assignment includes broker {broker_id}, but no such broker is registered."
        if len(set(a.broker_ids)) != len(a.broker_ids):
            return "The manual partition assignment includes a broker more than once."
        if replicas is not None and len(a.broker_ids) != replicas:
            return (f"The manual partition assignment includes a partition with {len(a.broker_ids)} replica(s), but "
                    f"the partitions before it have {replicas}.")
        replicas = len(a.broker_ids)
    if seen != set(range(len(seen))):
        return "partitions should be a consecutive 0-based integer sequence"
    return None


def _validate(ctx, topic) -> tuple[ErrorCode, str | None, int, int]:
    broker = ctx.broker
    name = topic.name
    partitions = topic.num_partitions
    replication = topic.replication_factor
    if not ctx.cluster_authorized(CREATE, log_denied=False) and not ctx.authorized(CREATE, TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed.", 0, 0
    invalid = topic_name_error(name)
    if invalid:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, invalid, 0, 0
    if name in broker.metadata.topics:
        return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.", 0, 0
    other = _collides(name, broker.metadata.topics)
    if other:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {other}", 0, 0
    # (the configs before the partitions and replicas: Kafka's controller checks them first)
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:   # (every one named, as Kafka's controller does)
        return ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}", 0, 0
    problem = topic_configs_problem(broker, {c.name: c.value for c in topic.configs})
    if problem:
        return ErrorCode.INVALID_CONFIG, problem, 0, 0
    if topic.assignments:
        if partitions != -1 or replication != -1:
            return (ErrorCode.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set.", 0, 0)
        problem = _assignment_problem(topic.assignments, {b[0] for b in broker.live_brokers()})
        if problem:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem, 0, 0
        partitions = len(topic.assignments)
        replication = len(topic.assignments[0].broker_ids)
    if partitions == -1:
        partitions = broker.config["num.partitions"]
    if replication == -1:
        replication = broker.config["default.replication.factor"]
    if partitions <= 0:
        return ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.", 0, 0
    if replication <= 0:
        return ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.", 0, 0
    live_count = len(broker.live_brokers())
    if replication > live_count:
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                f"Replication factor: {replication} larger than available brokers: {live_count}.", 0, 0)
    return ErrorCode.NONE, None, partitions, replication


def handle(ctx, request):
    response = _create(ctx, request)
    if ctx.broker.cluster is None or request.validate_only or request.timeout_ms <= 0:
        return response   # (no time to wait: answered at once, the leaders come after, as ZooKeeper-mode Kafka)
    return _wait_for_leaders(ctx, request, response)


async def _wait_for_leaders(ctx, request, response):
    """As Kafka's DelayedCreatePartitions: answer once the new partitions have leaders, or at the timeout."""
    counts = {r["name"]: r["num_partitions"] for r in response["topics"] if r["error_code"] == 0}
    missing = await ctx.broker.cluster.wait_for_leaders(counts, request.timeout_ms)
    for result in response["topics"]:
        if result["name"] in missing:
            result.update(error_code=ErrorCode.REQUEST_TIMED_OUT,
                          error_message="Topic creation did not complete within the timeout")
    return response


def _partitions_asked(ctx, request) -> int:
    """The partitions the request asks for, every topic counted as given (-1: the broker's default count)."""
    default = ctx.broker.config["num.partitions"]
    return sum(len(t.assignments) if t.assignments else default if t.num_partitions == -1 else max(t.num_partitions, 0)
               for t in request.topics)


def _create(ctx, request):
    results: list[dict] = []
    accepted: list[tuple] = []   # (topic, partitions, replication, configs, where its result goes)
    seen: set = set()
    names = [t.name for t in request.topics]
    quota = mutation_quota(ctx, strict_since=6)
    if _partitions_asked(ctx, request) > PARTITIONS_PER_REQUEST:   # (before anything else, as Kafka checks it)
        ctx.log.info("create_topics_too_large", topics=len(names))
        return {"throttle_time_ms": 0, "topics": [
            {"name": name, "error_code": ErrorCode.POLICY_VIOLATION, "error_message": TOO_MANY_PARTITIONS,
             "num_partitions": -1, "replication_factor": -1, "configs": None} for name in dict.fromkeys(names)]}
    for topic in request.topics:
        if topic.name in seen:
            continue   # (a topic named twice is answered once, and made neither time, as Kafka does)
        seen.add(topic.name)
        if names.count(topic.name) > 1:
            message = f"Create topics request from client contains a duplicate topic {topic.name}"
            results.append({"name": topic.name, "error_code": ErrorCode.INVALID_REQUEST, "error_message": message,
                            "num_partitions": -1, "replication_factor": -1, "configs": None})
            continue
        error, message, partitions, replication = _validate(ctx, topic)
        if error == ErrorCode.NONE and not quota.admit(partitions):   # (validate_only counts too, as in Kafka)
            error, message = ErrorCode.THROTTLING_QUOTA_EXCEEDED, None   # (no message, as Kafka's)
        if error != ErrorCode.NONE:
            ctx.log.info("create_topic_rejected", topic=topic.name, error=error.name, reason=message)
            results.append({"name": topic.name, "error_code": error, "error_message": message,
                            "num_partitions": -1, "replication_factor": -1, "configs": None})
            continue
        configs = stored_topic_configs({c.name: c.value for c in topic.configs if c.value is not None})
        results.append({"name": topic.name})
        accepted.append((topic, partitions, replication, configs, results[-1]))
    for topic, partitions, replication, configs, result in accepted:
        result.update(_made(ctx, request, topic, partitions, replication, configs))
    return {"throttle_time_ms": mutation_throttle(ctx, quota), "topics": results}


def _made(ctx, request, topic, partitions: int, replication: int, configs: dict) -> dict:
    """A validated topic made (unless the request only validates): its entry in the answer."""
    broker = ctx.broker
    topic_id = bytes(16)
    if not request.validate_only:
        assignment = [list(a.broker_ids) for a in sorted(topic.assignments, key=lambda a: a.partition_index)]
        try:
            topic_id = broker.admin.create_topic(topic.name, partitions, replication, configs,
                                                 assignment or None).topic_id
        except TopicNotCreated as exc:
            return {"name": topic.name, "topic_id": bytes(16), "error_code": ErrorCode.KAFKA_STORAGE_ERROR,
                    "error_message": str(exc), "num_partitions": -1, "replication_factor": -1, "configs": []}
    # (the answer shows the topic's own values as sent, as Kafka's does; DescribeConfigs shows them parsed)
    sent = {c.name: c.value for c in topic.configs if c.value is not None}
    entries = topic_config_entries(broker, broker.default_log_config.with_overrides(configs), configs)
    return {"name": topic.name, "topic_id": topic_id, "error_code": 0, "error_message": None,
            "num_partitions": partitions, "replication_factor": replication,
            "configs": [{"name": e["name"], "value": sent.get(e["name"], e["value"]), "read_only": e["read_only"],
                         "config_source": e["config_source"], "is_sensitive": False} for e in entries]}
