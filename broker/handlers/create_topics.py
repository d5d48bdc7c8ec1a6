"""CreateTopics: validated as Kafka does (name, collisions, partitions, replication factor, configs)."""

from collections import Counter
from types import SimpleNamespace

from kbroker.broker.cluster.assignment import assignment_problem, placement_problem
from kbroker.broker.configuration.quotas import mutation_quota, mutation_throttle
from kbroker.broker.handlers.alter_configs import stored_topic_configs, topic_configs_problem
from kbroker.broker.handlers.common import PARTITIONS_PER_REQUEST, TOO_MANY_PARTITIONS, names_once_and_repeated
from kbroker.broker.handlers.describe_configs import topic_config_entries
from kbroker.broker.metadata import TopicNotCreated, topic_name_invalid
from kbroker.protocol.acls import CREATE, TOPIC
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.create_topics import CREATE_TOPICS as API  # noqa: F401  (the registry reads API)
from kbroker.storage.java_order import hash_order, table_size


CLUSTER_METADATA = "__cluster_metadata"   # (Kafka's KRaft log: never a topic a client may make)


def _assignments_problem(assignments, live: set[int]) -> str | None:
    """Why manual replica assignments cannot make a topic, in Kafka's controller's order, or None: each
    partition once and its replicas sound, then the partitions numbered 0 up without a gap."""
    seen: set[int] = set()
    replicas = None
    for a in assignments:
        if a.partition_index in seen:
            return f"Found multiple manual partition assignments for partition {a.partition_index}"
        seen.add(a.partition_index)
        problem = assignment_problem(a.broker_ids, live, replicas)
        if problem:
            return problem
        replicas = len(a.broker_ids)
    if seen != set(range(len(seen))):
        return "partitions should be a consecutive 0-based integer sequence"
    return None


def _name_problem(broker, name: str) -> tuple[ErrorCode, str] | None:
    """Kafka's controller's checks of a new topic's name, the last that fails winning: the name itself, a
    collision with an existing topic, the topic existing already."""
    problem = None
    invalid = topic_name_invalid(name)
    if invalid:
        problem = ErrorCode.INVALID_TOPIC_EXCEPTION, invalid
    other = broker.metadata.topics.colliding(name)
    if other:
        problem = ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {other}"
    if name in broker.metadata.topics:
        problem = ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists."
    return problem


def _validate(ctx, topic) -> tuple[ErrorCode, str | None, int, int]:
    """One topic of the request checked as Kafka's controller checks it: its name, its configs (null values,
    then each value), then its shape (manual assignments, or the replication factor and then the partition
    count), then whether the brokers can hold it. Returns (error, message, partitions, replication factor)."""
    broker = ctx.broker
    name = topic.name
    partitions = topic.num_partitions
    replication = topic.replication_factor
    problem = _name_problem(broker, name)
    if problem:
        return (*problem, 0, 0)
    nulls = [c.name for c in topic.configs if c.value is None]
    if nulls:   # (every one named, as Kafka's controller does)
        return ErrorCode.INVALID_CONFIG, f"Null value not supported for topic configs: {','.join(nulls)}", 0, 0
    problem = topic_configs_problem(broker, {c.name: c.value for c in topic.configs})
    if problem:
        return ErrorCode.INVALID_CONFIG, problem, 0, 0
    live = {b[0] for b in broker.live_brokers()}
    if topic.assignments:
        if replication != -1:
            return (ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but replication "
                    "factor was not set to -1.", 0, 0)
        if partitions != -1:
            return (ErrorCode.INVALID_REQUEST, "A manual partition assignment was specified, but numPartitions "
                    "was not set to -1.", 0, 0)
        problem = _assignments_problem(topic.assignments, live)
        if problem:
            return ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem, 0, 0
        return ErrorCode.NONE, None, len(topic.assignments), len(topic.assignments[0].broker_ids)
    if replication < -1 or replication == 0:
        return (ErrorCode.INVALID_REPLICATION_FACTOR,
                "Replication factor must be larger than 0, or -1 to use the default value.", 0, 0)
    if partitions < -1 or partitions == 0:
        return ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an invalid non-positive value.", 0, 0
    if partitions == -1:
        partitions = broker.config["num.partitions"]
    if replication == -1:
        replication = broker.config["default.replication.factor"]
    problem = placement_problem(replication, len(live))
    if problem:
        return ErrorCode.INVALID_REPLICATION_FACTOR, f"Unable to replicate the partition {replication} time(s): " \
            + problem, 0, 0
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


