"""OffsetDelete: drop a group's offsets for partitions of topics it no longer subscribes to."""

from kbroker.broker.handlers.common import coordinator_error, group_shard, topics_refused, when_replicated
from kbroker.protocol.acls import DELETE, READ
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.offset_delete import OFFSET_DELETE as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    wanted = [(t.name, p.partition_index) for t in request.topics for p in t.partitions]
    error = coordinator_error(ctx, request.group_id, DELETE)
    results: dict = {}
    if not error:
        metadata = ctx.broker.metadata.topics
        refused = topics_refused(ctx, READ, {t.name for t in request.topics})
        known = [tp for tp in wanted if tp[0] in metadata and 0 <= tp[1] < metadata[tp[0]].partitions
                 and tp[0] not in refused]
        error, results = ctx.broker.group_coordinator.delete_offsets(request.group_id, known)
        results.update({tp: ErrorCode.TOPIC_AUTHORIZATION_FAILED for tp in wanted if tp[0] in refused})
        for tp in wanted:
            results.setdefault(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if error:
        return {"error_code": error, "throttle_time_ms": 0, "topics": []}
    topics = [{"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                               "error_code": results[(t.name, p.partition_index)]}
                                              for p in t.partitions]} for t in request.topics]
    return when_replicated(ctx, *group_shard(ctx, request.group_id),
                           {"error_code": 0, "throttle_time_ms": 0, "topics": topics})
