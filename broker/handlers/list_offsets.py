"""ListOffsets: earliest (-2), latest (-1), max timestamp (-3) or the first offset at a timestamp; and tiered
storage's earliest local (-4, v8+: the log start, every record being local), latest tiered (-5, v9+) and
earliest pending upload (-6, v11+), which have no offset without tiered storage.

A special timestamp newer than the request's version, or any other negative one, is UNSUPPORTED_VERSION, as
Kafka 4.2 answers (tests/reference)."""

from kbroker.broker.handlers.common import last_of_each
from kbroker.protocol.acls import DESCRIBE, TOPIC
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.list_offsets import LIST_OFFSETS as API  # noqa: F401  (the registry reads API)

LATEST, EARLIEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -1, -2, -3, -4, -5, -6
# The first version that knows each special timestamp
SINCE = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9, EARLIEST_PENDING_UPLOAD: 11}
NO_OFFSET = {"timestamp": -1, "offset": -1, "leader_epoch": -1}
DEBUGGING_CONSUMER = -2   # (replica id of a tool that may read a follower's offsets, as in Kafka)


def _refusal(partition, p, replica_id: int, api_version: int) -> ErrorCode | None:
    """Kafka's order: not the leader, then the client's view of the leader epoch (v4+), then the version, then
    a new leader whose high watermark is still below the start of its epoch."""
    if not partition.is_leader and replica_id != DEBUGGING_CONSUMER:
        return ErrorCode.NOT_LEADER_OR_FOLLOWER
    current = p.get("current_leader_epoch", -1)
    if -1 != current < partition.leader_epoch:   # (-1: no epoch named; any other is checked, as in Kafka)
        return ErrorCode.FENCED_LEADER_EPOCH
    if current > partition.leader_epoch:
        return ErrorCode.UNKNOWN_LEADER_EPOCH
    if p.timestamp < 0 and api_version < SINCE.get(p.timestamp, 1 << 15):
        return ErrorCode.UNSUPPORTED_VERSION
    if replica_id < 0 and partition.is_leader and partition.leader_epoch_start_offset > partition.log.high_watermark:
        return ErrorCode.OFFSET_NOT_AVAILABLE   # (a new leader not yet sure of the committed end; retriable)
    return None


def _lookup(partition, timestamp: int, isolation_level: int) -> dict:
    plog = partition.log
    readable_end = plog.last_stable_offset if isolation_level == 1 else plog.high_watermark
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return {"timestamp": -1, "offset": plog.log_start_offset}
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return NO_OFFSET
    if timestamp == LATEST:
        return {"timestamp": -1, "offset": readable_end}
    if timestamp == MAX_TIMESTAMP:
        found = plog.max_timestamp_offset()
    else:
        found = plog.offset_for_timestamp(timestamp)
    if found is None or found[0] >= readable_end:
        return {"timestamp": -1, "offset": -1}
    return {"timestamp": found[1], "offset": found[0]}


def handle(ctx, request):
    rm = ctx.broker.replica_manager
    topics, twice = [], set()
    for topic in last_of_each(request.topics, repeated=twice):
        name, asked, partitions = topic.name, topic.partitions, []
        if not ctx.authorized(DESCRIBE, TOPIC, name):
            topics.append({"name": name, "partitions": [
                {"partition_index": p.partition_index, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                 "timestamp": -1, "offset": -1} for p in asked]})
            continue
        for p in asked:
            if (name, p.partition_index) in twice:   # (which timestamp to answer is not the broker's to pick)
                partitions.append({"partition_index": p.partition_index, "error_code": ErrorCode.INVALID_REQUEST,
                                   "timestamp": -1, "offset": -1})
                continue
            partition = rm.get(name, p.partition_index)
            if partition is None:
                partitions.append({"partition_index": p.partition_index,
                                   "error_code": rm.missing_error(name, p.partition_index)})
                continue
            refused = _refusal(partition, p, request.replica_id, ctx.api_version)
            if refused is not None:
                partitions.append({"partition_index": p.partition_index, "error_code": refused,
                                   "timestamp": -1, "offset": -1})
                continue
            answer = _lookup(partition, p.timestamp, request.isolation_level)
            partitions.append({"partition_index": p.partition_index, "error_code": 0,
                               "leader_epoch": partition.leader_epoch, **answer})   # (NO_OFFSET: epoch -1)
        topics.append({"name": name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
