"""AlterShareGroupOffsets (KIP-932): an empty share group's share partitions start again at the given offsets
(their in-flight records forgotten, their state epoch the group's, higher than the one their leaders loaded),
as kafka-share-groups --reset-offsets does. The share-partition leaders load the new state at the group's next
fetch (an idle group's share partitions leave their leaders' memory when its last session closes)."""

from kbroker.broker.handlers.share_group_offsets_common import empty_share_group
from kbroker.protocol.error_messages import MESSAGES
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.share_group_offsets import ALTER_SHARE_GROUP_OFFSETS as API  # noqa: F401


async def handle(ctx, request):
    broker = ctx.broker
    error, words, group = empty_share_group(ctx, request.group_id)
    if error:
        return {"throttle_time_ms": 0, "error_code": error, "error_message": words, "responses": []}
    shares = broker.shares
    known = dict(group.share_partitions)
    responses = []
    for topic in request.topics:
        meta = broker.metadata.topics.get(topic.topic_name)
        parts = []
        for p in topic.partitions:
            if meta is None or not 0 <= p.partition_index < meta.partitions:
                code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                tid = bytes(meta.topic_id)
                code, state = await shares.persister.summary(request.group_id, tid, p.partition_index)
                if not code:
                    # Kafka's state epoch for a reset is the group's epoch (members leaving raised it past the one
                    # their leaders loaded); one already that high is passed by one, so the reset still fences them
                    stored = state.state_epoch if state is not None else -1
                    epoch = group.group_epoch if group.group_epoch > stored else stored + 1
                    code = await shares.persister.initialize(request.group_id, tid, p.partition_index, epoch,
                                                             p.start_offset)
                if not code:
                    name, had = known.get(tid, (topic.topic_name, frozenset()))
                    known[tid] = (name, had | {p.partition_index})
                    shares.partitions.pop((request.group_id, topic.topic_name, p.partition_index), None)
            parts.append({"partition_index": p.partition_index, "error_code": code,
                          "error_message": MESSAGES.get(code) if code else None})   # (Kafka's default words)
        responses.append({"topic_name": topic.topic_name, "topic_id": meta.topic_id if meta else bytes(16),
                          "partitions": parts})
    if known != group.share_partitions:
        broker.group_coordinator.set_share_partitions(group, known)
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "responses": responses}