def _partitions_asked(ctx, topics) -> int:
    """The partitions ``topics`` ask for, each counted as given (-1: the broker's default count)."""
    default = ctx.broker.config["num.partitions"]
    return sum(len(t.assignments) if t.assignments else default if t.num_partitions == -1 else max(t.num_partitions, 0)
               for t in topics)


def _refused(name: str, error: ErrorCode, message: str | None) -> dict:
    return {"name": name, "error_code": error, "error_message": message, "num_partitions": -1,
            "replication_factor": -1, "configs": []}


def _create(ctx, request):
    """Kafka 4.2's answer: its controller's results for the topics it was given (each named once, allowed, not
    its own metadata log), in the request's order; then each duplicated name, then each of the others refused,
    each group in the order of the hash set that held it."""
    names = [t.name for t in request.topics]
    counts = Counter(names)
    may_create = ctx.cluster_authorized(CREATE, log_denied=False)
    allowed = {n for n in counts if counts[n] == 1 and n != CLUSTER_METADATA
               and (may_create or ctx.authorized(CREATE, TOPIC, n))}
    given = [t for t in request.topics if t.name in allowed]
    quota = mutation_quota(ctx, strict_since=6)
    if _partitions_asked(ctx, given) > PARTITIONS_PER_REQUEST:   # (before anything else, as Kafka checks it)
        ctx.log.info("create_topics_too_large", topics=len(names))
        return {"throttle_time_ms": 0, "topics": [_refused(name, ErrorCode.POLICY_VIOLATION, TOO_MANY_PARTITIONS)
                                                  for name in dict.fromkeys(names)]}
    results: list[dict] = []
    accepted: list[tuple] = []   # (topic, partitions, replication, configs, where its result goes)
    for topic in given:
        error, message, partitions, replication = _validate(ctx, topic)
        if error == ErrorCode.NONE and not quota.admit(partitions):   # (validate_only counts too, as in Kafka)
            error, message = ErrorCode.THROTTLING_QUOTA_EXCEEDED, None   # (no message, as Kafka's)
        if error != ErrorCode.NONE:
            ctx.log.info("create_topic_rejected", topic=topic.name, error=error.name, reason=message)
            results.append(_refused(topic.name, error, message))
            continue
        configs = stored_topic_configs({c.name: c.value for c in topic.configs if c.value is not None})
        results.append({"name": topic.name})
        accepted.append((topic, partitions, replication, configs, results[-1]))
    for topic, partitions, replication, configs, result in accepted:
        result.update(_made(ctx, request, topic, partitions, replication, configs))
    singles, duplicates, peak = names_once_and_repeated(names)
    results += [_refused(n, ErrorCode.INVALID_REQUEST, "Duplicate topic name.") for n in hash_order(duplicates)]
    for name in hash_order(singles, capacity=table_size(peak)):
        if name == CLUSTER_METADATA:
            results.append(_refused(name, ErrorCode.INVALID_REQUEST,
                                    f"Creation of internal topic {CLUSTER_METADATA} is prohibited."))
        elif name not in allowed:
            results.append(_refused(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."))
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
                         "config_source": e["config_source"], "is_sensitive": False}
                        for e in sorted(entries, key=lambda e: e["name"])]}   # (by name, as Kafka's controller)


def create_on_behalf(ctx, name: str, partitions: int, replication: int, configs: dict[str, str]) -> str | None:
    """Create a topic a coordinator needs (a streams group's internal topics), checked as CreateTopics checks
    one; the reason it was not made, in Kafka's words, else None."""
    topic = SimpleNamespace(name=name, num_partitions=partitions, replication_factor=replication, assignments=[],
                            configs=[SimpleNamespace(name=k, value=v) for k, v in configs.items()])
    error, message, partitions, replication = _validate(ctx, topic)
    if error != ErrorCode.NONE:
        return message or error.name
    try:
        ctx.broker.admin.create_topic(name, partitions, replication, stored_topic_configs(configs))
    except TopicNotCreated as exc:
        return str(exc)
    return None
