"""OffsetFetch: committed offsets of one group (v1-7) or several (v8+); -1 where nothing is committed.

From v9 a group's request may carry KIP-848's member id and epoch: a consumer group's member must read at its
current epoch (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); a classic group does not check them (as Kafka). A group's
error is answered with no topics from v2; v0-1 have no group error field, so each partition asked carries it. From
v10 topics are named by id (KIP-516): partitions of an id no topic has are UNKNOWN_TOPIC_ID, and a group's
committed topics that no longer exist are left out of an all-topics answer.
"""

from collections import defaultdict

from kbroker.broker.handlers.common import coordinator_error, resolve_topic_ids, topics_refused
from kbroker.protocol.acls import DESCRIBE
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.offset_fetch import OFFSET_FETCH as API  # noqa: F401  (the registry reads API)


def _fetch_group(ctx, group_id: str, topics, require_stable: bool, member=(None, -1)) -> tuple[ErrorCode, list[dict]]:
    requested = None if topics is None else [(t.name, p) for t in topics for p in t.partition_indexes]
    error = coordinator_error(ctx, group_id, DESCRIBE) or ctx.broker.group_coordinator.fetch_member_error(
        group_id, *member)
    unstable: set = set()
    refused: set[str] = set()
    if error:
        if requested is None or ctx.api_version >= 2:
            return error, []
        found = {tp: None for tp in requested}
    else:
        found = ctx.broker.group_coordinator.fetch_offsets(group_id, requested)
        refused = topics_refused(ctx, DESCRIBE, {topic for topic, _ in found})
        if requested is None:   # all the group's topics: those it may not describe are left out
            found = {tp: c for tp, c in found.items() if tp[0] not in refused}
        if require_stable:
            # KIP-447: a partition whose offset is pending in an open transaction is not answered yet.
            unstable = ctx.broker.group_coordinator.unstable_offsets(group_id, list(found))
    def entry(topic: str, partition: int) -> dict:
        if topic in refused:
            return {"partition_index": partition, "committed_offset": -1, "committed_leader_epoch": -1,
                    "metadata": "", "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED}
        committed = found[(topic, partition)]
        return {"partition_index": partition, "committed_offset": committed.offset if committed else -1,
                "committed_leader_epoch": committed.leader_epoch if committed else -1,
                "metadata": committed.metadata if committed else "",
                "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT if (topic, partition) in unstable else error}
    if requested is not None:   # answered as asked, entry by entry (a repeat too, as Kafka answers it)
        return error, [{"name": t.name, "partitions": [entry(t.name, p) for p in t.partition_indexes]}
                       for t in topics]
    by_topic: dict[str, list[dict]] = defaultdict(list)
    for topic, partition in found:
        by_topic[topic].append(entry(topic, partition))
    return error, [{"name": name, "partitions": parts} for name, parts in by_topic.items()]


def _by_id(ctx, group_id: str, topics, require_stable: bool, member=(None, -1)) -> tuple[ErrorCode, list[dict]]:
    """v10: the same answer with topics named by id."""
    known, unknown = resolve_topic_ids(ctx, topics) if topics is not None else (None, [])
    error, found = _fetch_group(ctx, group_id, known, require_stable, member)
    ids = ctx.broker.topic_ids
    answer = [{**t, "topic_id": topic_id} for t in found if (topic_id := ids.id_of(t["name"])) is not None]
    answer += [{"topic_id": bytes(t.topic_id), "partitions": [
        {"partition_index": p, "committed_offset": -1, "committed_leader_epoch": -1, "metadata": "",
         "error_code": ErrorCode.UNKNOWN_TOPIC_ID} for p in t.partition_indexes]}
        for t in unknown]
    return error, answer


def handle(ctx, request):
    if ctx.api_version >= 8:
        groups = []
        fetch_group = _by_id if ctx.api_version >= 10 else _fetch_group
        for group in request.groups:
            member = (group.member_id, group.member_epoch) if ctx.api_version >= 9 else (None, -1)
            error, topics = fetch_group(ctx, group.group_id, group.topics, request.require_stable, member)
            groups.append({"group_id": group.group_id, "topics": topics, "error_code": error})
        return {"throttle_time_ms": 0, "groups": groups}
    topics = request.topics
    if ctx.api_version < 2 and not topics:
        topics = []   # v1 has no "all topics" form
    error, found = _fetch_group(ctx, request.group_id, topics, ctx.api_version >= 7 and request.require_stable)
    return {"throttle_time_ms": 0, "topics": found, "error_code": error}
