"""DeleteTopics: by name (v1-v5) or by name or id (v6)."""

from kbroker.broker.configuration.quotas import mutation_quota, mutation_throttle
from kbroker.protocol.acls import DELETE, TOPIC
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.delete_topics import DELETE_TOPICS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    broker = ctx.broker
    if ctx.api_version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.topics]
    else:
        wanted = [(name, bytes(16)) for name in request.topic_names]
    by_id = {t.topic_id: n for n, t in broker.metadata.topics.items()}
    named = [n for n, _ in wanted if n is not None]
    ids = [i for n, i in wanted if n is None]
    responses, refused = [], set()
    quota = mutation_quota(ctx, strict_since=5)
    for name, topic_id in wanted:
        error, message = ErrorCode.NONE, None
        # Refused before anything is deleted, as Kafka's: a topic named twice (answered once), or by both its
        # name and an id.
        if name is not None and topic_id != bytes(16):
            message = "Topic name and topic id can not both be specified."
        elif name is not None and named.count(name) > 1:
            message = "Duplicate topic name."
        elif name is None and ids.count(topic_id) > 1:
            message = "Duplicate topic id."
        if message is not None:
            if (name, topic_id) not in refused:
                refused.add((name, topic_id))
                responses.append({"name": name, "topic_id": topic_id, "error_code": ErrorCode.INVALID_REQUEST,
                                  "error_message": message})
            continue
        if name is None:
            name = by_id.get(topic_id)
            if name is None:
                responses.append({"name": None, "topic_id": topic_id, "error_code": ErrorCode.UNKNOWN_TOPIC_ID})
                continue
        meta = broker.metadata.topics.get(name)
        if not ctx.authorized(DELETE, TOPIC, name):
            error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
        elif not broker.config["delete.topic.enable"]:
            error, message = ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."
        elif meta is None:
            error, message = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
        elif not quota.admit(meta.partitions):
            error, message = ErrorCode.THROTTLING_QUOTA_EXCEEDED, None   # (no message, as Kafka's)
        else:
            topic_id = meta.topic_id
            broker.admin.delete_topic(name)
        responses.append({"name": name, "topic_id": topic_id, "error_code": error, "error_message": message})
    return {"throttle_time_ms": mutation_throttle(ctx, quota), "responses": responses}
