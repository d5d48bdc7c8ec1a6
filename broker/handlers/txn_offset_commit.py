"""TxnOffsetCommit: a transactional producer's consumed offsets, pending in the group until its marker."""

from kbroker.broker.handlers.common import coordinator_error, group_shard, partition_exists, topics_refused, when_replicated
from kbroker.protocol.acls import READ, TRANSACTIONAL_ID, WRITE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.txn_offset_commit import TXN_OFFSET_COMMIT as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    broker = ctx.broker
    offsets = {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
               for t in request.topics for p in t.partitions}
    # (sent to the group's coordinator: only Write on the transactional id is checked, not its coordinator)
    error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED \
        if not ctx.authorized(WRITE, TRANSACTIONAL_ID, request.transactional_id) \
        else coordinator_error(ctx, request.group_id)
    if error:
        results = {tp: error for tp in offsets}
    else:
        refused = topics_refused(ctx, READ, {t.name for t in request.topics})
        offsets = {tp: o for tp, o in offsets.items() if tp[0] not in refused}
        results = broker.group_coordinator.txn_commit_offsets(
            group_id=request.group_id, producer_id=request.producer_id, producer_epoch=request.producer_epoch,
            generation_id=request.generation_id, member_id=request.member_id,
            group_instance_id=request.group_instance_id, offsets=offsets, partition_exists=partition_exists(ctx))
        results.update({(t.name, p.partition_index): ErrorCode.TOPIC_AUTHORIZATION_FAILED
                        for t in request.topics if t.name in refused for p in t.partitions})
    response = {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                         "error_code": results[(t.name, p.partition_index)]}
                                        for p in t.partitions]} for t in request.topics]}
    return response if error else when_replicated(ctx, *group_shard(ctx, request.group_id), response)
