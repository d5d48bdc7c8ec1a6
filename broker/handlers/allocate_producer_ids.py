"""AllocateProducerIds: the active controller gives a registered broker the next block of producer ids from
``/latest_producer_id_block``, as Kafka's ZooKeeper controller does for its brokers (3.0+). A Kafka broker in a
kbroker cluster needs it for every InitProducerId it answers; the block comes from the same znode and the same
conditional update as kbroker's brokers' own, so no id is given twice."""

from kbroker.protocol.acls import CLUSTER_ACTION
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.allocate_producer_ids import ALLOCATE_PRODUCER_IDS as API  # noqa: F401  (registry)


def _refused(error: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "producer_id_start": 0, "producer_id_len": 0}


async def handle(ctx, request):
    member = ctx.broker.cluster
    if not ctx.cluster_authorized(CLUSTER_ACTION):
        return _refused(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = member.controller if member is not None else None
    if controller is None or not controller.active:
        return _refused(ErrorCode.NOT_CONTROLLER)
    registered = controller.live.get(request.broker_id)
    if registered is None:
        return _refused(ErrorCode.BROKER_ID_NOT_REGISTERED)
    if registered.epoch != request.broker_epoch:   # (a registration of an earlier run of that broker)
        return _refused(ErrorCode.STALE_BROKER_EPOCH)
    start, end = await member.zk_call(member.zk.allocate_producer_id_block, request.broker_id)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id_start": start,
            "producer_id_len": end - start + 1}
