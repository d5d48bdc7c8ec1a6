"""DeleteShareGroupOffsets (KIP-932): an empty share group forgets topics: their share partitions' state goes
from the share coordinator (a later fetch starts them again at share.auto.offset.reset), as
kafka-share-groups --delete-offsets does."""

from kbroker.broker.handlers.share_group_offsets_common import empty_share_group
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.share_group_offsets import DELETE_SHARE_GROUP_OFFSETS as API  # noqa: F401


async def handle(ctx, request):
    broker = ctx.broker
    error, group = empty_share_group(ctx, request.group_id, deleting=True)
    if error:
        return {"throttle_time_ms": 0, "error_code": error, "error_message": None, "responses": []}
    known = dict(group.share_partitions)
    responses = []
    for topic in request.topics:
        meta = broker.metadata.topics.get(topic.topic_name)
        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if meta is None else ErrorCode.NONE
        if meta is not None:
            tid = bytes(meta.topic_id)
            for index in range(meta.partitions):
                broker.shares.partitions.pop((request.group_id, topic.topic_name, index), None)
                code = code or await broker.shares.persister.delete(request.group_id, tid, index)
            if not code:
                known.pop(tid, None)
        responses.append({"topic_name": topic.topic_name, "topic_id": meta.topic_id if meta else bytes(16),
                          "error_code": code, "error_message": None})
    if known != group.share_partitions:
        broker.group_coordinator.set_share_partitions(group, known)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses}
