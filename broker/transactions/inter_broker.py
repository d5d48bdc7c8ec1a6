"""Requests this broker sends to partition leaders and coordinators, over the Kafka protocol through ``client/``.

The transaction coordinator writes markers with WriteTxnMarkers to each
partition's leader, and a partition leader checks a transactional produce
with AddPartitionsToTxn v4 (verify only, KIP-890) at the transaction's
coordinator, or from Produce v12 (transactions V2) adds the partition there
with AddPartitionsToTxn v5. In a cluster those are other brokers, reached on the
inter-broker listener. Markers for partitions this broker leads are appended
here directly (``broker.txn_markers``, what the WriteTxnMarkers handler
runs), and a verification this broker coordinates is answered here
(``verify_here``, what AddPartitionsToTxn v4 runs; ``add_here`` for an add): a request to its own
listener would cost every transaction another round of encoding, loopback
socket and dispatch.

Invariant: one connection per destination broker, opened on first use (with
the versions it serves asked, as Kafka's brokers ask each other) and replaced
when it breaks; a request to a broker nobody knows the address of fails like
a broken connection (the caller retries).
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

import structlog

from kbroker.broker.transactions.txn_markers import append_markers
from kbroker.client.connection import ConnectionClosed, KafkaConnection, NoCommonVersion
from kbroker.coordinators.transaction.metadata import Marker
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("broker.inter_broker")

WRITE_TXN_MARKERS, ADD_PARTITIONS_TO_TXN = 27, 24
RETRIABLE = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_SERVER_ERROR, ErrorCode.REQUEST_TIMED_OUT,
             ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
             ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.KAFKA_STORAGE_ERROR}
SEND_ERRORS = (ConnectionClosed, ConnectionError, OSError, asyncio.TimeoutError)


class InterBrokerChannel:
    def __init__(self, broker) -> None:
        self.broker = broker
        self._connections: dict[int, KafkaConnection] = {}
        # One lock per destination: a peer slow to answer its ApiVersions (paused, or cut off after its
        # handshake) holds up no request to another broker.
        self._locks: dict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._warned_unverified = False   # (a coordinator too old to verify: warned of once)

    def _address(self, broker_id: int) -> tuple[str, int] | None:
        if self.broker.cluster is not None and broker_id != self.broker.broker_id:
            return self.broker.cluster.cache.endpoint(broker_id, self.broker.config.inter_broker_listener)
        host, port = self.broker.bound[0]
        return ("127.0.0.1" if host in ("", "0.0.0.0") else host), port

    async def _conn(self, broker_id: int) -> KafkaConnection:
        async with self._locks[broker_id]:
            conn = self._connections.get(broker_id)
            if conn is None or conn.closed:
                address = self._address(broker_id)
                if address is None:
                    raise ConnectionError(f"broker {broker_id} has no known address")
                conn = await KafkaConnection.open(*address, client_id=f"broker-{self.broker.broker_id}", timeout=10,
                                                  negotiate=True, **self.broker.inter_broker_connect)
                self._connections[broker_id] = conn
            return conn

    async def _request(self, broker_id: int, api_key: int, version: int, body: dict, lowest: int = 0):
        """``version``: the highest this broker would send; the peer's highest when that is lower (a Kafka broker
        of an earlier release in the cluster: Kafka 3.9 serves WriteTxnMarkers up to v1). NoCommonVersion when
        the peer serves nothing from ``lowest`` (the connection is kept)."""
        conn = await self._conn(broker_id)
        version = conn.usable(api_key, version, lowest)
        try:
            return await conn.request(api_key, version, body)
        except SEND_ERRORS:
            self._connections.pop(broker_id, None)
            await conn.close()
            raise

    def _leader_of(self, topic: str, partition: int) -> int:
        info = self.broker.partition_info(topic, partition)
        return -1 if info is None else info[0]

    async def write_markers(self, marker: Marker) -> None:
        """Write one transaction's markers to every partition's leader; retried until each is written or gone."""
        remaining = list(marker.partitions)
        delay = 0.05
        while remaining:
            by_leader: dict[int, list[tuple[str, int]]] = {}
            for tp in remaining:
                by_leader.setdefault(self._leader_of(*tp), []).append(tp)
            unled = by_leader.pop(-1, [])
            sent = await asyncio.gather(*(self._send_markers(leader, marker, tps)
                                          for leader, tps in by_leader.items()))
            remaining = unled + [tp for retry in sent for tp in retry]
            if remaining:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        log.debug("txn_markers_written", producer_id=marker.producer_id, commit=marker.commit,
                 partitions=len(marker.partitions))

    def write_markers_now(self, marker: Marker) -> list[tuple[str, int]]:
        """Append the markers here and now if this broker leads every partition and is each one's whole ISR
        (no follower to wait for, so the append is the whole write); the partitions still to write: all of
        them when that is not so (``write_markers`` then takes them), those that failed retriably otherwise.

        A single broker thus completes a transaction right after EndTxn's answer (the coordinator's
        after-response action), with no task and no extra event-loop turns between the Prepare state, the
        markers and the Complete state."""
        rm, me = self.broker.replica_manager, self.broker.broker_id
        for tp in marker.partitions:
            partition = rm.partitions.get(tp)
            if partition is None or not partition.is_leader or partition.maximal_isr != [me]:
                return marker.partitions
        resp = append_markers(self.broker, self._markers_body(marker, marker.partitions)["markers"])
        if isinstance(resp, asyncio.Future):
            # Not expected (with this broker as the whole ISR the high watermark moved with each append);
            # should it happen, ``write_markers`` writes them again, and a repeated marker changes nothing.
            return marker.partitions
        return self._to_retry(resp, marker)

    @staticmethod
    def _markers_body(marker: Marker, partitions: list[tuple[str, int]]) -> dict:
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        return {"markers": [{"producer_id": marker.producer_id, "producer_epoch": marker.producer_epoch,
                             "transaction_result": marker.commit, "coordinator_epoch": marker.coordinator_epoch,
                             "transaction_version": marker.transaction_version,
                             "topics": [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]}]}

    async def _send_markers(self, leader: int, marker: Marker, partitions: list[tuple[str, int]]
                            ) -> list[tuple[str, int]]:
        """One WriteTxnMarkers to one leader; returns the partitions to try again."""
        body = self._markers_body(marker, partitions)
        if leader == self.broker.broker_id:
            resp = append_markers(self.broker, body["markers"])
            if isinstance(resp, asyncio.Future):
                resp = await resp
        else:
            try:
                resp = await self._request(leader, WRITE_TXN_MARKERS, 2, body)
            except SEND_ERRORS as exc:
                log.warning("txn_markers_send_failed", broker=leader, error=str(exc))
                return partitions
        return self._to_retry(resp, marker)

    @staticmethod
    def _to_retry(resp, marker: Marker) -> list[tuple[str, int]]:
        """The partitions of a WriteTxnMarkers answer to write again; other errors are logged and dropped."""
        retry = []
        for topic in resp["markers"][0]["topics"]:   # (a decoded answer is a dict too)
            for p in topic["partitions"]:
                error = ErrorCode(p["error_code"])
                if error in RETRIABLE:
                    retry.append((topic["name"], p["partition_index"]))
                elif error:
                    # The partition is gone (deleted topic) or fenced the marker: nothing more to write.
                    log.warning("txn_marker_not_written", topic=topic["name"], partition=p["partition_index"],
                                error=error.name, producer_id=marker.producer_id)
        return retry

    async def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                                partitions: list[tuple[str, int]], add: bool = False
                                ) -> dict[tuple[str, int], ErrorCode]:
        """AddPartitionsToTxn v4 with verify_only: are these partitions in the producer's open transaction?
        With ``add`` (a transactional Produce v12+, transactions V2), v5 without it: add them, opening the
        transaction if none is, and answer once that is on the state partition's ISR."""
        by_topic: dict[str, list[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, []).append(p)
        body = {"transactions": [{"transactional_id": transactional_id, "producer_id": producer_id,
                                  "producer_epoch": epoch, "verify_only": not add,
                                  "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}]}
        coordinator = self._leader_of("__transaction_state",
                                      self.broker.txn_coordinator.partition_for(transactional_id))
        if coordinator == self.broker.broker_id:
            if add:
                return await add_here(self.broker, transactional_id, producer_id, epoch, partitions)
            return verify_here(self.broker, transactional_id, producer_id, epoch, partitions)
        try:
            resp = await self._request(coordinator, ADD_PARTITIONS_TO_TXN, 5 if add else 4, body, 5 if add else 4)
        except NoCommonVersion:
            # A coordinator of a release before KIP-890 (Kafka 3.5 and older) cannot verify: as Kafka's brokers
            # do, the write goes on unverified. One before transactions V2 cannot add for a Produce v12: that
            # producer follows this broker's transaction.version 2, which such a cluster must lower to 1.
            if not self._warned_unverified:
                self._warned_unverified = True
                log.warning("txn_verification_unsupported", coordinator=coordinator, add=add)
            return {tp: ErrorCode.INVALID_TXN_STATE if add else ErrorCode.NONE for tp in partitions}
        except SEND_ERRORS:
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
        for conn in list(self._connections.values()):
            await conn.close()
        self._connections.clear()


def verify_here(broker, transactional_id: str, producer_id: int, epoch: int,
                partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
    """KIP-890's verification at this broker as the transaction's coordinator: each partition's error (NONE
    when it is in the producer's open transaction), or this broker's reason not to coordinate it."""
    error = broker.coordination.transaction_coordinator_error(transactional_id)
    if error:
        return {tp: error for tp in partitions}
    return broker.txn_coordinator.verify_partitions(transactional_id, producer_id, epoch, partitions)


async def add_here(broker, transactional_id: str, producer_id: int, epoch: int,
                   partitions: list[tuple[str, int]]) -> dict[tuple[str, int], ErrorCode]:
    """Transactions V2's implicit add at this broker as the transaction's coordinator: the partitions join the
    producer's transaction (opened if none is), and the answer waits until that state is on the state
    partition's ISR, so a coordinator that takes over knows every partition the data went to."""
    coordinator = broker.txn_coordinator
    error = broker.coordination.transaction_coordinator_error(transactional_id) or \
        coordinator.add_partitions(transactional_id, producer_id, epoch, partitions, 5)
    if not error and coordinator.state_replicated is not None:
        waiting = coordinator.state_replicated(coordinator.partition_for(transactional_id))
        if waiting is not None:
            error = await waiting()
            if error:   # (the shard moved or its ISR is short: the producer retries)
                error = ErrorCode.NOT_COORDINATOR
    return {tp: error for tp in partitions}
