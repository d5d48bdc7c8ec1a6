"""ElectLeaders: preferred or unclean leader election through the active controller."""

from kbroker.protocol.acls import ALTER
from kbroker.protocol.error_messages import kafka_message
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.elect_leaders import ELECT_LEADERS as API  # noqa: F401  (the registry reads API)

PREFERRED, UNCLEAN = 0, 1


async def handle(ctx, request):
    member = ctx.broker.cluster
    asked = None if request.topic_partitions is None else \
        [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    wanted = None if asked is None else list(dict.fromkeys(asked))   # (each elected once, answered as asked)
    if not ctx.cluster_authorized(ALTER):
        needs = ctx.needs(ALTER)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "replica_election_results": [{"topic": t.topic, "partition_result": [
                    {"partition_id": p, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": needs}
                    for p in t.partitions]} for t in (request.topic_partitions or [])]}
    if ctx.api_version >= 1 and request.election_type not in (PREFERRED, UNCLEAN):
        # (the whole request is refused, and each partition it names, before anything is looked at, as Kafka's)
        message = f"Unknown election type {request.election_type}"
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REQUEST, "replica_election_results": [
            {"topic": t.topic, "partition_result": [
                {"partition_id": p, "error_code": ErrorCode.INVALID_REQUEST, "error_message": message}
                for p in t.partitions]} for t in (request.topic_partitions or [])]}
    if member is None:   # one broker: every partition already has its only replica
        if wanted is None:   # (every topic, each without a partition: Kafka leaves out those not needing one)
            return {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": [
                {"topic": t, "partition_result": []} for t in ctx.broker.metadata.topics]}
        results = {tp: _single_broker(ctx.broker, *tp) for tp in wanted}
    else:
        controller = member.controller
        if controller is None or not controller.active:
            results = {tp: (ErrorCode.NOT_CONTROLLER, None) for tp in (wanted or [])}
        else:
            kind = "elect_unclean" if ctx.api_version >= 1 and request.election_type == UNCLEAN else "elect_preferred"
            results = await controller.enqueue(kind, wanted)
    topics: dict[str, list] = {}
    for topic, p in (asked if asked is not None else results):
        error, message = results[topic, p]
        topics.setdefault(topic, []).append({"partition_id": p, "error_code": error, "error_message": message})
    return {"throttle_time_ms": 0, "error_code": 0, "replica_election_results": [
        {"topic": t, "partition_result": ps} for t, ps in topics.items()]}


def _single_broker(broker, topic: str, partition: int) -> tuple[ErrorCode, str]:
    meta = broker.metadata.topics.get(topic)
    if meta is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic}"
    if not 0 <= partition < meta.partitions:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{partition}"
    return ErrorCode.ELECTION_NOT_NEEDED, kafka_message(ErrorCode.ELECTION_NOT_NEEDED)
