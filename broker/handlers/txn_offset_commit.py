"""TxnOffsetCommit: a transactional producer's consumed offsets, pending in the group until its marker.

From v5 (transactions V2, KIP-890 part 2) the client sends no AddOffsetsToTxn: the group's
``__consumer_offsets`` partition joins the transaction here, at the transaction's coordinator, before the
offsets are appended under the producer's id (a transaction that does not know the partition would never
send it a marker, and the offsets would hold its last stable offset for ever).
"""

from kbroker.broker.handlers.common import coordinator_error, group_shard, partition_exists, topics_refused, when_replicated
from kbroker.protocol.acls import READ, TRANSACTIONAL_ID, WRITE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.txn_offset_commit import TXN_OFFSET_COMMIT as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    if ctx.api_version < 5 or not request.topics:
        return _commit(ctx, request)
    return _add_then_commit(ctx, request)


async def _add_then_commit(ctx, request):
    broker = ctx.broker
    error = _refused(ctx, request) or broker.coordination.ensure_offsets_topic()
    if not error:
        partition = ("__consumer_offsets", broker.group_coordinator.partition_for(request.group_id))
        found = await broker.inter_broker.verify_partitions(request.transactional_id, request.producer_id,
                                                            request.producer_epoch, [partition], add=True)
        error = found.get(partition, ErrorCode.UNKNOWN_SERVER_ERROR)
    if error:
        return _response(request, {(t.name, p.partition_index): error for t in request.topics for p in t.partitions})
    # (_commit checks the coordinator again: the group's shard may have moved while the add was out)
    answer = _commit(ctx, request)
    return await answer if hasattr(answer, "__await__") else answer


def _refused(ctx, request) -> ErrorCode:
    # (sent to the group's coordinator: only Write on the transactional id is checked, not its coordinator)
    return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED \
        if not ctx.authorized(WRITE, TRANSACTIONAL_ID, request.transactional_id) \
        else coordinator_error(ctx, request.group_id)


def _response(request, results: dict) -> dict:
    return {"throttle_time_ms": 0, "topics": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index,
                                         "error_code": results[(t.name, p.partition_index)]}
                                        for p in t.partitions]} for t in request.topics]}


def _commit(ctx, request):
    broker = ctx.broker
    offsets = {(t.name, p.partition_index): (p.committed_offset, p.committed_leader_epoch, p.committed_metadata)
               for t in request.topics for p in t.partitions}
    error = _refused(ctx, request)
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
    response = _response(request, results)
    return response if error else when_replicated(ctx, *group_shard(ctx, request.group_id), response)
