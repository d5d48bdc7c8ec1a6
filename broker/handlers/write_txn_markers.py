"""WriteTxnMarkers: the transaction coordinator asks partition leaders to append COMMIT/ABORT markers."""

import time

from protocol.errors import ErrorCode
from protocol.messages.write_txn_markers import WRITE_TXN_MARKERS as API  # noqa: F401  (the registry reads API)
from protocol.records import build_marker_batch

OFFSETS_TOPIC = "__consumer_offsets"


def handle(ctx, request):
    broker = ctx.broker
    rm = broker.replica_manager
    markers = []
    for marker in request.markers:
        topics = []
        batch = build_marker_batch(marker.producer_id, marker.producer_epoch, marker.transaction_result,
                                   marker.coordinator_epoch, int(time.time() * 1000))
        for topic in marker.topics:
            partitions = []
            for index in topic.partition_indexes:
                result = rm.append_records(topic.name, index, memoryview(batch), -1, from_coordinator=True)
                error = result.error
                if error == ErrorCode.NONE and topic.name == OFFSETS_TOPIC:
                    broker.group_coordinator.complete_txn_offsets(index, marker.producer_id,
                                                                  marker.transaction_result)
                if error:
                    ctx.log.warning("txn_marker_rejected", topic=topic.name, partition=index, error=error.name)
                partitions.append({"partition_index": index, "error_code": error})
            topics.append({"name": topic.name, "partitions": partitions})
        markers.append({"producer_id": marker.producer_id, "topics": topics})
    return {"markers": markers}
