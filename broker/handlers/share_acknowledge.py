"""ShareAcknowledge (KIP-932): a share group member's acknowledgements (accept, release, reject, and from v2
renew) outside a fetch. It continues or closes (epoch -1) the member's share session, never opens one; each
partition answers its acknowledgements' error (INVALID_RECORD_STATE for records the member does not hold)."""

from __future__ import annotations

from kbroker.broker.handlers.share_common import SharePartitions, answer, named_partitions, request_refusal
from kbroker.broker.shares.sessions import FINAL_EPOCH
from kbroker.protocol.messages.share_acknowledge import SHARE_ACKNOWLEDGE as API  # noqa: F401  (the registry reads API)


async def handle(ctx, request):
    refused = request_refusal(ctx, request)
    if refused:
        return answer(*refused)
    manager = ctx.broker.shares
    group, member, epoch = request.group_id, request.member_id, request.share_session_epoch
    error, session = manager.begin_session(ctx, group, member, epoch, acknowledge_only=True)
    if error:
        return answer(error)
    named = named_partitions(request)
    renew = ctx.api_version >= 2 and request.is_renew_ack
    shares = SharePartitions(ctx, group, member)
    await shares.load([(t, p) for t, p, _ in named])
    for topic_id, partition, batches in named:
        e = shares.entry(topic_id, partition)
        if not e["error_code"]:
            e["error_code"], e["error_message"] = await shares.acknowledge(topic_id, partition, batches, renew)
    if epoch == FINAL_EPOCH:
        manager.close_session(session)
        await manager.release_session(session)
    fields = ("partition_index", "error_code", "error_message", "current_leader")
    return shares.answer(manager.lock_ms(group), fields)
