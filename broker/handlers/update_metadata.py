"""UpdateMetadata: the controller's view of live brokers and partitions, for answering clients."""

from kbroker.protocol.acls import CLUSTER_ACTION
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.update_metadata import UPDATE_METADATA as API  # noqa: F401  (the registry reads API)


async def handle(ctx, request):
    member = ctx.broker.cluster
    if not ctx.cluster_authorized(CLUSTER_ACTION):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    if member is None:
        return {"error_code": ErrorCode.INVALID_REQUEST}
    return {"error_code": await member.update_metadata(request)}
