"""DeleteTopics: by name (v1-v5) or by name or id (v6)."""

from collections import Counter

from kbroker.broker.configuration.quotas import mutation_quota, mutation_throttle
from kbroker.protocol.acls import DELETE, DESCRIBE, TOPIC
from kbroker.protocol.error_messages import kafka_message
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.delete_topics import DELETE_TOPICS as API  # noqa: F401  (the registry reads API)


ZERO_ID = bytes(16)


def _entry(name, topic_id: bytes, error: ErrorCode, message: str | None = None) -> dict:
    return {"name": name, "topic_id": topic_id, "error_code": error, "error_message": message}


def handle(ctx, request):
    """Kafka 4.2's controller's checks, in its order and words: deletion enabled at all (else the whole request
    is refused), an entry naming neither or both a name and an id, names and ids given twice, ids unknown, the
    rights to see and to delete, names unknown, a name and an id given for one topic; then the deletions.
    Kafka shuffles its answers; kbroker answers each entry in the request's order."""
    broker = ctx.broker
    entries = [(t.name, t.topic_id) for t in request.topics] if ctx.api_version >= 6 else \
        [(name, ZERO_ID) for name in request.topic_names]
    if not broker.config["delete.topic.enable"]:
        error = ErrorCode.TOPIC_DELETION_DISABLED if ctx.api_version >= 3 else ErrorCode.INVALID_REQUEST
        return {"throttle_time_ms": 0, "responses": [_entry(n, i, error) for n, i in entries]}
    names = Counter(n for n, i in entries if n is not None and i == ZERO_ID)
    ids = Counter(i for n, i in entries if n is None and i != ZERO_ID)
    quota = mutation_quota(ctx, strict_since=5)
    may_delete_all = ctx.cluster_authorized(DELETE, log_denied=False)
    answers: dict[int, dict] = {}   # (entry's place -> its answer: given in the request's order)
    deleting: dict[bytes, tuple[str, int]] = {}   # (topic id -> its name and the place of the entry naming it)
    first: dict = {}
    for place, (name, topic_id) in enumerate(entries):
        if name is None and topic_id == ZERO_ID:
            answers[place] = _entry(None, ZERO_ID, ErrorCode.INVALID_REQUEST,
                                    "Neither topic name nor id were specified.")
        elif name is not None and topic_id != ZERO_ID:
            answers[place] = _entry(name, topic_id, ErrorCode.INVALID_REQUEST,
                                    "You may not specify both topic name and topic id.")
        else:
            first.setdefault((name, topic_id), place)
    # (the ids first, then the names, as Kafka's controller resolves them: a name whose topic's id was given
    # too is refused, and that id is then answered nothing)
    for (name, topic_id), place in sorted(first.items(), key=lambda kv: kv[0][0] is not None):
        if name is None:
            answers[place] = _by_id(ctx, topic_id, ids, may_delete_all, deleting, place)
        else:
            answers[place] = _by_name(ctx, name, names, may_delete_all, deleting, place)
    for topic_id, (name, place) in deleting.items():
        meta = broker.metadata.topics[name]
        if not quota.admit(meta.partitions):   # (no message, as Kafka's)
            answers[place] = _entry(name, topic_id, ErrorCode.THROTTLING_QUOTA_EXCEEDED)
            continue
        broker.admin.delete_topic(name)
        answers[place] = _entry(name, topic_id, ErrorCode.NONE)
    return {"throttle_time_ms": mutation_throttle(ctx, quota),
            "responses": [answers[place] for place in sorted(answers) if answers[place] is not None]}


def _by_id(ctx, topic_id: bytes, ids: Counter, may_delete_all: bool, deleting: dict, place: int):
    """The answer to an entry naming a topic by id, or None once it is to be deleted."""
    if ids[topic_id] > 1:
        return _entry(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
    known = ctx.broker.topic_ids.name_of(topic_id)   # (its index: a map of every topic each request was most of it)
    if known is None:
        return _entry(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, kafka_message(ErrorCode.UNKNOWN_TOPIC_ID))
    if not (may_delete_all or ctx.authorized(DELETE, TOPIC, known)):
        # (named only to a user who may see it: an id must not reveal a name)
        seen = may_delete_all or ctx.authorized(DESCRIBE, TOPIC, known, log_denied=False)
        return _entry(known if seen else None, topic_id, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                      kafka_message(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    deleting[topic_id] = (known, place)
    return None


def _by_name(ctx, name: str, names: Counter, may_delete_all: bool, deleting: dict, place: int):
    """The answer to an entry naming a topic by name, or None once it is to be deleted."""
    if names[name] > 1:
        return _entry(name, ZERO_ID, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    seen = may_delete_all or ctx.authorized(DESCRIBE, TOPIC, name, log_denied=False)
    if not seen or not (may_delete_all or ctx.authorized(DELETE, TOPIC, name)):
        return _entry(name, ZERO_ID, ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                      kafka_message(ErrorCode.TOPIC_AUTHORIZATION_FAILED))
    meta = ctx.broker.metadata.topics.get(name)
    if meta is None:
        return _entry(name, ZERO_ID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                      kafka_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    if meta.topic_id in deleting:   # (its id given too: neither is deleted)
        del deleting[meta.topic_id]
        return _entry(name, meta.topic_id, ErrorCode.INVALID_REQUEST,
                      "The provided topic name maps to an ID that was already supplied.")
    deleting[meta.topic_id] = (name, place)
    return None
