"""What the share coordinator's three APIs (Initialize-, Read- and WriteShareGroupState) share: each
partition of the request is answered by the shard of its key, here, or NOT_COORDINATOR."""

from kbroker.broker.coordination.shards import SHARE_STATE_TOPIC
from kbroker.broker.handlers.common import when_replicated
from kbroker.protocol.acls import CLUSTER_ACTION
from kbroker.protocol.errors import ErrorCode


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
