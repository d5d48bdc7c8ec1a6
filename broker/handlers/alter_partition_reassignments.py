"""AlterPartitionReassignments (KIP-455): move partitions' replicas between brokers, through the active
controller (broker/cluster/reassignment.py). Needs Alter on the cluster. From v1 (KIP-860) a request may
forbid changing a partition's replication factor: such a move is INVALID_REPLICATION_FACTOR."""

from kbroker.broker.cluster.assignment import assignment_problem
from kbroker.protocol.acls import ALTER
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.alter_partition_reassignments import ALTER_PARTITION_REASSIGNMENTS as API  # noqa: F401  (the registry reads API)


def _every(request, error: ErrorCode, message: str | None) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "error_message": message, "responses": [
        {"name": t.name, "partitions": [{"partition_index": p.partition_index, "error_code": error,
                                          "error_message": message} for p in t.partitions]}
        for t in request.topics]}


def _single_broker(ctx, request) -> dict:
    """Without ZooKeeper there is one broker: its own id is the only assignment there can be."""
    responses = []
    for t in request.topics:
        results = []
        for p in t.partitions:
            meta = ctx.broker.metadata.topics.get(t.name)
            if meta is None:
                error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {t.name}."
            elif not 0 <= p.partition_index < meta.partitions:
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                message = f"Unable to find partition {t.name}:{p.partition_index}."
            elif p.replicas is None:
                error, message = ErrorCode.NO_REASSIGNMENT_IN_PROGRESS, None
            else:   # (the one broker is every replica there can be: Kafka's controller's checks decide the rest)
                problem = assignment_problem(p.replicas, {ctx.broker.broker_id}, None)
                error, message = (ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem) if problem else (ErrorCode.NONE, None)
            results.append({"partition_index": p.partition_index, "error_code": error, "error_message": message})
        responses.append({"name": t.name, "partitions": results})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses}


async def handle(ctx, request):
    if not ctx.cluster_authorized(ALTER):
        return _every(request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED, ctx.needs(ALTER))
    member = ctx.broker.cluster
    if member is None:
        return _single_broker(ctx, request)
    controller = member.controller
    if controller is None or not controller.active:
        return _every(request, ErrorCode.NOT_CONTROLLER, "This broker is not the controller")
    return await controller.enqueue("alter_reassignments", request)
