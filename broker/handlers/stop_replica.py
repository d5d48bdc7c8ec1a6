"""StopReplica: stop following (and with delete_partition, remove) replicas on this broker."""

from kbroker.protocol.acls import CLUSTER_ACTION
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.stop_replica import STOP_REPLICA as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    member = ctx.broker.cluster
    if not ctx.cluster_authorized(CLUSTER_ACTION):
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "partition_errors": []}
    if member is None:
        return {"error_code": ErrorCode.INVALID_REQUEST, "partition_errors": []}
    error, results = member.stop_replica(request)
    return {"error_code": error, "partition_errors": [
        {"topic_name": tp[0], "partition_index": tp[1], "error_code": e} for tp, e in results]}
