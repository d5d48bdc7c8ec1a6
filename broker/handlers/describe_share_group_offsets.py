"""DescribeShareGroupOffsets (KIP-932): each share partition's start offset (the first record not yet done) and,
from v1, its lag: records up to the high watermark not yet accepted or archived (-1 where the partition's
leader is another broker). Every partition whose share state the group initialized when the request names
no topic, whether or not a member is there; a partition never fetched, of a topic that does not exist or of a
group that does not exist has start offset -1, no error (as Kafka 4.2 answers)."""

from kbroker.broker.handlers.common import coordinator_error
from kbroker.coordinators.group.share.model import ShareGroup
from kbroker.protocol.acls import DESCRIBE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_share_group_offsets import DESCRIBE_SHARE_GROUP_OFFSETS as API  # noqa: F401


async def _partition(broker, group: str, topic: str, topic_id: bytes, index: int) -> dict:
    error, state = await broker.shares.persister.summary(group, topic_id, index)
    answer = {"partition_index": index, "start_offset": -1, "leader_epoch": -1, "lag": -1, "error_code": error,
              "error_message": None}
    if error or state is None:
        return answer
    answer["leader_epoch"] = state.leader_epoch
    if state.start_offset < 0:   # (initialized, never loaded by its leader: no start offset, no lag yet)
        return answer
    answer["start_offset"] = state.start_offset
    local = broker.replica_manager.get(topic, index)
    if local is not None and local.is_leader and state.delivery_complete_count >= 0:   # (-1: a writer's unknown)
        answer["lag"] = max(local.log.high_watermark - state.start_offset - state.delivery_complete_count, 0)
    return answer


def _initialized(broker, group: ShareGroup) -> dict[str, list[int]]:
    """The partitions whose share state the group has initialized, by topic name: what a request that names no
    topic describes, whether or not any member subscribes to them now (an empty group's offsets and lag too).
    A topic deleted since, or deleted and created again under its name, is left out."""
    topics = {}
    for topic_id, (name, partitions) in group.share_partitions.items():
        meta = broker.metadata.topics.get(name)
        if meta is not None and bytes(meta.topic_id) == topic_id:
            topics[name] = sorted(partitions)
    return dict(sorted(topics.items()))


async def handle(ctx, request):
    broker = ctx.broker
    groups = []
    for wanted in request.groups:
        group_id = wanted.group_id
        error = coordinator_error(ctx, group_id, DESCRIBE)
        group = broker.group_coordinator.groups.get(group_id) if not error else None
        if not error and group is not None and not isinstance(group, ShareGroup):
            error = ErrorCode.GROUP_ID_NOT_FOUND
        if error:
            groups.append({"group_id": group_id, "topics": [], "error_code": error, "error_message": None})
            continue
        # (no such group: Kafka 4.2 answers as for a share group without state, error 0)
        # (a partition named twice is answered once, as Kafka's)
        asked = {t.topic_name: list(dict.fromkeys(t.partitions)) for t in wanted.topics} \
            if wanted.topics is not None else (
            _initialized(broker, group) if group is not None else {})
        topics = []
        for name, partitions in asked.items():
            meta = broker.metadata.topics.get(name)
            if meta is None:   # (Kafka: no error, no start offset)
                topics.append({"topic_name": name, "topic_id": bytes(16), "partitions": [
                    {"partition_index": p, "start_offset": -1, "leader_epoch": -1, "lag": -1, "error_code": 0,
                     "error_message": None} for p in partitions]})
                continue
            topics.append({"topic_name": name, "topic_id": meta.topic_id, "partitions": [
                await _partition(broker, group_id, name, bytes(meta.topic_id), p) for p in partitions]})
        groups.append({"group_id": group_id, "topics": topics, "error_code": 0, "error_message": None})
    return {"throttle_time_ms": 0, "groups": groups}
