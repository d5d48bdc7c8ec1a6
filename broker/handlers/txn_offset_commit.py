"""TxnOffsetCommit: a transactional producer's consumed offsets, pending in the group until its marker.

Before anything is appended, the transaction's coordinator is asked whether the group's
``__consumer_offsets`` partition is in the producer's open transaction, under this producer id and epoch
(KIP-890 part 1, as Kafka's group coordinator asks): offsets of a transaction that does not know the
partition would never get a marker, and would hold the group's partitions unstable for ever. Before v5
the client added the partition with AddOffsetsToTxn, and one it did not add is INVALID_TXN_STATE; from
v5 (transactions V2, KIP-890 part 2) the client sends no AddOffsetsToTxn and the partition joins the
transaction here. A failed check is answered in TxnOffsetCommit's words, as Kafka's group coordinator
answers it (``_VERIFICATION_ERRORS``).
"""

from kbroker.broker.handlers.common import (answered_before_the_group, coordinator_error, group_shard,
                                            partition_exists, topics_refused, when_replicated)
from kbroker.protocol.acls import GROUP, READ, TRANSACTIONAL_ID, WRITE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.txn_offset_commit import TXN_OFFSET_COMMIT as API  # noqa: F401  (the registry reads API)


# A failed verification, as Kafka's group coordinator answers it: a fenced producer is INVALID_PRODUCER_EPOCH,
# and what a client retries without looking its coordinator up again COORDINATOR_NOT_AVAILABLE (a lost
# request to the transaction coordinator COORDINATOR_LOAD_IN_PROGRESS).
_VERIFICATION_ERRORS = {ErrorCode.PRODUCER_FENCED: ErrorCode.INVALID_PRODUCER_EPOCH,
                        ErrorCode.NETWORK_EXCEPTION: ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                        **{e: ErrorCode.COORDINATOR_NOT_AVAILABLE for e in (
                            ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                            ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_ENOUGH_REPLICAS,
                            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.REQUEST_TIMED_OUT)}}


def handle(ctx, request):
    if not request.topics:
        return _commit(ctx, request)
    answered = _answered_first(ctx, request)
    if answered:
        return _without(ctx, request, answered)
    return _verify_then_commit(ctx, request)


def _answered_first(ctx, request) -> dict:
    """Once the transactional id and the group are authorized, the partitions of topics the principal may not
    read (TOPIC_AUTHORIZATION_FAILED) and those that do not exist (UNKNOWN_TOPIC_OR_PARTITION): Kafka answers
    them so before it verifies the transaction or looks at the group, and commits the others."""
    if not ctx.authorized(WRITE, TRANSACTIONAL_ID, request.transactional_id) or \
            not ctx.authorized(READ, GROUP, request.group_id):
        return {}
    return answered_before_the_group(ctx, request.topics)


async def _without(ctx, request, answered: dict) -> dict:
    known = [{**t, "partitions": [p for p in t.partitions if (t.name, p.partition_index) not in answered]}
             for t in request.topics]
    results = dict(answered)
    if any(t["partitions"] for t in known):
        rest = type(request)({**request, "topics": [type(t)(k) for t, k in zip(request.topics, known)
                                                    if k["partitions"]]})
        answer = await _verify_then_commit(ctx, rest)
        results.update({(t["name"], p["partition_index"]): p["error_code"] for t in answer["topics"]
                        for p in t["partitions"]})
    return _response(request, results)


async def _verify_then_commit(ctx, request):
    broker = ctx.broker
    error = _refused(ctx, request) or broker.coordination.ensure_offsets_topic()
    if not error:
        partition = ("__consumer_offsets", broker.group_coordinator.partition_for(request.group_id))
        found = await broker.inter_broker.verify_partitions(request.transactional_id, request.producer_id,
                                                            request.producer_epoch, [partition],
                                                            add=ctx.api_version >= 5)
        error = found.get(partition, ErrorCode.UNKNOWN_SERVER_ERROR)
        error = _VERIFICATION_ERRORS.get(error, error)
        if error == ErrorCode.TRANSACTION_ABORTABLE and ctx.api_version < 4:
            error = ErrorCode.INVALID_TXN_STATE   # (the client predates KIP-890's abortable error)
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
