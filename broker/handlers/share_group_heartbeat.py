"""ShareGroupHeartbeat (KIP-932): joins, keeps and leaves a member of a share group; the coordinator assigns the
partitions each member fetches from, once their share state is initialized (``shares/group_state.py``, in the
background: the answer does not wait for it). UNSUPPORTED_VERSION while ``share.version`` is finalized at 0
(as it is while ``group.share.enable`` is false)."""

import asyncio

from kbroker.broker.configuration import features
from kbroker.broker.handlers.common import client_host, coordinator_error, group_shard, when_replicated
from kbroker.coordinators.group.consumer.heartbeat import error_response
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.share_group_heartbeat import SHARE_GROUP_HEARTBEAT as API  # noqa: F401


async def handle(ctx, request):
    coordinator = ctx.broker.group_coordinator
    if features.level(ctx.broker, "share.version") < 1:   # (0 also while group.share.enable is false)
        return error_response(ErrorCode.UNSUPPORTED_VERSION, "Share groups are not enabled.")
    error = coordinator_error(ctx, request.group_id)
    if error:
        return error_response(error)
    answer = coordinator.share_group_heartbeat(
        group_id=request.group_id, member_id=request.member_id, member_epoch=request.member_epoch,
        rack_id=request.rack_id, subscribed_topic_names=request.subscribed_topic_names,
        client_id=ctx.client_id or "", client_host=client_host(ctx))
    answer = when_replicated(ctx, *group_shard(ctx, request.group_id), answer)
    if isinstance(answer, asyncio.Future):
        answer = await answer
    return answer
