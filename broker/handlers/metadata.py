"""Metadata: brokers, topics and partition leaders; auto-creates requested topics when allowed."""

import asyncio
import functools
import gc

from kbroker.broker.metadata import TopicNotCreated, topic_name_invalid
from kbroker.protocol import acls
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.metadata import METADATA as API  # noqa: F401  (the registry reads API)
from kbroker.protocol.types import Rows

NO_OPERATIONS = -2147483648
# MetadataResponsePartition's fields in their declared order: a partition's row (protocol.types.Rows)
PARTITION_FIELDS = ("error_code", "partition_index", "leader_id", "leader_epoch", "replica_nodes", "isr_nodes",
                    "offline_replicas")
_NO_ID = bytes(16)
# How long a Metadata request waits for a just-started broker's first UpdateMetadata before it is answered
# with what the broker knows (no brokers, no controller), which clients treat as "ask again".
FIRST_UPDATE_WAIT_S = 5.0
TOPIC_OPERATIONS = (acls.READ, acls.WRITE, acls.CREATE, acls.DELETE, acls.ALTER, acls.DESCRIBE, acls.DESCRIBE_CONFIGS,
                    acls.ALTER_CONFIGS)
CLUSTER_OPERATIONS = (acls.CREATE, acls.CLUSTER_ACTION, acls.DESCRIBE_CONFIGS, acls.ALTER_CONFIGS,
                      acls.IDEMPOTENT_WRITE, acls.ALTER, acls.DESCRIBE)


def cluster_operations(ctx, asked: bool) -> int:
    """The cluster's ``authorized_operations`` when asked: none (0) to a principal that may not Describe the
    cluster, as Kafka answers, whatever else it may do there."""
    if not asked:
        return NO_OPERATIONS
    if not ctx.authorized(acls.DESCRIBE, acls.CLUSTER, acls.CLUSTER_NAME, log_denied=False):
        return 0
    return ctx.authorized_operations(acls.CLUSTER, acls.CLUSTER_NAME, CLUSTER_OPERATIONS)


def brokers(ctx) -> list[dict]:
    return [{"node_id": b, "host": host, "port": port, "rack": rack}
            for b, host, port, rack in ctx.broker.live_brokers(ctx.listener)]


def describe_topic(ctx, name: str, error: ErrorCode = ErrorCode.NONE, rows: bool = False) -> dict:
    """The topic's entry in a Metadata answer; with ``rows`` its partitions as ``Rows`` (tuples in the
    declared order of MetadataResponsePartition), which only the encoder reads: a Metadata answer for all
    topics holds every partition of the broker, and a dict each (built, then read field by field) was a
    quarter of its round trip at 50,000 partitions."""
    broker = ctx.broker
    meta = broker.metadata.topics.get(name)
    if meta is None or meta.partitions == 0:
        # (No partitions yet: a broker that has just started knows the topic from ZooKeeper or a LeaderAndIsr
        # before the controller's UpdateMetadata. Kafka's cache has no such topic then; "no partitions" would
        # tell a client the topic is empty for good.)
        return {"error_code": error or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                "partitions": [], "topic_authorized_operations": NO_OPERATIONS}
    partitions = Rows() if rows else []
    for index in range(meta.partitions):
        found = broker.partition_info(name, index)
        if found is None or found[0] < 0:
            row = (ErrorCode.LEADER_NOT_AVAILABLE, index, -1, found[1] if found else -1, found[2] if found else [],
                   found[3] if found else [], found[4] if found else [])
        else:
            row = (0, index, *found)
        partitions.append(row if rows else dict(zip(PARTITION_FIELDS, row)))
    return {"error_code": 0, "name": name, "topic_id": meta.topic_id, "is_internal": meta.is_internal,
            "partitions": partitions, "topic_authorized_operations": NO_OPERATIONS}


def _refused(name: str) -> dict:
    return {"error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "name": name, "partitions": [],
            "topic_authorized_operations": NO_OPERATIONS}


def handle(ctx, request):
    cluster = ctx.broker.cluster
    if cluster is not None and not cluster.cache.ready.is_set():
        # A broker that has just registered knows neither the other brokers nor the controller until the
        # controller's first UpdateMetadata. Answering "no controller" then sends librdkafka's admin client
        # into a wait for a controller change that never comes if its one re-ask lands in the same window;
        # park the answer instead (in the response queue, so later requests are still read) until it knows.
        return asyncio.ensure_future(_when_known(ctx, request, cluster.cache.ready))
    return answer(ctx, request)


