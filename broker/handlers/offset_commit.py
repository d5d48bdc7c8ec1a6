"""OffsetCommit: group members (generation checked) or standalone consumers (generation -1, empty group).
From v10 topics are named by id (KIP-516): a partition of an id no topic has is UNKNOWN_TOPIC_ID."""

from kbroker.broker.handlers.common import (answered_before_the_group, coordinator_error, group_shard,
                                            partition_exists, resolve_topic_ids, when_replicated)
from kbroker.protocol.acls import GROUP, READ
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.offset_commit import OFFSET_COMMIT as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    """As Kafka's broker: a principal refused the group fails every partition; then each partition the
    principal may not read, or that does not exist, is answered so without the coordinator, which sees only
    the rest (and, with none left, is not asked: no group is made)."""
    broker = ctx.broker
    unknown = {id(t) for t in resolve_topic_ids(ctx, request.topics)[1]} if ctx.api_version >= 10 else set()
    known = [t for t in request.topics if id(t) not in unknown]
    if not ctx.authorized(READ, GROUP, request.group_id):
        results = {(t.name, p.partition_index): ErrorCode.GROUP_AUTHORIZATION_FAILED
                   for t in known for p in t.partitions}
    else:
        results = answered_before_the_group(ctx, known)
    offsets = {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
               for t in known for p in t.partitions if (t.name, p.partition_index) not in results}
    error = coordinator_error(ctx, request.group_id) if offsets else ErrorCode.NONE
    if error:
        results.update({tp: error for tp in offsets})
    elif offsets:
        missing = request.group_id not in broker.group_coordinator.groups
        retention = request.retention_time_ms if 2 <= ctx.api_version <= 4 else -1
        committed = broker.group_coordinator.commit_offsets(
            group_id=request.group_id, generation_id=request.generation_id_or_member_epoch,
            member_id=request.member_id, group_instance_id=request.group_instance_id, retention_time_ms=retention,
            offsets=offsets, partition_exists=partition_exists(ctx), version=ctx.api_version)
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
