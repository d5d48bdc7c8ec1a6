"""Produce: validate and append each partition's batch; acks 0, 1 and all (-1)."""

from broker.context import CLOSE_CONNECTION, NO_RESPONSE
from protocol.errors import ErrorCode
from protocol.messages.produce import PRODUCE as API  # noqa: F401  (the registry reads API)


def handle(ctx, request):
    rm = ctx.broker.replica_manager
    acks = request.acks
    responses = []
    failed = False
    for topic in request.topic_data:
        partitions = []
        for pdata in topic.partition_data:
            if acks not in (-1, 0, 1):
                result_error, info, message = ErrorCode.INVALID_REQUIRED_ACKS, None, f"acks={acks}"
            elif request.transactional_id is not None:
                result_error, info, message = (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None,
                                               "transactions are not supported yet")
            else:
                result = rm.append_records(topic.name, pdata.index, pdata.records, acks)
                result_error, info, message = result.error, result.info, result.message
            failed = failed or result_error != ErrorCode.NONE
            if info is not None:
                partitions.append({"index": pdata.index, "error_code": 0, "base_offset": info.first_offset,
                                   "log_append_time_ms": info.log_append_time,
                                   "log_start_offset": info.log_start_offset})
            else:
                partitions.append({"index": pdata.index, "error_code": result_error, "base_offset": -1,
                                   "log_append_time_ms": -1, "log_start_offset": -1, "error_message": message})
        responses.append({"name": topic.name, "partition_responses": partitions})
    if acks == 0:
        # No response is expected; as Kafka does, a failure closes the connection so the client notices.
        return CLOSE_CONNECTION if failed else NO_RESPONSE
    return {"responses": responses, "throttle_time_ms": 0}