async def _when_known(ctx, request, ready: asyncio.Event):
    try:
        await asyncio.wait_for(ready.wait(), FIRST_UPDATE_WAIT_S)
    except TimeoutError:
        ctx.log.info("metadata_before_first_update", waited_s=FIRST_UPDATE_WAIT_S)
    return answer(ctx, request)


def answer(ctx, request):
    """The answer, built with the cyclic collector paused. An answer for all topics holds a tuple and lists per
    partition, freed by reference counting once it is encoded; a collection those allocations set off walks the
    whole heap for nothing (unfrozen: topics created since start-up), about 80 ms of a 340 ms round trip at
    50,000 partitions just created."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _answer(ctx, request)
    finally:
        if enabled:
            gc.enable()


def _answer(ctx, request):
    broker = ctx.broker
    requested = request.topics
    if request.include_topic_authorized_operations:   # (asked per principal: each entry built afresh)
        entry = functools.partial(describe_topic, ctx, rows=True)
    else:   # (each topic's entry kept encoded while it holds: the answer for all of them at 50,000 partitions held
        #    the event loop 150 ms when built and encoded at each request)
        entry = functools.partial(broker.topic_answers.entry, ctx, describe=describe_topic)
    if requested is None or (ctx.api_version == 0 and not requested):
        names = sorted(broker.metadata.topics)
        if broker.authorizer is not None:   # the topics it may not describe are not there, for this principal
            names = [n for n in names if ctx.authorized(acls.DESCRIBE, acls.TOPIC, n, log_denied=False)]
        topics = [entry(n) for n in names]
    else:
        allow_create = broker.config["auto.create.topics.enable"] and request.allow_auto_topic_creation
        topics, asked = [], set()
        # A request naming any topic id is answered by its ids alone (v10+), as Kafka's: the names beside them,
        # and the topics named without one, are not looked at
        by_ids_alone = any(bytes(item.topic_id) != _NO_ID for item in requested)
        for item in requested:
            name = item.name if not by_ids_alone else None
            if by_ids_alone and bytes(item.topic_id) == _NO_ID:
                continue
            key = name if name is not None else bytes(item.topic_id)
            if key in asked:
                continue   # (a topic asked for twice is answered once, as Kafka's)
            asked.add(key)
            if name is None:
                name = broker.topic_ids.name_of(item.topic_id)
                if name is None:
                    topics.append({"error_code": ErrorCode.UNKNOWN_TOPIC_ID, "name": None,
                                   "topic_id": item.topic_id, "partitions": []})
                    continue
            if not ctx.authorized(acls.DESCRIBE, acls.TOPIC, name):
                topics.append(_refused(name))
                continue
            invalid = topic_name_invalid(name)
            if invalid:
                ctx.log.info("invalid_topic_name", topic=name, reason=invalid)
                topics.append({"error_code": ErrorCode.INVALID_TOPIC_EXCEPTION, "name": name, "partitions": []})
                continue
            # A topic known without partitions is not yet in what Kafka's metadata cache holds (this broker heard
            # of it from ZooKeeper before the controller's UpdateMetadata): Kafka would try to create it again,
            # find it exists and answer LEADER_NOT_AVAILABLE, so it is answered so here too.
            meta = broker.metadata.topics.get(name)
            if (meta is None or meta.partitions == 0) and allow_create and not name.startswith("__"):
                if not ctx.cluster_authorized(acls.CREATE, log_denied=False) \
                        and not ctx.authorized(acls.CREATE, acls.TOPIC, name):
                    topics.append(_refused(name))
                    continue
                if meta is None:
                    try:
                        broker.admin.create_topic(name, broker.config["num.partitions"],
                                                  broker.config["default.replication.factor"], {})
                    except TopicNotCreated:
                        topics.append({"error_code": ErrorCode.LEADER_NOT_AVAILABLE, "name": name,
                                       "partitions": []})
                        continue
                # In a cluster the topic is known here once the controller's UpdateMetadata arrives: until
                # then it is being created, LEADER_NOT_AVAILABLE as Kafka answers (the error every client
                # retries; kafkajs gives up on UNKNOWN_TOPIC_OR_PARTITION).
                topics.append(describe_topic(ctx, name, ErrorCode.LEADER_NOT_AVAILABLE, rows=True))
                continue
            topics.append(entry(name))
    if request.include_topic_authorized_operations:
        for t in topics:
            if t["error_code"] == 0:
                t["topic_authorized_operations"] = ctx.authorized_operations(acls.TOPIC, t["name"], TOPIC_OPERATIONS)
    return {"throttle_time_ms": 0, "brokers": brokers(ctx), "cluster_id": broker.cluster_id,
            "controller_id": broker.controller_id, "topics": topics,
            "cluster_authorized_operations": cluster_operations(ctx, request.include_cluster_authorized_operations)}
