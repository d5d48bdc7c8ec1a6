"""Requests this broker sends to partition leaders and coordinators, over the Kafka protocol through ``client/``.

The transaction coordinator writes markers with WriteTxnMarkers, and a
partition leader checks a transactional produce with AddPartitionsToTxn v4
(verify only, KIP-890). On a single broker both go to this broker's own
listener: the same path a cluster uses, tested even without one.
"""

from __future__ import annotations

import asyncio

import structlog

from client.connection import ConnectionClosed, KafkaConnection
from coordinators.transaction.coordinator import Marker
from protocol.errors import ErrorCode

log = structlog.get_logger("broker.inter_broker")

WRITE_TXN_MARKERS, ADD_PARTITIONS_TO_TXN = 27, 24
RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.REQUEST_TIMED_OUT,
             ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
             ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.KAFKA_STORAGE_ERROR}


class InterBrokerChannel:
    def __init__(self, broker) -> None:
        self.broker = broker
        self._connection: KafkaConnection | None = None
        self._lock = asyncio.Lock()

    async def _conn(self) -> KafkaConnection:
        async with self._lock:
            if self._connection is None or self._connection.closed:
                host, port = self.broker.bound[0]
                self._connection = await KafkaConnection.open(host if host not in ("", "0.0.0.0") else "127.0.0.1",
                                                              port, client_id=f"broker-{self.broker.broker_id}")
            return self._connection

    async def _request(self, api_key: int, version: int, body: dict):
        conn = await self._conn()
        try:
            return await conn.request(api_key, version, body)
        except (ConnectionClosed, ConnectionError):
            self._connection = None
            raise

    async def write_markers(self, marker: Marker) -> None:
        """Write one transaction's markers to every partition; retried until each is written or gone."""
        remaining = list(marker.partitions)
        delay = 0.05
        while remaining:
            by_topic: dict[str, list[int]] = {}
            for topic, p in remaining:
                by_topic.setdefault(topic, []).append(p)
            body = {"markers": [{"producer_id": marker.producer_id, "producer_epoch": marker.producer_epoch,
                                 "transaction_result": marker.commit, "coordinator_epoch": marker.coordinator_epoch,
                                 "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}]}
            try:
                resp = await self._request(WRITE_TXN_MARKERS, 1, body)
            except (ConnectionClosed, ConnectionError, OSError) as exc:
                log.warning("txn_markers_send_failed", error=str(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
                continue
            retry = []
            for topic in resp.markers[0].topics:
                for p in topic.partitions:
                    error = ErrorCode(p.error_code)
                    if error in RETRIABLE:
                        retry.append((topic.name, p.partition_index))
                    elif error:
                        # The partition is gone (deleted topic) or fenced the marker: nothing more to write.
                        log.warning("txn_marker_not_written", topic=topic.name, partition=p.partition_index,
                                    error=error.name, producer_id=marker.producer_id)
            remaining = retry
            if remaining:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        log.info("txn_markers_written", producer_id=marker.producer_id, commit=marker.commit,
                 partitions=len(marker.partitions))

    async def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                                partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn v4 with verify_only: are these partitions in the producer's open transaction?"""
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        body = {"transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                                  "producer_epoch": epoch, "verify_only": True,
                                  "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}]}
        try:
            resp = await self._request(ADD_PARTITIONS_TO_TXN, 4, body)
        except (ConnectionClosed, ConnectionError, OSError):
            return {tp: ErrorCode.NOT_ENOUGH_REPLICAS for tp in partitions}   # retriable for the producer
        if resp.error_code:
            return {tp: ErrorCode(resp.error_code) for tp in partitions}
        out = {}
        for result in resp.results_by_transaction:
            for topic in result.topic_results:
                for p in topic.results_by_partition:
                    out[(topic.name, p.partition_index)] = ErrorCode(p.partition_error_code)
        return out

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
