"""What the share coordinator's APIs (Initialize-, Read-, Write- and DeleteShareGroupState, the state summary)
share: each partition of the request is answered by the shard of its key, here, or NOT_COORDINATOR; and the
refusals of a key Kafka's share coordinator makes before it looks at the state (a negative partition, a topic id
or partition the cluster does not have), each API checking them where Kafka's does."""

from kbroker.broker.coordination.shards import SHARE_STATE_TOPIC
from kbroker.broker.handlers.common import when_replicated
from kbroker.protocol.acls import CLUSTER_ACTION
from kbroker.protocol.errors import ErrorCode


NEGATIVE_PARTITION = "The partition id cannot be a negative number."
NOT_HOSTED = "This server does not host this topic-partition."


def refused(error: ErrorCode, message: str | None, **fields) -> dict:
    return {"error_code": error, "error_message": message, **fields}


def negative(key) -> dict | None:
    """INVALID_REQUEST for a negative partition (the first check of each of Kafka's share-state APIs)."""
    return refused(ErrorCode.INVALID_REQUEST, NEGATIVE_PARTITION) if key[2] < 0 else None


def unknown(broker, key) -> dict | None:
    """UNKNOWN_TOPIC_OR_PARTITION for a topic id no topic has now, or a partition past its topic's."""
    name = broker.topic_ids.name_of(key[1])
    meta = broker.metadata.topics.get(name) if name is not None else None
    return refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NOT_HOSTED) if meta is None or key[2] >= meta.partitions \
        else None


def answer_each(ctx, request, operate, *, replicate: bool):
    """``operate(key, partition_request) -> dict`` for every partition whose shard is here; the answer waits
    for those shards' ISR when ``replicate``."""
    broker = ctx.broker
    refused = None if ctx.cluster_authorized(CLUSTER_ACTION) else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    results, shards = [], set()
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            index = broker.share_coordinator.partition_for(request.group_id, bytes(topic.topic_id), p.partition)
            error = refused or broker.coordination.share_coordinator_error(index)
            if error:
                partitions.append({"partition": p.partition, "error_code": error, "error_message": None})
                continue
            shards.add(index)
            partitions.append({"partition": p.partition, **operate((request.group_id, bytes(topic.topic_id),
                                                                     p.partition), p)})
        results.append({"topic_id": topic.topic_id, "partitions": partitions})
    answer = {"results": results}
    return when_replicated(ctx, SHARE_STATE_TOPIC, sorted(shards), answer) if replicate else answer
