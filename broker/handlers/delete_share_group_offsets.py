"""DeleteShareGroupOffsets (KIP-932): an empty share group forgets topics: their share partitions' state goes
from the share coordinator (a later fetch starts them again at share.auto.offset.reset), as
kafka-share-groups --delete-offsets does.

As Kafka answers it: only a topic whose share state the group initialized is deleted (the partitions recorded
initialized); a topic there is not is UNKNOWN_TOPIC_OR_PARTITION in Kafka's words, and so is one the group
never initialized or whose offsets were deleted already ("There is no offset information to delete."), neither
naming a topic id. The topics deleted come first in the answer, then those refused, then those whose deletion
failed at the share coordinator."""

from kbroker.broker.handlers.share_group_offsets_common import empty_share_group
from kbroker.protocol.error_messages import MESSAGES
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.share_group_offsets import DELETE_SHARE_GROUP_OFFSETS as API  # noqa: F401

NO_OFFSETS = "There is no offset information to delete."


def _topic(name: str, topic_id: bytes, code: ErrorCode, message: str | None = None) -> dict:
    return {"topic_name": name, "topic_id": topic_id, "error_code": code, "error_message": message}


async def handle(ctx, request):
    broker = ctx.broker
    error, words, group = empty_share_group(ctx, request.group_id, deleting=True)
    if error:
        return {"throttle_time_ms": 0, "error_code": error, "error_message": words, "responses": []}
    known = dict(group.share_partitions)
    deleted, refused, failed = [], [], []
    unknown = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    for topic in request.topics:
        meta = broker.metadata.topics.get(topic.topic_name)
        tid = bytes(meta.topic_id) if meta is not None else None
        if tid is None or tid not in known:
            words = MESSAGES[unknown] if tid is None else NO_OFFSETS
            refused.append(_topic(topic.topic_name, bytes(16), unknown, words))
            continue
        code = ErrorCode.NONE
        for index in sorted(known[tid][1]):
            broker.shares.partitions.pop((request.group_id, topic.topic_name, index), None)
            code = code or await broker.shares.persister.delete(request.group_id, tid, index)
        if code:
            failed.append(_topic(topic.topic_name, tid, code, MESSAGES.get(code)))
        else:
            known.pop(tid)
            deleted.append(_topic(topic.topic_name, tid, ErrorCode.NONE))
    if known != group.share_partitions:
        broker.group_coordinator.set_share_partitions(group, known)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": deleted + refused + failed}
