"""OffsetCommit: group members (generation checked) or standalone consumers (generation -1, empty group).
From v10 topics are named by id (KIP-516): a partition of an id no topic has is UNKNOWN_TOPIC_ID."""

from kbroker.broker.handlers.common import (coordinator_error, group_shard, partition_exists, resolve_topic_ids,
                                            topics_refused, when_replicated)
from kbroker.protocol.acls import READ
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.offset_commit import OFFSET_COMMIT as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    broker = ctx.broker
    unknown = {id(t) for t in resolve_topic_ids(ctx, request.topics)[1]} if ctx.api_version >= 10 else set()
    offsets = {}
    for topic in request.topics:
        if id(topic) in unknown:
            continue
        for p in topic.partitions:
            offsets[(topic.name, p.partition_index)] = (p.committed_offset, p.committed_leader_epoch,
                                                        p.committed_metadata)
    error = coordinator_error(ctx, request.group_id)
    if error:
        results = {tp: error for tp in offsets}
    else:
        missing = request.group_id not in broker.group_coordinator.groups
        refused = topics_refused(ctx, READ, {topic for topic, _ in offsets})
        offsets = {tp: o for tp, o in offsets.items() if tp[0] not in refused}
        retention = request.retention_time_ms if 2 <= ctx.api_version <= 4 else -1
        results = broker.group_coordinator.commit_offsets(
            group_id=request.group_id, generation_id=request.generation_id_or_member_epoch,
            member_id=request.member_id, group_instance_id=request.group_instance_id, retention_time_ms=retention,
            offsets=offsets, partition_exists=partition_exists(ctx))
        if missing and ctx.api_version >= 9:   # a member's commit to no group: v9 says so (KIP-848)
            results = {tp: ErrorCode.GROUP_ID_NOT_FOUND if e == ErrorCode.ILLEGAL_GENERATION else e
                       for tp, e in results.items()}
        results.update({(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                        for t in request.topics if t.name in refused for p in t.partitions})
    topics = [{"name": topic.name, "topic_id": topic.get("topic_id"), "partitions": [
        {"partition_index": p.partition_index,
         "error_code": ErrorCode.UNKNOWN_TOPIC_ID if id(topic) in unknown else results[(topic.name, p.partition_index)]}
        for p in topic.partitions]} for topic in request.topics]
    response = {"throttle_time_ms": 0, "topics": topics}
    return response if error else when_replicated(ctx, *group_shard(ctx, request.group_id), response)
