"""DescribeProducers: the idempotent and transactional producers a partition's log knows."""

from kbroker.broker.metadata import topic_name_error
from kbroker.protocol.acls import READ, TOPIC
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.describe_producers import DESCRIBE_PRODUCERS as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    rm = ctx.broker.replica_manager
    topics = []
    for topic in request.topics:
        partitions = []
        if not ctx.authorized(READ, TOPIC, topic.name):
            topics.append({"name": topic.name, "partitions": [
                {"partition_index": i, "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED, "active_producers": []}
                for i in topic.partition_indexes]})
            continue
        if topic_name_error(topic.name):   # (a name no topic can have: Kafka answers so, not that it is unknown)
            topics.append({"name": topic.name, "partitions": [
                {"partition_index": i, "error_code": ErrorCode.INVALID_TOPIC_EXCEPTION, "active_producers": []}
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
