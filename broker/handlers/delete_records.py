"""DeleteRecords: advance partitions' log start offsets (records below are gone; fetches there are
OFFSET_OUT_OF_RANGE). Offset -1 means the high watermark; only the leader takes it, and its followers follow
its log start offset from their fetch responses."""

from kbroker.broker.handlers.common import last_of_each
from kbroker.protocol.acls import DELETE, TOPIC
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.delete_records import DELETE_RECORDS as API  # noqa: F401  (the registry reads API)

HIGH_WATERMARK = -1


def _delete(ctx, topic: str, index: int, offset: int) -> tuple[ErrorCode, int]:
    rm = ctx.broker.replica_manager
    partition = rm.get(topic, index)
    if partition is None:   # NOT_LEADER_OR_FOLLOWER when another broker has it: the client looks the leader up
        return rm.missing_error(topic, index), -1
    if not partition.is_leader:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER, -1
    plog = partition.log
    if "delete" not in plog.config.cleanup_policy:
        return ErrorCode.POLICY_VIOLATION, -1   # Kafka: records of compacted topics cannot be deleted
    if offset == HIGH_WATERMARK:
        offset = plog.high_watermark
    if offset < 0 or offset > plog.high_watermark:
        return ErrorCode.OFFSET_OUT_OF_RANGE, -1
    low = plog.advance_log_start_offset(offset)
    rm.log_start_moved((topic, index))
    ctx.log.info("records_deleted", topic=topic, partition=index, log_start_offset=low)
    return ErrorCode.NONE, low


def handle(ctx, request):
    results, changed = [], False
    for topic in last_of_each(request.topics):
        allowed = ctx.authorized(DELETE, TOPIC, topic.name)
        partitions = []
        for p in topic.partitions:
            error, low = _delete(ctx, topic.name, p.partition_index, p.offset) if allowed \
                else (ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1)
            changed = changed or error == ErrorCode.NONE
            partitions.append({"partition_index": p.partition_index, "low_watermark": low, "error_code": error})
        results.append({"name": topic.name, "partitions": partitions})
    if changed:   # the new log start offsets survive a crash from now on, not from the next periodic checkpoint
        ctx.broker.log_manager.checkpoint()
    return {"throttle_time_ms": 0, "topics": results}
