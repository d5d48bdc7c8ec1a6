"""Appending transaction markers on this broker, the partition leader: what WriteTxnMarkers does, shared by
the handler (a coordinator on another broker asked) and the coordinator here (its markers for partitions this
broker leads are appended directly, without a request to its own listener).

Markers are appended as acks=all: the answer waits until the ISR has each one, because the coordinator
writes the transaction's Complete state right after, and a marker lost with its leader would leave the
partition's last stable offset stuck behind a transaction nobody will finish.
"""

from __future__ import annotations

import time

import structlog

from kbroker.broker.coordination.shards import OFFSETS_TOPIC
from kbroker.protocol.errors import ErrorCode
from kbroker.protocol.records import build_marker_batch

log = structlog.get_logger("broker.txn_markers")


def append_markers(broker, markers: list):
    """Append each marker (WriteTxnMarkers' request entries, dicts) to its partitions; the response body, or
    a future of it that completes once the ISR has every marker appended."""
    rm = broker.replica_manager
    answers, waiting = [], {}
    for marker in markers:
        producer_id, commit = marker["producer_id"], marker["transaction_result"]
        batch = build_marker_batch(producer_id, marker["producer_epoch"], commit, marker["coordinator_epoch"],
                                   int(time.time() * 1000))
        topics = []
        for topic in marker["topics"]:
            name, partitions = topic["name"], []
            for index in topic["partition_indexes"]:
                result = rm.append_records(name, index, memoryview(batch), -1, from_coordinator=True)
                error = result.error
                if error == ErrorCode.NONE and name == OFFSETS_TOPIC:
                    broker.group_coordinator.complete_txn_offsets(index, producer_id, commit)
                if error:
                    log.warning("txn_marker_rejected", topic=name, partition=index, error=error.name)
                partitions.append({"partition_index": index, "error_code": error})
                if not error:
                    # One entry per partition: a later marker there ends at least as far as an earlier one.
                    waiting[(name, index)] = (result.info.last_offset + 1, partitions[-1])
            topics.append({"name": name, "partitions": partitions})
        answers.append({"producer_id": producer_id, "topics": topics})
    return rm.complete_when_replicated(waiting, {"markers": answers}, broker.config["request.timeout.ms"])
