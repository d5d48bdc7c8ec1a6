"""OffsetCommit: group members (generation checked) or standalone consumers (generation -1, empty group).
From v10 topics are named by id (KIP-516): a partition of an id no topic has is UNKNOWN_TOPIC_ID."""

from kbroker.broker.handlers.common import (coordinator_error, group_shard, partition_exists, resolve_topic_ids,
                                            topics_refused, when_replicated)
from kbroker.protocol.acls import GROUP, READ
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.offset_commit import OFFSET_COMMIT as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    """As Kafka's broker: a principal refused the group fails every partition; then each partition the
    principal may not read, or that does not exist, is answered so without the coordinator, which sees only
    the rest (and, with none left, is not asked: no group is made)."""
    broker = ctx.broker
    unknown = {id(t) for t in resolve_topic_ids(ctx, request.topics)[1]} if ctx.api_version >= 10 else set()
    group_refused = not ctx.authorized(READ, GROUP, request.group_id)
    refused = set() if group_refused else topics_refused(ctx, READ, {t.name for t in request.topics})
    exists = partition_exists(ctx)
    offsets, results = {}, {}
    for topic in request.topics:
        if id(topic) in unknown:
            continue
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if group_refused:
                results[tp] = ErrorCode.GROUP_AUTHORIZATION_FAILED
            elif topic.name in refused:
                results[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
            elif not exists(*tp):
                results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                offsets[tp] = (p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
    error = coordinator_error(ctx, request.group_id) if offsets else ErrorCode.NONE
    if error:
        results.update({tp: error for tp in offsets})
    elif offsets:
        missing = request.group_id not in broker.group_coordinator.groups
        retention = request.retention_time_ms if 2 <= ctx.api_version <= 4 else -1
        committed = broker.group_coordinator.commit_offsets(
            group_id=request.group_id, generation_id=request.generation_id_or_member_epoch,
            member_id=request.member_id, group_instance_id=request.group_instance_id, retention_time_ms=retention,
            offsets=offsets, partition_exists=exists)
        if missing and ctx.api_version >= 9:   # a member's commit to no group: v9 says so (KIP-848)
            committed = {tp: ErrorCode.GROUP_ID_NOT_FOUND if e == ErrorCode.ILLEGAL_GENERATION else e
                         for tp, e in committed.items()}
        results.update(committed)
    topics = [{"name": topic.name, "topic_id": topic.get("topic_id"), "partitions": [
        {"partition_index": p.partition_index,
         "error_code": ErrorCode.UNKNOWN_TOPIC_ID if id(topic) in unknown else results[(topic.name, p.partition_index)]}
        for p in topic.partitions]} for topic in request.topics]
    response = {"throttle_time_ms": 0, "topics": topics}
    return response if error or not offsets else when_replicated(ctx, *group_shard(ctx, request.group_id), response)
