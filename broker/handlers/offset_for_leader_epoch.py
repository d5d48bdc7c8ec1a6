"""OffsetForLeaderEpoch: where a leader epoch ends in this leader's log (KIP-101, KIP-279)."""

from kbroker.protocol.acls import CLUSTER_ACTION, DESCRIBE, TOPIC
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.offset_for_leader_epoch import OFFSET_FOR_LEADER_EPOCH as API  # noqa: F401


def _answer(rm, topic: str, p) -> dict:
    partition = rm.get(topic, p.partition)
    out = {"partition": p.partition, "error_code": 0, "leader_epoch": -1, "end_offset": -1}
    if partition is None:
        out["error_code"] = rm.missing_error(topic, p.partition)
    elif not partition.is_leader:
        out["error_code"] = ErrorCode.NOT_LEADER_OR_FOLLOWER
    elif -1 != p.current_leader_epoch < partition.leader_epoch:   # (-1: no epoch named)
        out["error_code"] = ErrorCode.FENCED_LEADER_EPOCH
    elif p.current_leader_epoch > partition.leader_epoch:
        out["error_code"] = ErrorCode.UNKNOWN_LEADER_EPOCH
    else:
        plog = partition.log
        out["leader_epoch"], out["end_offset"] = plog.leader_epoch_cache.end_offset_for(p.leader_epoch,
                                                                                        plog.log_end_offset)
    return out


def _denied(p) -> dict:
    return {"partition": p.partition, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "leader_epoch": -1,
            "end_offset": -1}


def handle(ctx, request):
    rm = ctx.broker.replica_manager
    # Followers ask with ClusterAction; consumers checking for truncation (KIP-320) need Describe on the topic.
    everything = ctx.cluster_authorized(CLUSTER_ACTION, log_denied=False)
    topics = []
    for t in request.topics:
        allowed = everything or ctx.authorized(DESCRIBE, TOPIC, t.topic)
        topics.append({"topic": t.topic, "partitions": [_answer(rm, t.topic, p) if allowed else _denied(p)
                                                        for p in t.partitions]})
    return {"throttle_time_ms": 0, "topics": topics}
