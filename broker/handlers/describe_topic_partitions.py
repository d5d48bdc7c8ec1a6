"""DescribeTopicPartitions (KIP-966's paginated metadata): topics and their partitions in name order, at most
``response_partition_limit`` partitions (and ``max.request.partition.size.limit``) per answer, with a cursor
to go on from.

Invariants, as Kafka's handler: the topics are the requested ones (or, with none requested, every topic the
principal may describe) sorted by name, from the cursor's topic on; a topic that does not exist or may not be
described is answered with its error and uses none of the partition budget; when the budget runs out inside a
topic, that topic is answered with the partitions that fit and ``next_cursor`` names the first one left out;
when it runs out at a topic's end, ``next_cursor`` names the next topic's partition 0.
"""

from kbroker.broker.handlers.metadata import TOPIC_OPERATIONS, describe_topic
from kbroker.broker.metadata import topic_name_invalid
from kbroker.protocol import acls
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_topic_partitions import DESCRIBE_TOPIC_PARTITIONS as API  # noqa: F401  (the registry reads API)

def _error(name: str, code: ErrorCode) -> dict:
    return {"error_code": code, "name": name, "topic_id": bytes(16), "is_internal": False, "partitions": []}


def handle(ctx, request):
    broker = ctx.broker
    cursor = request.cursor
    if request.topics:
        names = sorted({t.name for t in request.topics})
        if cursor is not None and cursor.topic_name not in names:   # (each requested topic gets the error)
            return {"throttle_time_ms": 0, "topics": [_error(t.name, ErrorCode.INVALID_REQUEST)
                                                      for t in request.topics], "next_cursor": None}
    else:
        names = sorted(n for n in broker.metadata.topics
                       if ctx.authorized(acls.DESCRIBE, acls.TOPIC, n, log_denied=False))
    if cursor is not None:
        names = [n for n in names if n >= cursor.topic_name]
    # (a limit below one answers one partition, as Kafka's handler does)
    limit = max(min(broker.config["max.request.partition.size.limit"], request.response_partition_limit), 1)
    topics, next_cursor = [], None
    refused = [n for n in names if not ctx.authorized(acls.DESCRIBE, acls.TOPIC, n)]
    denied = set(refused)
    names = [n for n in names if n not in denied]
    for i, name in enumerate(names):
        # (a topic not found or misnamed is told what this principal may do on it all the same, as Kafka's)
        operations = {"topic_authorized_operations": ctx.authorized_operations(acls.TOPIC, name, TOPIC_OPERATIONS)}
        if topic_name_invalid(name):   # (a name no topic can have: Kafka answers so, not that it is unknown)
            topics.append({**_error(name, ErrorCode.INVALID_TOPIC_EXCEPTION), **operations})
            continue
        described = describe_topic(ctx, name)
        if described["error_code"]:
            topics.append({**_error(name, ErrorCode(described["error_code"])), **operations})
            continue
        start = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        # Metadata's partition entries (the same fields), with the eligible leader replicas (KIP-966) as empty
        # lists, not null: Kafka's Java admin client reads them as lists (a null one fails describeTopics).
        partitions = [{**p, "eligible_leader_replicas": [], "last_known_elr": []}
                      for p in described["partitions"][start:]]
        if len(partitions) > limit:
            partitions = partitions[:limit]
            next_cursor = {"topic_name": name, "partition_index": start + limit}
        limit -= len(partitions)
        topics.append({"error_code": 0, "name": name, "topic_id": described["topic_id"],
                       "is_internal": described["is_internal"], "partitions": partitions,
                       **operations})
        if next_cursor is not None:
            break
        if limit == 0 and i + 1 < len(names):
            next_cursor = {"topic_name": names[i + 1], "partition_index": 0}
            break
    # (those the principal may not describe come last, as Kafka adds them after what it described)
    topics += [_error(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for name in refused]
    return {"throttle_time_ms": 0, "topics": topics, "next_cursor": next_cursor}
