"""WriteTxnMarkers: the transaction coordinator asks partition leaders to append COMMIT/ABORT markers.

Markers are appended as acks=all: the answer waits until the ISR has each
one, because the coordinator writes the transaction's Complete state right
after, and a marker lost with its leader would leave the partition's last
stable offset stuck behind a transaction nobody will finish.
"""

import time

from kbroker.protocol.acls import ALTER, CLUSTER_ACTION
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.messages.write_txn_markers import WRITE_TXN_MARKERS as API  # noqa: F401  (the registry reads API)
from kbroker.protocol.records import build_marker_batch

OFFSETS_TOPIC = "__consumer_offsets"


def handle(ctx, request):
    broker = ctx.broker
    rm = broker.replica_manager
    if not ctx.cluster_authorized(ALTER, log_denied=False) and not ctx.cluster_authorized(CLUSTER_ACTION):
        return {"markers": [{"producer_id": m.producer_id, "topics": [
            {"name": t.name, "partitions": [{"partition_index": i, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
                                            for i in t.partition_indexes]} for t in m.topics]}
            for m in request.markers]}
    markers, waiting = [], {}
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
                if not error:
                    # One entry per partition: a later marker there ends at least as far as an earlier one.
                    waiting[(topic.name, index)] = (result.info.last_offset + 1, partitions[-1])
            topics.append({"name": topic.name, "partitions": partitions})
        markers.append({"producer_id": marker.producer_id, "topics": topics})
    return rm.complete_when_replicated(waiting, {"markers": markers}, broker.config["request.timeout.ms"])
