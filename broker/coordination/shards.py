"""Coordinator shards in a cluster: which internal partitions' coordinator state this broker holds.

A broker coordinates the groups (transactional ids, share partitions) whose ``__consumer_offsets``
(``__transaction_state``, ``__share_group_state``) partition it leads. When leadership of such a
partition arrives, the shard is loaded by replaying the partition to its log
end, in slices that yield to the event loop between them, so a large shard
does not stall other requests; meanwhile the shard's requests answer
COORDINATOR_LOAD_IN_PROGRESS, as Kafka's do. When leadership leaves, a load
in progress is cancelled and the shard is dropped; requests then answer
NOT_COORDINATOR.

Invariants:
* a shard is in ``loaded`` or ``loading`` only while this broker leads the partition;
* a shard's state enters the coordinator only from its replay or from the
  coordinator's own appends after the load finished.
"""

from __future__ import annotations

import asyncio
import time

import structlog

from kbroker.protocol.errors import ErrorCode

log = structlog.get_logger("broker.coordinator_shards")

OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC = "__consumer_offsets", "__transaction_state", "__share_group_state"
SLICE = 2000   # records replayed between two yields to the event loop


def replay(topic: str, store, index: int, apply):
    """Feed every record of an internal partition to ``apply(index, record)``; yields the running count after
    every SLICE records and once at the end (an asynchronous loader awaits between slices)."""
    count = 0
    for stored in store.records(index):
        try:
            apply(index, stored)
        except Exception as exc:   # one unreadable record must not lose the others
            log.warning("internal_record_unreadable", topic=topic, partition=index, error=str(exc))
        count += 1
        if count % SLICE == 0:
            yield count
    yield count


class CoordinatorShards:
    def __init__(self, broker) -> None:
        self.broker = broker
        self.loaded: set[tuple[str, int]] = set()
        self.loading: dict[tuple[str, int], asyncio.Task] = {}

    def error(self, topic: str, index: int) -> ErrorCode:
        """NONE if this broker serves the shard now; else what the client retries on."""
        tp = (topic, index)
        if tp in self.loaded:
            return ErrorCode.NONE
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if tp in self.loading else ErrorCode.NOT_COORDINATOR

    def leadership_changed(self, topic: str, index: int, is_leader: bool) -> None:
        tp = (topic, index)
        if topic not in (OFFSETS_TOPIC, TXN_TOPIC, SHARE_STATE_TOPIC):
            return
        held = tp in self.loaded or tp in self.loading
        if is_leader and not held:
            self.loading[tp] = asyncio.get_running_loop().create_task(self._load(tp))
        elif not is_leader and held:
            task = self.loading.pop(tp, None)
            if task is not None:
                task.cancel()
            self.loaded.discard(tp)
            self._unload(tp)

    def _parts(self, topic: str):
        """(store, coordinator) of an internal topic: both coordinators replay, load and unload alike."""
        b = self.broker
        if topic == OFFSETS_TOPIC:
            return b.offsets_store, b.group_coordinator
        if topic == SHARE_STATE_TOPIC:
            return b.share_state_store, b.share_coordinator
        return b.txn_store, b.txn_coordinator

    async def _load(self, tp: tuple[str, int]) -> None:
        topic, index = tp
        store, coordinator = self._parts(topic)
        started, count = time.monotonic(), 0
        try:
            for count in replay(topic, store, index, coordinator.replay_stored):
                await asyncio.sleep(0)
        except asyncio.CancelledError:
            self._unload(tp)   # leadership left mid-load: nothing half-loaded stays
            raise
        if topic in (OFFSETS_TOPIC, SHARE_STATE_TOPIC):
            coordinator.loaded(index)
        else:   # markers carry the state partition's leader epoch as the coordinator epoch
            partition = self.broker.replica_manager.get(topic, index)
            coordinator.loaded(index, partition.leader_epoch if partition else 0)
        self.loading.pop(tp, None)
        self.loaded.add(tp)
        log.info("coordinator_shard_loaded", topic=topic, partition=index, records=count,
                 seconds=round(time.monotonic() - started, 3))

    def _unload(self, tp: tuple[str, int]) -> None:
        topic, index = tp
        count = self._parts(topic)[1].unload_partition(index)
        log.info("coordinator_shard_unloaded", topic=topic, partition=index, entries=count)

    def shutdown(self) -> None:
        for task in self.loading.values():
            task.cancel()
        self.loading.clear()
