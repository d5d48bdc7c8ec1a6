"""DescribeProducers: the idempotent and transactional producers a partition's log knows."""

from kbroker.broker.metadata import topic_name_invalid
from kbroker.protocol.acls import READ, TOPIC
from kbroker.protocol.error_messages import kafka_message
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_producers import DESCRIBE_PRODUCERS as API  # noqa: F401  (the registry reads API)


def _topic_error(ctx, name: str) -> tuple[ErrorCode, str | None] | None:
    invalid = topic_name_invalid(name)
    if invalid:
        return ErrorCode.INVALID_TOPIC_EXCEPTION, invalid
    if not ctx.authorized(READ, TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, kafka_message(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    if name not in ctx.broker.metadata.topics:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, kafka_message(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    return None


def handle(ctx, request):
    rm = ctx.broker.replica_manager
    topics = []
    for topic in request.topics:
        partitions = []
        error = _topic_error(ctx, topic.name)
        if error:   # (Kafka's order: the name, the right to read, the topic known; each with its words)
            code, message = error
            topics.append({"name": topic.name, "partitions": [
                {"partition_index": i, "error_code": code, "error_message": message, "active_producers": []}
                for i in topic.partition_indexes]})
            continue
        for index in topic.partition_indexes:
            partition = rm.get(topic.name, index)
            if partition is None or not partition.is_leader:
                # (Only the leader's producer state is current: Kafka answers from the leader's log alone.)
                error = rm.missing_error(topic.name, index) if partition is None else ErrorCode.NOT_LEADER_OR_FOLLOWER
                partitions.append({"partition_index": index, "error_code": error, "active_producers": []})
                continue
            state = partition.log.producer_state
            producers = [{"producer_id": pid, "producer_epoch": entry.epoch, "last_sequence": entry.last_seq,
                          "last_timestamp": entry.last_timestamp, "coordinator_epoch": entry.coordinator_epoch,
                          "current_txn_start_offset": state.ongoing.get(pid, -1)}
                         for pid, entry in state.producers.items()]
            partitions.append({"partition_index": index, "error_code": 0, "active_producers": producers})
        topics.append({"name": topic.name, "partitions": partitions})
    return {"throttle_time_ms": 0, "topics": topics}
