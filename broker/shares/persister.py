"""Where a share partition's state is kept: the share coordinator of its key, here or on another broker.

The share-partition leader reads the state at its leader epoch when it loads a share partition (the
coordinator stores that epoch, fencing the leaders before it) and writes its in-flight batches after each
change it answers (acknowledgements, releases, expired locks), awaiting the coordinator's acknowledgement
first. The group coordinator and the admin APIs read a summary, which fences no one. When this broker holds the
key's shard of ``__share_group_state`` the coordinator is called directly (and, in a cluster, a read or write
awaits the shard partition's ISR, as an acks=all produce); otherwise the request goes to the shard's leader
(ReadShareGroupState, WriteShareGroupState, InitializeShareGroupState, ReadShareGroupStateSummary).

Invariant: a write, or a read that stored a leader epoch, is acknowledged only once the state is as durable as
an acks=all record; errors a coordinator move causes are retried until ``RETRY_S`` has passed.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog

from kbroker.broker.coordination.shards import SHARE_STATE_TOPIC
from kbroker.broker.transactions.inter_broker import SEND_ERRORS
from kbroker.coordinators.share.coordinator import ShareState, done_in
from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("broker.shares")

INITIALIZE, READ, WRITE, DELETE, SUMMARY = 83, 84, 85, 86, 87
# A summary of no state (Kafka's answer for it): an initialized state that was never loaded reads the same only
# if it was initialized at state epoch 0, where the group coordinator initializes at the group's epoch (1 on)
NO_STATE = (0, 0, -1, -1)
RETRY_S = 15.0
MOVING = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
          ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT}


@dataclass
class Summary:
    state_epoch: int
    leader_epoch: int
    start_offset: int
    delivery_complete_count: int


class SharePersister:
    def __init__(self, broker) -> None:
        self.broker = broker

    async def read(self, group: str, topic_id: bytes, partition: int, leader_epoch: int
                   ) -> tuple[ErrorCode, ShareState | None]:
        def here():
            return self.broker.share_coordinator.read((group, topic_id, partition), leader_epoch)

        async def there(leader):
            answer = await self.broker.inter_broker._request(leader, READ, 0, {"group_id": group, "topics": [
                {"topic_id": topic_id, "partitions": [{"partition": partition, "leader_epoch": leader_epoch}]}]})
            p = answer.results[0].partitions[0]
            if p.error_code == ErrorCode.INVALID_REQUEST:   # (never initialized, in Kafka's words for it: this
                return ErrorCode.NONE, None                   # broker sends no negative partition)
            if p.error_code or p.state_epoch < 0:
                return ErrorCode(p.error_code), None
            return ErrorCode.NONE, ShareState(p.state_epoch, leader_epoch, p.start_offset,
                                              [(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                               for b in p.state_batches])
        return await self._call(group, topic_id, partition, here, there)   # (a higher leader epoch was stored)

    async def summary(self, group: str, topic_id: bytes, partition: int) -> tuple[ErrorCode, Summary | None]:
        """The state's epochs, start offset and done records without its batches, checking and storing no
        leader epoch (ReadShareGroupStateSummary): what the group coordinator and the admin APIs read, where
        no share-partition leader is reading. None if it was never initialized."""
        def here():
            state = self.broker.share_coordinator.states.get((group, topic_id, partition))
            return ErrorCode.NONE, None if state is None else Summary(
                state.state_epoch, state.leader_epoch, state.start_offset, state.delivery_complete_count)

        async def there(leader):
            answer = await self.broker.inter_broker._request(leader, SUMMARY, 1, {"group_id": group, "topics": [
                {"topic_id": topic_id, "partitions": [{"partition": partition, "leader_epoch": -1}]}]})
            p = answer.results[0].partitions[0]
            if p.error_code or (p.state_epoch, p.leader_epoch, p.start_offset, p.delivery_complete_count) == NO_STATE:
                return ErrorCode(p.error_code), None
            return ErrorCode.NONE, Summary(p.state_epoch, p.leader_epoch, p.start_offset, p.delivery_complete_count)
        return await self._call(group, topic_id, partition, here, there, replicate=False)

    async def initialize(self, group: str, topic_id: bytes, partition: int, state_epoch: int,
                         start_offset: int) -> ErrorCode:
        def here():
            return self.broker.share_coordinator.initialize((group, topic_id, partition), state_epoch,
                                                            start_offset), None

        async def there(leader):
            answer = await self.broker.inter_broker._request(leader, INITIALIZE, 0, {"group_id": group, "topics": [
                {"topic_id": topic_id, "partitions": [{"partition": partition, "state_epoch": state_epoch,
                                                       "start_offset": start_offset}]}]})
            return ErrorCode(answer.results[0].partitions[0].error_code), None
        return (await self._call(group, topic_id, partition, here, there))[0]

    async def write(self, group: str, topic_id: bytes, partition: int, state_epoch: int, leader_epoch: int,
                    start_offset: int, batches: list) -> ErrorCode:
        """``batches``: every batch in flight (the coordinator's merge then changes nothing a leader did not),
        with how many of their records are done."""
        done = done_in(batches)

        def here():
            return self.broker.share_coordinator.write((group, topic_id, partition), state_epoch, leader_epoch,
                                                       start_offset, batches, done), None

        async def there(leader):
            answer = await self.broker.inter_broker._request(leader, WRITE, 1, {"group_id": group, "topics": [
                {"topic_id": topic_id, "partitions": [{
                    "partition": partition, "state_epoch": state_epoch, "leader_epoch": leader_epoch,
                    "start_offset": start_offset, "delivery_complete_count": done, "state_batches": [
                        {"first_offset": f, "last_offset": la, "delivery_state": st, "delivery_count": c}
                        for f, la, st, c in batches]}]}]})
            return ErrorCode(answer.results[0].partitions[0].error_code), None
        return (await self._call(group, topic_id, partition, here, there))[0]

    async def delete(self, group: str, topic_id: bytes, partition: int) -> ErrorCode:
        def here():
            return self.broker.share_coordinator.delete((group, topic_id, partition)), None

        async def there(leader):
            answer = await self.broker.inter_broker._request(leader, DELETE, 0, {"group_id": group, "topics": [
                {"topic_id": topic_id, "partitions": [{"partition": partition}]}]})
            return ErrorCode(answer.results[0].partitions[0].error_code), None
        return (await self._call(group, topic_id, partition, here, there))[0]

    async def _call(self, group, topic_id, partition, here, there, replicate: bool = True):
        """``here()`` or ``await there(leader)``, each (error, value); retried while the shard moves."""
        coordination = self.broker.coordination
        index = self.broker.share_coordinator.partition_for(group, topic_id, partition)
        loop = asyncio.get_running_loop()
        deadline, delay = loop.time() + RETRY_S, 0.05
        while True:
            error, value = coordination.ensure_share_state_topic(), None
            if not error:
                leader = self.broker.inter_broker._leader_of(SHARE_STATE_TOPIC, index)
                try:
                    if self.broker.cluster is None or leader == self.broker.broker_id:
                        error = coordination.share_coordinator_error(index)
                        if not error:
                            error, value = here()
                            if not error and replicate and self.broker.cluster is not None:
                                error = ErrorCode(await self.broker.replica_manager.wait_replicated(
                                    SHARE_STATE_TOPIC, index, self.broker.config["offsets.commit.timeout.ms"]))
                    elif leader < 0:
                        error = ErrorCode.COORDINATOR_NOT_AVAILABLE
                    else:
                        error, value = await there(leader)
                except SEND_ERRORS:
                    error = ErrorCode.COORDINATOR_NOT_AVAILABLE
            if error not in MOVING or loop.time() > deadline:
                if error:
                    log.warning("share_state_call_failed", group=group, partition=partition, error=error.name)
                return error, value
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
