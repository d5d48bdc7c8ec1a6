"""IsrProposals: a leader's ISR changes on their way to the controller (Kafka's AlterPartitionManager).

Invariants:
* a partition has at most one change in flight (its ``pending_isr``); a
  change proposed for it meanwhile is dropped, and proposed again by whoever
  sees the need next (a follower's fetch, the lag check);
* at most one AlterPartition is in flight: changes proposed while it is out
  wait and leave together in the next, so a follower that comes back to n
  partitions costs the controller a few requests and writes, not n (one
  request per change took 150 s at 2,000 partitions);
* an answer applies only to the partition object and leader epoch it was
  proposed for: a LeaderAndIsr in between makes it moot;
* a refusal keeps the partition's change blocked for ``REFUSED_BACKOFF_S``,
  a lost controller for ``UNREACHABLE_BACKOFF_S``, so that a leader does not
  ask again at every fetch.
"""

from __future__ import annotations

import asyncio

import structlog

from kbroker.client.connection import ConnectionClosed
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("broker.cluster.isr_proposals")
ALTER_PARTITION = 56
REFUSED_BACKOFF_S, UNREACHABLE_BACKOFF_S = 0.2, 0.5


class IsrProposals:
    def __init__(self, member) -> None:
        """``member``: the ClusterMember (its broker id and epoch, controller connection, task spawner)."""
        self.member = member
        self.rm = member.broker.replica_manager
        self.in_flight: set[tuple[str, int]] = set()   # proposed, sent or backing off
        self._waiting: dict[tuple[str, int], tuple] = {}   # tp -> (partition, new ISR, leader epoch, partition epoch)
        self._sender: asyncio.Task | None = None

    def propose(self, partition, new_isr: list[int]) -> None:
        tp = (partition.topic, partition.index)
        if tp in self.in_flight:
            return
        self.in_flight.add(tp)
        partition.pending_isr = new_isr
        self._waiting[tp] = (partition, new_isr, partition.leader_epoch, partition.partition_epoch)
        if self._sender is None or self._sender.done():
            self._sender = self.member.spawn(self._send_while_waiting())

    async def _send_while_waiting(self) -> None:
        while self._waiting:
            batch, self._waiting = self._waiting, {}
            await self._send(batch)

    async def _send(self, batch: dict) -> None:
        settled = False
        try:
            topics: dict[str, dict] = {}
            for (name, index), (partition, new_isr, leader_epoch, partition_epoch) in batch.items():
                topic = topics.setdefault(name, {"topic_name": name, "topic_id": partition.topic_id, "partitions": []})
                topic["partitions"].append({"partition_index": index, "leader_epoch": leader_epoch,
                                            "new_isr": new_isr, "leader_recovery_state": 0,
                                            "partition_epoch": partition_epoch})
            body = {"broker_id": self.member.broker_id, "broker_epoch": self.member.broker_epoch,
                    "topics": list(topics.values())}
            try:
                response = await self.member.controller_request(ALTER_PARTITION, 1, body)
            except (ConnectionClosed, ConnectionError, OSError, asyncio.TimeoutError) as exc:
                log.info("alter_partition_failed", partitions=len(batch), error=str(exc))
                self._release_later(batch, UNREACHABLE_BACKOFF_S)
                settled = True
                return
            error = ErrorCode(response.error_code)
            results = {} if error else {(t.topic_name, p.partition_index): p for t in response.topics
                                        for p in t.partitions}
            refused = {}
            for tp, proposal in batch.items():
                result = results.get(tp)
                outcome = error or (ErrorCode(result.error_code) if result is not None
                                    else ErrorCode.UNKNOWN_SERVER_ERROR)   # (a partition the answer left out)
                if outcome == ErrorCode.NONE:
                    self._apply(tp, proposal, result)
                    self._release(tp, proposal[0])
                else:
                    log.info("alter_partition_rejected", topic=tp[0], partition=tp[1], error=outcome.name)
                    refused[tp] = proposal
            settled = True
            self._release_later(refused, REFUSED_BACKOFF_S)
        finally:
            if not settled:   # (cancelled mid-request, or an answer that could not be read: nothing left blocked)
                self._release_all(batch)

    def _apply(self, tp, proposal, result) -> None:
        partition, _, leader_epoch, _ = proposal
        if self.rm.get(*tp) is not partition or partition.leader_epoch != leader_epoch:
            return
        self.rm.count_isr_change(partition.isr, result.isr)
        partition.isr = list(result.isr)
        partition.partition_epoch = result.partition_epoch
        # A shrink may let the HW move, which completes parked acks=all produces and fetches; they wait on the HW
        # alone, so an ISR change that leaves it where it was wakes none of them (trying each parked follower
        # fetch, a walk over its partitions, at each of n changes made a follower's return cost O(n²)).
        if partition.maybe_increment_high_watermark():
            self.rm.high_watermark_moved(tp)

    def _release(self, tp, partition) -> None:
        partition.pending_isr = None
        self.in_flight.discard(tp)

    def _release_later(self, batch: dict, delay_s: float) -> None:
        if batch:
            asyncio.get_running_loop().call_later(delay_s, self._release_all, batch)

    def _release_all(self, batch: dict) -> None:
        for tp, proposal in batch.items():
            self._release(tp, proposal[0])
