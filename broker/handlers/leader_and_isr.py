"""LeaderAndIsr: the controller makes this broker leader or follower of partitions (cluster mode only)."""

from kbroker.protocol.acls import CLUSTER_ACTION
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.leader_and_isr import LEADER_AND_ISR as API  # noqa: F401  (the registry reads API)


async def handle(ctx, request):
    member = ctx.broker.cluster
    if not ctx.cluster_authorized(CLUSTER_ACTION):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "topics": []}
    if member is None:
        return {"error_code": ErrorCode.INVALID_REQUEST, "topics": []}
    error, errors = await member.leader_and_isr(request)
    topics: dict[bytes, list] = {}
    for (topic_id, index), e in errors.items():
        topics.setdefault(topic_id, []).append({"partition_index": index, "error_code": e})
    return {"error_code": error, "topics": [{"topic_id": t, "partition_errors": ps} for t, ps in topics.items()]}
